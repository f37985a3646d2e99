//! Raw command-line arguments (clap derive only). Nothing here touches the kernel or the
//! filesystem; `policy::resolve` turns these into a `Plan`.
//!
//! The man page and completions are generated from these definitions, so help text lives
//! next to each flag.

use std::ffi::OsString;
use std::num::NonZeroU64;
use std::path::PathBuf;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand, ValueHint};

use crate::limits::{Asked, Size};
use crate::policy::guarantee::{BackendChoice, Degradable};
use crate::policy::{preset, Approval, Mode};

/// What `--help` and the man page say beyond the one line: the boundary of the restricted
/// profiles.
const LONG_ABOUT: &str = "Run one command under a kernel-enforced sandbox profile.

In read-only and workspace-write nothing of the host session is reachable: /tmp and \
/dev/shm are private (workspace-write keeps one /tmp per workspace; `sandgate tmp` shows \
it), SysV IPC, message queues and abstract sockets are the sandbox's own, a unix socket is \
reached only beneath the workspace or the private temp or when named with \
--allow-unix-socket, no call acts on a process outside, and the terminal cannot be taken \
over. The call runs in a PID namespace with a /proc of its own: host processes, their \
command lines and sockets are out of sight, and every process of the call ends with the \
command unless --keep-background keeps them (`sandgate ps`, `sandgate stop`). Every \
create, write, rename and link in the writable areas is performed by sandgate's \
supervisor, which lets nothing make git or sandgate run a program later: in every \
repository, whether or not it existed at the start, a config or config.worktree changes \
only by a rename of a checked file into place that adds no program, nothing in a hooks \
directory becomes executable, and nothing named .sandgate can be made; the workspace's \
repository, its submodules and worktrees keep commondir, gitdir, hooks and \
info/attributes as they are. A workspace derived from the current directory \
that is or holds your home is refused; shell startup files and other persistence paths \
stay read-only; credential files, and files in your home's dot-directories that only you \
may read, read as empty (--unhide), and secret-looking variables are withheld (--keep-env). \
A terminal prompt grants only on the code it shows, and never through the \
agent links (sandgate-sh, a bash link, sandgate-prefix) unless SANDGATE_TTY=always. Every \
private tmpfs is bounded (--tmpfs-size); --limit-pids and --limit-memory bound the call in a \
cgroup of its own where the kernel lets sandgate make one; the terminal's modes are put back \
when the command ends.";

/// Every way to run a command, then the subcommands. `-c`, `-s` and SCRIPT are read the
/// way bash reads them, so they are not clap arguments and are spelled out here.
const USAGE: &str = concat!(
    "sandgate [OPTIONS] -- CMD [ARGS]...               run CMD directly\n",
    "       sandgate [OPTIONS] -c CMDSTRING [ARG0 [ARGS]...]  run it through the real shell\n",
    "       sandgate [OPTIONS] SCRIPT [ARGS]...               run a script file through the shell\n",
    "       sandgate [OPTIONS] -s [ARGS]...                   run the script on stdin (as does no CMD\n",
    "                                                           with stdin not a terminal)\n",
    "       sandgate prefix CMDSTRING                         one command string as one argument\n",
    "       sandgate [OPTIONS] <COMMAND>                      doctor, presets, ps, stop, tmp, ...",
);

/// Run one command under a kernel-enforced sandbox profile.
#[derive(Debug, Parser)]
#[command(
    name = "sandgate",
    version,
    args_conflicts_with_subcommands = true,
    override_usage = USAGE,
    long_about = LONG_ABOUT,
    after_help = "Exit status: the command's own; when it dies of signal N, sandgate dies of N too; \
                  124 it ran past --timeout; 64 usage; \
                  77 escalation not granted; 78 profile cannot be enforced here, or the \
                  configuration, workspace, a writable root or the private temp is not usable; \
                  125 internal error; 126 not executable; 127 not found."
)]
pub struct Cli {
    #[command(subcommand)]
    pub subcommand: Option<Sub>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// The standing-policy knobs: a preset, or the mode and approval policy directly.
#[derive(Debug, Args, Clone, Default)]
pub struct Knobs {
    /// A preset: read-only, workspace-write (alias auto), full-access, ci, locked. Sets the
    /// mode and the approval policy; `--sandbox` and `--approval` override either.
    #[arg(long, value_name = "KEY", env = "SANDGATE_PRESET", value_parser = Closed::presets(), hide_possible_values = true)]
    pub preset: Option<String>,

    /// Sandbox mode for this call: read-only, workspace-write or full-access
    /// (alias danger-full-access). Default: workspace-write.
    #[arg(long, value_name = "MODE", value_parser = Closed::modes(), env = "SANDGATE_SANDBOX", hide_possible_values = true)]
    pub sandbox: Option<Mode>,

    /// Approval policy: on-request (ask when a call requests a wider mode) or never
    /// (reject every request without asking).
    #[arg(long, value_name = "POLICY", value_parser = Closed::approvals(), env = "SANDGATE_APPROVAL", hide_possible_values = true)]
    pub approval: Option<Approval>,
}

/// Flags for running a command (the default action).
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub knobs: Knobs,

    /// The workspace (writable under workspace-write). Default: the git top-level of the
    /// current directory, else the current directory; inside another sandgate's sandbox,
    /// that sandbox's workspace when the current directory is in it. `/` is refused.
    #[arg(long, value_name = "DIR", env = "SANDGATE_WORKSPACE")]
    pub workspace: Option<PathBuf>,

    /// An extra directory writable under workspace-write (repeatable). Its unix sockets
    /// stay unreachable unless named with --allow-unix-socket.
    #[arg(long = "writable-root", value_name = "DIR")]
    pub writable_roots: Vec<PathBuf>,

    /// Let connects reach this unix socket although it lies outside the workspace and the
    /// private temp (repeatable; SANDGATE_ALLOW_UNIX_SOCKETS takes a colon-separated list;
    /// also `allow_unix_sockets` in the user or managed configuration, never the project's).
    #[arg(
        long = "allow-unix-socket",
        value_name = "PATH",
        env = "SANDGATE_ALLOW_UNIX_SOCKETS",
        value_delimiter = ':'
    )]
    pub allow_unix_sockets: Vec<PathBuf>,

    /// Let the sandbox reach this host through sandgate's proxy (repeatable, or
    /// comma-separated; SANDGATE_ALLOW_HOSTS too; also `allowed_hosts` in the user or managed
    /// configuration). PATTERN is a host, `*.domain` (its subdomains), or an IP address, with
    /// an optional `:PORT` (default 80 and 443); `@registries` names the package registries.
    /// The sandbox still has no direct network: HTTP_PROXY, HTTPS_PROXY and ALL_PROXY point
    /// at the proxy, which refuses every other host.
    #[arg(
        long = "allow-host",
        value_name = "PATTERN",
        env = "SANDGATE_ALLOW_HOSTS",
        value_delimiter = ',',
        value_hint = ValueHint::Hostname
    )]
    pub allow_hosts: Vec<String>,

    /// Let allowed hosts resolve to loopback, private, link-local or other non-public
    /// addresses (a registry mirror on the local network); refused otherwise.
    #[arg(long)]
    pub allow_private_hosts: bool,

    /// Run without the guarantees (and explicit limits) NAMEd, when this machine cannot
    /// hold them: private-tmp, process-boundary, ipc, scopes, … (the bare flag lists them).
    /// Protected paths and secrets are never given up. sandgate says on stderr, as a
    /// marker, what the run lacks.
    #[arg(long, value_name = "NAME,…", num_args = 0..=1, require_equals = true, default_missing_value = "", action = clap::ArgAction::Append, value_parser = parse_degradable)]
    pub allow_degraded: Vec<Degradable>,

    /// How to enforce a restricted profile: `namespaces` (mount, PID, IPC and network
    /// namespaces, with landlock and seccomp inside), `landlock` (no namespace: landlock,
    /// seccomp and the supervisor), or `auto`, which uses namespaces where the kernel makes
    /// them and landlock where it refuses them.
    #[arg(long, value_enum, value_name = "BACKEND", default_value_t = BackendChoice::Auto, env = "SANDGATE_BACKEND")]
    pub backend: BackendChoice,

    /// End the command and every process it started after DURATION (30s, 10m, 1h 30m):
    /// SIGTERM to the command, SIGKILL to everything left 2 seconds later; sandgate then
    /// exits 124 with a `timeout` marker. Also SANDGATE_TIMEOUT, and `timeout` in the user
    /// or managed configuration (the managed one is a ceiling; a project's may only
    /// shorten it).
    #[arg(long, value_name = "DURATION", env = "SANDGATE_TIMEOUT", value_parser = parse_time_limit, value_hint = ValueHint::Other)]
    pub timeout: Option<std::time::Duration>,

    /// Let what the command leaves running (a server started with `&`) outlive the call,
    /// in the call's PID namespace: `sandgate ps` lists it, `sandgate stop` ends it.
    /// Without it, every process of a read-only or workspace-write call ends with the
    /// command. Also SANDGATE_KEEP_BACKGROUND=1, and `keep_background` in the user
    /// configuration (never the project's).
    #[arg(long, env = "SANDGATE_KEEP_BACKGROUND", value_parser = clap::builder::BoolishValueParser::new())]
    pub keep_background: bool,

    /// Ask to run this one call under a strictly wider MODE (workspace-write or
    /// full-access); needs --justification.
    #[arg(
        long,
        value_name = "MODE",
        env = "SANDGATE_SANDBOX_PERMISSIONS",
        value_parser = Closed::requested_modes(),
        hide_possible_values = true
    )]
    pub sandbox_permissions: Option<String>,

    /// Why this call needs the wider mode (shown to the approver; at most 1000 characters).
    #[arg(long, value_name = "TEXT", env = "SANDGATE_JUSTIFICATION", value_hint = ValueHint::Other)]
    pub justification: Option<String>,

    /// Approval endpoint: http://HOST:PORT/PATH or unix:/PATH (HTTP over a unix socket).
    #[arg(long, value_name = "URL", env = "SANDGATE_APPROVAL_ENDPOINT", value_hint = ValueHint::Url)]
    pub approval_endpoint: Option<String>,

    /// Approver program (run with /bin/sh -c): request JSON on stdin, reply on stdout.
    #[arg(long, value_name = "CMD", env = "SANDGATE_APPROVER", value_hint = ValueHint::CommandString)]
    pub approver: Option<String>,

    /// Seconds to wait for an answer before the request counts as cancelled: 1 to 86400
    /// (a day). 0 would cancel every request before anybody could answer, so it is refused.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 120,
        env = "SANDGATE_APPROVAL_TIMEOUT",
        value_parser = parse_timeout,
        value_hint = ValueHint::Other
    )]
    pub approval_timeout: u64,

    /// Never prompt on the terminal (also SANDGATE_TTY=never; always so when CI is set).
    ///
    /// The terminal prompt grants only when the person types the short random code it
    /// shows; y or yes alone rejects. Started through a link (sandgate-sh, a bash link,
    /// sandgate-prefix, or as sandgate prefix), sandgate does not prompt at all unless
    /// SANDGATE_TTY=always: an agent that owns the terminal could answer its own request,
    /// so without an approval endpoint or approver the outcome there is unavailable.
    /// SANDGATE_TTY=never is this flag; SANDGATE_TTY=always lets the terminal answer
    /// through the links too (set it only where a person owns the terminal); unset or auto
    /// prompts only when started as sandgate itself.
    #[arg(long)]
    pub no_tty: bool,

    /// Do not observe refusals: no filesystem denial markers (the sandbox is unchanged).
    #[arg(long)]
    pub no_observe: bool,

    /// Write every denial marker, uncapped, as NDJSON to FILE, the authoritative record
    /// (stderr shows markers only when the command fails, and at most 20).
    #[arg(long, value_name = "FILE", env = "SANDGATE_DENIAL_LOG")]
    pub denial_log: Option<PathBuf>,

    /// Pass the variable NAME to the command although its name looks like a secret
    /// (restricted profiles withhold names containing KEY, TOKEN, SECRET, PASSWORD, PASSWD,
    /// CREDENTIAL or AUTH). Repeatable; SANDGATE_KEEP_ENV takes a comma-separated list.
    #[arg(
        long = "keep-env",
        value_name = "NAME",
        env = "SANDGATE_KEEP_ENV",
        value_delimiter = ',',
        value_hint = ValueHint::Other
    )]
    pub keep_env: Vec<String>,

    /// Show PATH (and everything beneath it) although a profile entry or the hidden-files
    /// rule would make it read as empty (repeatable; SANDGATE_UNHIDE takes a
    /// colon-separated list; also `unhidden_paths` in the user configuration, never the
    /// project's). sandgate's own files stay hidden.
    #[arg(
        long = "unhide",
        value_name = "PATH",
        env = "SANDGATE_UNHIDE",
        value_delimiter = ':',
        value_hint = ValueHint::AnyPath
    )]
    pub unhide: Vec<PathBuf>,

    /// The audit log (default: $XDG_STATE_HOME/sandgate/audit.jsonl).
    #[arg(long, value_name = "FILE", env = "SANDGATE_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,

    #[command(flatten)]
    pub limits: LimitArgs,

    /// The command and its arguments.
    #[arg(value_name = "CMD", trailing_var_arg = true)]
    pub command: Vec<OsString>,
}

/// Resource limits of a restricted call (also `tmpfs_size`, `limit_pids`, `limit_memory`
/// in the user or managed configuration; a project's may only lower them).
#[derive(Debug, Args, Clone, Default)]
pub struct LimitArgs {
    /// Bound each private tmpfs (read-only's /tmp, /dev/shm) to SIZE: 512M, 2G, or a share
    /// of RAM such as 25%; inodes are bounded with it (one per 4 KiB). Default: the smaller
    /// of 1G and a quarter of RAM.
    #[arg(long, value_name = "SIZE", env = "SANDGATE_TMPFS_SIZE")]
    pub tmpfs_size: Option<Size>,

    /// Let the call's processes and threads number at most N, in a cgroup of its own; a
    /// fork past it fails with EAGAIN. Refused (78) where sandgate cannot make a cgroup,
    /// unless --allow-degraded.
    #[arg(long, value_name = "N", env = "SANDGATE_LIMIT_PIDS")]
    pub limit_pids: Option<NonZeroU64>,

    /// Let the call's processes use at most SIZE of memory (512M, 2G, or a share of RAM
    /// such as 50%), in a cgroup of its own; past it the kernel kills one of them. Refused
    /// (78) where sandgate cannot make a cgroup, unless --allow-degraded.
    #[arg(long, value_name = "SIZE", env = "SANDGATE_LIMIT_MEMORY")]
    pub limit_memory: Option<Size>,
}

impl LimitArgs {
    /// What the flags (or their variables) ask for.
    pub fn asked(&self) -> Asked {
        Asked {
            tmpfs_size: self.tmpfs_size,
            pids: self.limit_pids,
            memory: self.limit_memory,
        }
    }
}

/// sandgate's own subcommands.
#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Report what this kernel can enforce and which guarantees each profile holds here.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show what a call with these flags would do, without running anything: what would
    /// be writable, hidden, protected and reachable, and for a requested wider mode who
    /// would decide and what it would allow.
    Explain {
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
        /// The call: the flags a run takes, then `-- CMD [ARGS]` or `-c CMDSTRING` (read
        /// by sandgate itself, so that the definitions every call parses stay small).
        #[arg(
            value_name = "FLAGS_AND_COMMAND",
            trailing_var_arg = true,
            allow_hyphen_values = true
        )]
        call: Vec<OsString>,
    },
    /// List the presets and the current one.
    Presets {
        /// Print the table as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        knobs: Knobs,
        /// The workspace whose project file counts (default: as for a run).
        #[arg(long, value_name = "DIR", env = "SANDGATE_WORKSPACE")]
        workspace: Option<PathBuf>,
    },
    /// Work with the audit log.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Run one command string (a single argument) through the real shell, sandboxed: the
    /// form a shell *prefix* takes (Claude Code's CLAUDE_CODE_SHELL_PREFIX).
    Prefix {
        /// The command string.
        #[arg(value_name = "CMDSTRING")]
        command: String,
    },
    /// Print where a workspace's private temp lies on the host (what `/tmp` is inside its
    /// workspace-write sandboxes), or remove it with --clean.
    Tmp {
        /// The workspace (default: as for a run — the git top-level of the current
        /// directory, else the current directory).
        #[arg(long, value_name = "DIR", env = "SANDGATE_WORKSPACE")]
        workspace: Option<PathBuf>,
        /// Remove the directory and everything in it (never following a link inside).
        #[arg(long)]
        clean: bool,
    },
    /// List what calls with --keep-background left running: each kept PID namespace (its
    /// init's pid on the host, workspace, mode, command, start) and the processes in it.
    Ps {
        #[command(flatten)]
        which: KeptSelection,
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// End what calls with --keep-background left running: every process of each kept PID
    /// namespace is killed, and its record removed.
    Stop {
        #[command(flatten)]
        which: KeptSelection,
        /// Print what was stopped as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create the `sandgate-sh` and `sandgate-prefix` links to this binary in DIR.
    InstallLinks {
        /// Where to put the links (a directory on PATH, say ~/.local/bin).
        dir: PathBuf,
    },
    /// Answer approval questions: a server that holds each question until a person answers
    /// it (in a browser panel, with `allow`/`reject`, or at the `watch` prompt), and its
    /// clients.
    Approvals {
        #[command(subcommand)]
        action: ApprovalsAction,
    },
    /// Print a shell completion script.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

/// Whose kept processes `ps` and `stop` act on.
#[derive(Debug, Args)]
pub struct KeptSelection {
    /// The workspace (default: as for a run — the git top-level of the current directory,
    /// else the current directory).
    #[arg(long, value_name = "DIR", env = "SANDGATE_WORKSPACE")]
    pub workspace: Option<PathBuf>,
    /// Every workspace's.
    #[arg(long)]
    pub all: bool,
}

/// Where the approvals server listens.
#[derive(Debug, Args)]
pub struct ApprovalsSocket {
    /// The server's socket (default: $XDG_RUNTIME_DIR/sandgate/approvals.sock, else
    /// ~/.local/state/sandgate/approvals.sock).
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub socket: Option<PathBuf>,
}

/// What `sandgate approvals` does.
#[derive(Debug, Subcommand)]
pub enum ApprovalsAction {
    /// Hold every question sandgate asks at the socket until it is answered, withdrawn (its
    /// command gave up) or expired. A sandgate with no approval endpoint and no approver
    /// program asks a server at the default socket by itself.
    Serve {
        #[command(flatten)]
        socket: ApprovalsSocket,
        /// Also serve the browser panel on this loopback address (port 0: any free one);
        /// the first line printed is the panel's URL, with its token.
        #[arg(long, value_name = "127.0.0.1:PORT")]
        http: Option<std::net::SocketAddr>,
        /// Run this shell command for each new question, with the question as JSON on its
        /// stdin (to forward it to a desktop notification or a phone).
        #[arg(long, value_name = "CMD", value_hint = ValueHint::CommandString)]
        notify_cmd: Option<String>,
    },
    /// List the pending questions and the recent decisions.
    List {
        #[command(flatten)]
        socket: ApprovalsSocket,
        /// Print the board as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Let the command of question ID run once at the mode it asked for.
    Allow {
        #[command(flatten)]
        socket: ApprovalsSocket,
        /// The question's id, or the start of it (6 characters at least) if no other's
        /// starts the same.
        id: String,
    },
    /// Refuse question ID.
    Reject {
        #[command(flatten)]
        socket: ApprovalsSocket,
        /// The question's id, or the start of it (6 characters at least) if no other's
        /// starts the same.
        id: String,
    },
    /// Show each question as it arrives and take the answer here: typing the code shown
    /// allows the call once, any other line rejects it.
    Watch {
        #[command(flatten)]
        socket: ApprovalsSocket,
    },
}

/// What `sandgate audit` does.
#[derive(Debug, Subcommand)]
pub enum AuditAction {
    /// Check the hash chain of the audit log; exits nonzero at the first broken line.
    Verify {
        /// The log to check (default: the configured audit log).
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
    },
}

fn parse_degradable(text: &str) -> Result<Degradable, String> {
    Degradable::parse(text).map_err(|e| e.to_string())
}

fn parse_time_limit(text: &str) -> Result<std::time::Duration, String> {
    crate::policy::config::parse_time_limit(text)
}

/// The longest wait for an answer: a day.
const MAX_APPROVAL_TIMEOUT: u64 = 86_400;

fn parse_timeout(text: &str) -> Result<u64, String> {
    let secs: u64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number of seconds"))?;
    match secs {
        0 => Err(
            "0 seconds would cancel every request before anybody could answer; give 1 to 86400"
                .into(),
        ),
        1..=MAX_APPROVAL_TIMEOUT => Ok(secs),
        _ => Err(format!("at most {MAX_APPROVAL_TIMEOUT} seconds (a day)")),
    }
}

/// The value parser of a flag whose values form a closed set: the shell completions offer
/// exactly `values` (an alias is accepted but not offered; the flag's help names them in
/// its own words), and `parse` turns the text into the value or says why it cannot.
#[derive(Clone)]
struct Closed<T> {
    values: fn() -> Vec<PossibleValue>,
    parse: fn(&str) -> Result<T, String>,
}

impl Closed<Mode> {
    fn modes() -> Self {
        Closed {
            values: mode_values,
            parse: |s| s.parse::<Mode>().map_err(|e| e.to_string()),
        }
    }
}

impl Closed<Approval> {
    fn approvals() -> Self {
        Closed {
            values: || {
                [Approval::OnRequest, Approval::Never]
                    .into_iter()
                    .map(|a| PossibleValue::new(a.as_str()))
                    .collect()
            },
            parse: str::parse,
        }
    }
}

impl Closed<String> {
    /// Preset keys: the policy names the valid ones when a key is unknown, for the flag as
    /// for the configuration files.
    fn presets() -> Self {
        Closed {
            values: || {
                preset::table()
                    .into_iter()
                    .map(|row| PossibleValue::new(row.key).aliases(row.aliases))
                    .collect()
            },
            parse: |s| Ok(s.to_owned()),
        }
    }

    /// A requested mode: the escalation rules judge it (a narrower or equal request is
    /// refused there, with its marker), so any text passes here.
    fn requested_modes() -> Self {
        Closed {
            // read-only is never wider than a standing mode, so never asked for.
            values: || {
                mode_values()
                    .into_iter()
                    .filter(|v| v.get_name() != Mode::ReadOnly.as_str())
                    .collect()
            },
            parse: |s| Ok(s.to_owned()),
        }
    }
}

fn mode_values() -> Vec<PossibleValue> {
    Mode::ALL
        .into_iter()
        .map(|m| match m {
            Mode::FullAccess => PossibleValue::new(m.as_str()).alias("danger-full-access"),
            _ => PossibleValue::new(m.as_str()),
        })
        .collect()
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Closed<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg.map_or_else(String::new, |a| format!(" for '{a}'"));
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(ErrorKind::InvalidUtf8, format!("invalid UTF-8{flag}\n")).with_cmd(cmd)
        })?;
        (self.parse)(text).map_err(|why| {
            clap::Error::raw(
                ErrorKind::InvalidValue,
                format!("invalid value '{text}'{flag}: {why}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new((self.values)().into_iter()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sandbox_flag_parses_alias_and_command_keeps_its_hyphens() {
        let cli = Cli::try_parse_from([
            "sandgate",
            "--sandbox",
            "danger-full-access",
            "--",
            "ls",
            "-l",
        ])
        .map_err(|e| e.to_string());
        let cli = match cli {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cli.run.knobs.sandbox, Some(Mode::FullAccess));
        assert_eq!(
            cli.run.command,
            vec![OsString::from("ls"), OsString::from("-l")]
        );
    }

    #[test]
    fn unknown_mode_is_a_usage_error() {
        assert!(Cli::try_parse_from(["sandgate", "--sandbox", "auto", "true"]).is_err());
    }

    #[test]
    fn doctor_is_a_subcommand() {
        let cli = Cli::try_parse_from(["sandgate", "doctor", "--json"]);
        assert!(matches!(
            cli,
            Ok(Cli {
                subcommand: Some(Sub::Doctor { json: true }),
                ..
            })
        ));
    }
}
