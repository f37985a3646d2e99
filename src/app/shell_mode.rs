//! Shell mode's part of the pipeline: the real shell becomes the command, and a directive
//! at the top of a `-c` string becomes the escalation request.

use std::ffi::OsString;
use std::process::ExitCode;

use super::{finish, run_inner};
use crate::cli::RunArgs;
use crate::error::Error;
use crate::exec::ExecError;
use crate::policy::PolicyError;
use crate::shell::{self, Caller, Invocation, ShellCall};

/// A prefix call: one command string for `-c`.
pub(super) fn prefix_call(argv0: OsString, command: String) -> Invocation {
    let shell = ShellCall {
        args: vec!["-c".into(), command.into()],
        command_at: Some(1),
        version: false,
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
    /// The command string as the caller wrote it, for `retry.directive`.
    pub(super) command: Option<String>,
}

/// Runs the real shell with `shell`'s arguments, turning a directive into the request.
pub(super) fn run_shell(mut args: RunArgs, mut shell: ShellCall, caller: Caller) -> ExitCode {
    let mode_hint = args.knobs.sandbox;
    let Some(real) = shell::real_shell() else {
        let err = Error::Exec(ExecError::NotFound(
            "/bin/bash or /bin/sh (set SANDGATE_REAL_SHELL)".into(),
        ));
        return finish(Err(err), mode_hint);
    };
    let original = shell.command().map(|c| c.to_string_lossy().into_owned());
    if let (Some(command), Some(at)) = (&original, shell.command_at) {
        match shell::directive(command) {
            Ok(None) => {}
            Ok(Some((directive, rest))) => {
                if args.sandbox_permissions.is_some() || args.justification.is_some() {
                    let err = PolicyError::Directive(
                        "a directive and --sandbox-permissions/--justification both ask: use one"
                            .into(),
                    );
                    return finish(Err(err.into()), mode_hint);
                }
                args.sandbox_permissions = Some(directive.mode);
                args.justification = Some(directive.justification);
                shell.args[at] = rest.into();
            }
            Err(message) => return finish(Err(PolicyError::Directive(message).into()), mode_hint),
        }
    }
    args.command = std::iter::once(real.clone().into_os_string())
        .chain(shell.args)
        .collect();
    let shellish = Shellish {
        argv0: real.file_name().map(OsString::from),
        command: original,
    };
    finish(run_inner(args, shellish, caller), mode_hint)
}
