//! sandgate's subcommands other than running a command: `install-links`, `presets`,
//! `audit verify`, `tmp`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use super::{gather_env, Layers};
use crate::cli;
use crate::error::{EXIT_CONFIG, EXIT_INTERNAL, EXIT_USAGE};
use crate::policy;
use crate::sandbox::private_temp;

/// `sandgate install-links DIR`.
pub(super) fn install_links(dir: &Path) -> ExitCode {
    let result = std::env::current_exe().and_then(|exe| {
        std::fs::create_dir_all(dir)?;
        for name in ["sandgate-sh", "sandgate-prefix"] {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&exe, &link)?;
            crate::out!("{} -> {}", link.display(), exe.display());
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::say!("sandgate: cannot install links in {}: {e}", dir.display());
            ExitCode::from(EXIT_INTERNAL)
        }
    }
}

/// `sandgate presets`: the table and the current preset for the effective knobs.
pub(super) fn presets(json: bool, knobs: &cli::Knobs) -> ExitCode {
    let current = gather_env().and_then(|env| {
        let layers = Layers::load()?;
        // Only to find the project file: no command runs, so home is no hazard here.
        let workspace = policy::resolve_workspace(None, &env.cwd, &[])?;
        layers.standing(knobs, &workspace, &env)
    });
    let current = match current {
        Ok(standing) => standing,
        Err(err) => {
            crate::say!("sandgate: {err}");
            return ExitCode::from(err.exit_code());
        }
    };
    let table = policy::preset::table();
    if json {
        let body = json!({
            "presets": table,
            "current": { "preset": current.preset, "mode": current.mode, "approval": current.approval },
        });
        crate::out!("{body}");
    } else {
        for row in &table {
            let mark = if row.key == current.preset { "*" } else { " " };
            let aliases = if row.aliases.is_empty() {
                String::new()
            } else {
                format!(" (alias {})", row.aliases.join(", "))
            };
            crate::out!(
                "{mark} {:<16}{:<16}{:<11}{}{aliases}",
                row.key,
                row.mode,
                row.approval,
                row.description
            );
        }
        if current.preset == policy::preset::CUSTOM {
            crate::out!(
                "* custom          {:<16}{:<11}(no preset matches)",
                current.mode,
                current.approval
            );
        }
    }
    ExitCode::SUCCESS
}

/// `sandgate audit verify`: checks the hash chain.
pub(super) fn verify(log: Option<PathBuf>) -> ExitCode {
    let path = log.or_else(|| {
        let layers = Layers::load().ok()?;
        let flag = std::env::var_os("SANDGATE_AUDIT_LOG").map(PathBuf::from);
        layers.audit_log(flag).map(|l| l.path().to_path_buf())
    });
    let Some(path) = path else {
        crate::say!("sandgate: no audit log configured; pass --log FILE");
        return ExitCode::from(EXIT_USAGE);
    };
    match crate::audit::verify(&path) {
        Ok(lines) => {
            crate::out!(
                "sandgate: audit log {} verifies: {lines} lines",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            crate::say!("sandgate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `sandgate tmp [--workspace DIR] [--clean]`.
pub(super) fn tmp(workspace: Option<&Path>, clean: bool) -> ExitCode {
    let workspace =
        // The same workspace a run would use (home refused likewise).
        gather_env().and_then(|env| {
            Ok(policy::resolve_workspace(
                workspace, &env.cwd, &env.homes,
            )?)
        });
    let workspace = match workspace {
        Ok(ws) => ws,
        Err(err) => {
            crate::say!("sandgate: {err}");
            return ExitCode::from(err.exit_code());
        }
    };
    if !clean {
        crate::out!("{}", private_temp::path_for(&workspace).display());
        return ExitCode::SUCCESS;
    }
    match private_temp::clean(&workspace) {
        Ok(true) => {
            crate::out!("removed {}", private_temp::path_for(&workspace).display());
            ExitCode::SUCCESS
        }
        Ok(false) => {
            crate::out!("{} has no private temp", workspace.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            crate::say!("sandgate: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}
