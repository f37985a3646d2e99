//! Raw command-line arguments (clap derive only). Nothing here touches the kernel or the
//! filesystem; `policy::resolve` turns these into a `Plan`.
//!
//! The man page and completions are generated from these definitions, so help text lives
//! next to each flag.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::policy::Mode;

/// Run one command under a kernel-enforced sandbox profile.
#[derive(Debug, Parser)]
#[command(
    name = "sandgate",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Exit status: the command's own; 128+N when it dies of signal N; 64 usage; \
                  77 escalation not granted; 78 profile cannot be enforced here; 125 internal \
                  error; 126 not executable; 127 not found."
)]
pub struct Cli {
    #[command(subcommand)]
    pub subcommand: Option<Sub>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// Flags for running a command (the default action).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Sandbox mode for this call: read-only, workspace-write or full-access
    /// (alias danger-full-access). Default: workspace-write.
    #[arg(long, value_name = "MODE", value_parser = parse_mode, env = "SANDGATE_SANDBOX")]
    pub sandbox: Option<Mode>,

    /// The workspace (writable under workspace-write). Default: the git top-level of the
    /// current directory, else the current directory. `/` is refused.
    #[arg(long, value_name = "DIR", env = "SANDGATE_WORKSPACE")]
    pub workspace: Option<PathBuf>,

    /// An extra directory writable under workspace-write (repeatable).
    #[arg(long = "writable-root", value_name = "DIR")]
    pub writable_roots: Vec<PathBuf>,

    /// Run even when a guarantee of the profile cannot be enforced on this kernel; sandgate
    /// says on stderr which guarantees do not hold.
    #[arg(long)]
    pub allow_degraded: bool,

    /// The command and its arguments.
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
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
    /// Print a shell completion script.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse::<Mode>().map_err(|e| e.to_string())
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
        assert_eq!(cli.run.sandbox, Some(Mode::FullAccess));
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
