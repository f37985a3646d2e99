//! Shell mode's part of the pipeline: the real shell becomes the command, and a directive
//! at the top of a `-c` string becomes the escalation request.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use super::{finish, run_inner, script_head};
use crate::approval::TtySetting;
use crate::cli::RunArgs;
use crate::denial::Form;
use crate::error::Error;
use crate::exec::ExecError;
use crate::policy::PolicyError;
use crate::shell::{self, Caller, Directive, Invocation, ShellCall, Source};

/// A prefix call: one command string for `-c`.
pub(super) fn prefix_call(argv0: OsString, command: String) -> Invocation {
    let shell = ShellCall {
        args: vec!["-c".into(), command.into()],
        source: Source::Command(1),
        version: false,
        interactive: false,
    };
    Invocation::Shell {
        sandgate_args: vec![argv0],
        shell,
    }
}

/// What shell mode adds to a call.
#[derive(Debug, Default)]
pub(super) struct Shellish {
    /// argv[0] for the real shell (`bash`, as `bash -c` would show it in messages).
    pub(super) argv0: Option<OsString>,
    /// How the shell got its script, for the retry.
    pub(super) form: Form,
    /// The invocation a retry starts from (see [`retry_base`]).
    pub(super) retry: Option<Vec<OsString>>,
}

/// Runs the real shell with `shell`'s arguments, turning a directive into the request.
pub(super) fn run_shell(
    mut args: RunArgs,
    sandgate_args: &[OsString],
    mut shell: ShellCall,
    caller: Caller,
) -> ExitCode {
    let mode_hint = args.knobs.sandbox;
    let Some(real) = shell::real_shell() else {
        let err = Error::Exec(ExecError::NotFound(
            "/bin/bash or /bin/sh (set SANDGATE_REAL_SHELL)".into(),
        ));
        return finish(Err(err), mode_hint);
    };
    if let Some(err) = program_as_script(&shell, caller) {
        return finish(Err(err), mode_hint);
    }
    let original = shell.command().map(|c| c.to_string_lossy().into_owned());
    let utf8 = shell.command().is_none_or(|c| c.to_str().is_some());
    // The model's command inside an agent's wrapper, where its directive is.
    let inner = original.as_deref().and_then(shell::inner_command);
    // A directive left in place (a script's, one inside an agent's wrapper) asks only where
    // the shell reads its line as a comment: an interactive shell may run it as a command.
    let in_place_asks = !shell.interactive;
    // The head of a script file, when sandgate can read the file the shell will run.
    let file_head = match shell.source {
        Source::File(_) if in_place_asks => shell
            .script()
            .and_then(|name| script_head::of_file(name.as_ref())),
        _ => None,
    };
    let found = found_directive(
        &mut shell,
        original.as_deref(),
        inner.as_deref(),
        file_head.as_deref(),
        in_place_asks,
    );
    if let Err(err) = take_directive(&mut args, found) {
        return finish(Err(err), mode_hint);
    }
    let retry = retry_base(sandgate_args, caller, &real, &shell.args);
    let form = form_of(&shell, original, inner, utf8, file_head.is_some());
    args.command = std::iter::once(real.clone().into_os_string())
        .chain(shell.args)
        .collect();
    let shellish = Shellish {
        argv0: real.file_name().map(OsString::from),
        form,
        retry: Some(retry),
    };
    finish(run_inner(args, shellish, caller), mode_hint)
}

/// A person's `sandgate ls` means `sandgate -- ls`: the error that says so, where bash
/// would only say that it cannot execute a binary file. Through a link sandgate is bash,
/// and says what bash says.
fn program_as_script(shell: &ShellCall, caller: Caller) -> Option<Error> {
    if caller != Caller::Person {
        return None;
    }
    let name = shell
        .script()
        .filter(|_| matches!(shell.source, Source::File(_)))?;
    let program = script_head::program_named(name.as_ref())?;
    Some(Error::Exec(ExecError::ProgramAsScript(
        program,
        name.to_owned(),
    )))
}

/// How a retry of this shell-mode call is spelled (see [`Form`]): `original` is its `-c`
/// string, `inner` the command an agent's guard wraps in it, `utf8` whether JSON can carry
/// it as it is, `readable_script` whether sandgate can read the script file it runs.
fn form_of(
    shell: &ShellCall,
    original: Option<String>,
    inner: Option<String>,
    utf8: bool,
    readable_script: bool,
) -> Form {
    match (shell.source, original) {
        // The retry's new command string, only when JSON can carry the command as it is:
        // the caller's own command, without the directive it may already carry.
        (Source::Command(_), Some(command)) if utf8 => {
            let command = inner.unwrap_or(command);
            Form::ShellCommand(match shell::directive(&command) {
                Ok(Some((_, rest))) => rest,
                _ => command,
            })
        }
        // A directive works where sandgate can read the script; elsewhere, the flags.
        (Source::File(_), _) if readable_script => Form::Script,
        (Source::Stdin, _) if !shell.version && !std::io::stdin().is_terminal() => Form::Stdin,
        _ => Form::Argv,
    }
}

/// Makes `args` the call shell mode makes of `-c string` (an interactive shell aside): the
/// request of its directive line, found where a run finds it, and the real shell running
/// the rest.
pub(super) fn as_shell_command(args: &mut RunArgs, string: &str) -> Result<(), Error> {
    let real = shell::real_shell().ok_or_else(|| {
        Error::Exec(ExecError::NotFound(
            "/bin/bash or /bin/sh (set SANDGATE_REAL_SHELL)".into(),
        ))
    })?;
    let Invocation::Shell { mut shell, .. } = prefix_call(OsString::new(), string.to_owned())
    else {
        return Err(PolicyError::NoCommand.into());
    };
    let inner = shell::inner_command(string);
    let found = found_directive(&mut shell, Some(string), inner.as_deref(), None, true);
    take_directive(args, found)?;
    args.command = std::iter::once(real.into_os_string())
        .chain(shell.args)
        .collect();
    Ok(())
}

/// The directive of a shell-mode call, where the caller wrote it: the first line of a `-c`
/// string (then removed from it), else that of the command an agent's guard wraps; the
/// head of a script file or of the script on stdin. `Err`: a directive that does not parse.
fn found_directive(
    shell: &mut ShellCall,
    original: Option<&str>,
    inner: Option<&str>,
    file_head: Option<&[u8]>,
    in_place_asks: bool,
) -> Result<Option<Directive>, String> {
    match shell.source {
        Source::Command(at) => match shell::directive(original.unwrap_or_default()) {
            Ok(Some((directive, _))) => rest_after_directive(&shell.args[at]).map(|rest| {
                shell.args[at] = rest;
                Some(directive)
            }),
            // Wrapped, the directive stays where it is: a comment to the shell there too.
            Ok(None) if !in_place_asks => Ok(None),
            Ok(None) => inner.map_or(Ok(None), |inner| {
                shell::directive(inner).map(|found| found.map(|(directive, _)| directive))
            }),
            Err(e) => Err(e),
        },
        Source::File(_) => file_head.map_or(Ok(None), shell::script_directive),
        Source::Stdin if shell.version || !in_place_asks => Ok(None),
        Source::Stdin => {
            script_head::of_stdin().map_or(Ok(None), |head| shell::script_directive(&head))
        }
    }
}

/// Makes a found directive the call's request; a directive beside the request flags, or
/// one that does not parse, is refused.
fn take_directive(
    args: &mut RunArgs,
    found: Result<Option<Directive>, String>,
) -> Result<(), Error> {
    match found {
        Ok(None) => {}
        Ok(Some(Directive {
            mode,
            justification,
        })) => {
            if args.sandbox_permissions.is_some() || args.justification.is_some() {
                let err = PolicyError::Directive(
                    "a directive and --sandbox-permissions/--justification both ask: use one"
                        .into(),
                );
                return Err(err.into());
            }
            args.sandbox_permissions = Some(mode);
            args.justification = Some(justification);
        }
        Err(message) => return Err(PolicyError::Directive(message).into()),
    }
    // From the arguments the shell will run: a `-c` string without its directive line.
    Ok(())
}

/// The invocation a retry of a shell-mode call starts from: sandgate with the caller's own
/// flags (`sandgate_args`, its argv[0] first) executing the real shell directly with the
/// shell's arguments as it runs them — `sandgate FLAGS -- SHELL ARGS…`, a `-c` string
/// without the directive line the call took for its request (to an interactive shell
/// without `interactive_comments`, that line is a command) — so that the request's
/// flags can be added and nothing of the shell's is read again by sandgate (a `--` would
/// run a program directly, a script could be named like a subcommand, a `-c` string may
/// already carry a directive). Through a link or a prefix form the link's answerer is
/// kept: sandgate by its own name may prompt on the terminal, which behind a link is the
/// agent's own pty, so the retry says `--no-tty` unless `SANDGATE_TTY=always`.
fn retry_base(
    sandgate_args: &[OsString],
    caller: Caller,
    real: &Path,
    shell_args: &[OsString],
) -> Vec<OsString> {
    // argv[0] is replaced by sandgate's own path where the retry is built.
    let mut base: Vec<OsString> = sandgate_args.iter().take(1).cloned().collect();
    if caller == Caller::AgentLink && TtySetting::from_env() != TtySetting::Always {
        base.push("--no-tty".into());
    }
    base.extend(sandgate_args.iter().skip(1).cloned());
    base.extend(["--".into(), real.as_os_str().to_owned()]);
    base.extend_from_slice(shell_args);
    base
}

/// The `-c` string `command` without its directive line, byte for byte (the shell runs
/// what the caller sent, not its UTF-8 rendering).
///
/// # Errors
/// When what is left starts with `-` or `+`: bash would take it for an option rather than
/// the command string, and run a later argument as the command under the mode granted.
fn rest_after_directive(command: &std::ffi::OsStr) -> Result<OsString, String> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = command.as_bytes();
    let rest = bytes
        .iter()
        .position(|b| *b == b'\n')
        .map_or(&[][..], |at| &bytes[at + 1..]);
    if matches!(rest.first(), Some(b'-' | b'+')) {
        return Err(
            "the command after the directive line starts with `-` or `+`, which the shell would read as an option, not as the command: start it on a word that is not an option"
                .into(),
        );
    }
    Ok(OsString::from_vec(rest.to_vec()))
}
