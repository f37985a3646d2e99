//! sandgate's subcommands other than running a command: `install-links`, `presets`,
//! `audit verify`, `tmp` (`ps` and `stop` are in `kept`).

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{gather_env, Layers};
use crate::cli;
use crate::error::{Error, SubcommandError};
use crate::policy;
use crate::private_temp;

/// `sandgate install-links DIR`.
pub(super) fn install_links(dir: &Path) -> Result<(), Error> {
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
    result.map_err(|source| {
        SubcommandError::Links {
            dir: dir.to_path_buf(),
            source,
        }
        .into()
    })
}

/// `sandgate presets`: the table and the current preset for the effective knobs.
pub(super) fn presets(
    json: bool,
    knobs: &cli::Knobs,
    workspace: Option<&Path>,
) -> Result<(), Error> {
    let env = gather_env()?;
    let layers = Layers::load()?;
    // Only to find the project file: no command runs, so home is no hazard here.
    let workspace = policy::resolve_workspace(workspace, &env.cwd, &[])?;
    let current = layers.standing(knobs, &workspace, &env)?;
    let hosts = layers.standing_hosts(&current.denied_hosts)?;
    let table = policy::preset::table();
    if json {
        let body = json!({
            "presets": table,
            "current": { "preset": current.preset, "mode": current.mode, "approval": current.approval,
                "allowed_hosts": hosts.allowed, "denied_hosts": hosts.denied },
        });
        crate::out!("{body}");
    } else {
        let mut text = render_presets(&table, &current);
        if !hosts.is_empty() {
            let list = |l: &[crate::policy::host_rules::HostPattern]| {
                l.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            text.push_str(&format!(
                "\nallowed hosts (through the proxy): {}\n",
                list(&hosts.allowed)
            ));
            if !hosts.denied.is_empty() {
                text.push_str(&format!("denied hosts: {}\n", list(&hosts.denied)));
            }
        }
        crate::output::stdout_bytes(text.as_bytes());
    }
    Ok(())
}

/// The preset table as text: a header, one row per preset (the current one starred) and,
/// when no preset matches the effective pair, a `custom` row for it. Columns are as wide
/// as their widest cell and two spaces apart.
fn render_presets(table: &[policy::preset::Preset], current: &policy::Standing) -> String {
    let mut rows: Vec<[String; 5]> = vec![[
        String::new(),
        "preset".into(),
        "mode".into(),
        "approval".into(),
        "description".into(),
    ]];
    for row in table {
        let aliases = if row.aliases.is_empty() {
            String::new()
        } else {
            format!(" (alias {})", row.aliases.join(", "))
        };
        rows.push([
            if row.key == current.preset { "*" } else { "" }.into(),
            row.key.clone(),
            row.mode.to_string(),
            row.approval.to_string(),
            format!("{}{aliases}{}", row.description, preset_limits(&row.limits)),
        ]);
    }
    if current.preset == policy::preset::CUSTOM {
        rows.push([
            "*".into(),
            policy::preset::CUSTOM.into(),
            current.mode.to_string(),
            current.approval.to_string(),
            "(no preset matches)".into(),
        ]);
    }
    let width = |col: usize| {
        rows.iter()
            .map(|r| r[col].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    let mut text = String::new();
    for row in &rows {
        let line = format!(
            "{:<w0$} {:<w1$}  {:<w2$}  {:<w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        );
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// A preset's default limits, for its row: ` (limits: 4096 processes, 75% of RAM)`.
fn preset_limits(limits: &crate::limits::PresetLimits) -> String {
    let shown: Vec<String> = [
        limits.pids.map(|n| format!("{n} processes")),
        limits.memory.map(|m| match m {
            crate::limits::Size::PercentOfRam(p) => format!("{p}% of RAM"),
            bytes => format!("{bytes} of memory"),
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    match shown.is_empty() {
        true => String::new(),
        false => format!(" (limits: {})", shown.join(", ")),
    }
}

/// `sandgate audit verify`: checks the hash chain.
pub(super) fn verify(log: Option<PathBuf>) -> Result<(), Error> {
    // Without --log, the log a run would write: a configuration that cannot be read is
    // said as a run says it, not taken for no log at all.
    let path = match log {
        Some(path) => path,
        None => {
            let flag = std::env::var_os("SANDGATE_AUDIT_LOG").map(PathBuf::from);
            let log = Layers::load()?.audit_log(flag);
            log.ok_or(SubcommandError::NoAuditLog)?.path().to_path_buf()
        }
    };
    match crate::audit::verify(&path) {
        Ok(lines) => {
            crate::out!(
                "sandgate: audit log {} verifies: {lines} lines",
                path.display()
            );
            Ok(())
        }
        // Both say the log cannot be vouched for: the log's verdict, with a marker that
        // tells a log that could not be read from one that was edited.
        Err(crate::audit::AuditError::Unreadable { path, source })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Err(SubcommandError::NoAuditLogAt(path).into())
        }
        Err(e) => Err(SubcommandError::Unverified(e).into()),
    }
}

/// `sandgate tmp [--workspace DIR] [--clean]`.
pub(super) fn tmp(workspace: Option<&Path>, clean: bool) -> Result<(), Error> {
    // The same workspace a run would use (home refused likewise).
    let env = gather_env()?;
    let workspace = policy::resolve_workspace(workspace, &env.cwd, &env.homes)?;
    if !clean {
        crate::out!("{}", private_temp::path_for(&workspace).display());
        return Ok(());
    }
    // A workspace-write call kept running in this workspace has the temp as its /tmp (and
    // the cache layers mounted): it ends before they go.
    let users = crate::kept::live(Some(&workspace)).map_err(SubcommandError::Kept)?;
    for record in users
        .iter()
        .filter(|r| r.mode == policy::Mode::WorkspaceWrite)
    {
        crate::kept::stop(record).map_err(|source| SubcommandError::TempInUse {
            pid: record.pid,
            source,
        })?;
        crate::out!(
            "stopped {}, kept by a call in this workspace, which used it",
            record.pid
        );
    }
    if private_temp::clean(&workspace).map_err(SubcommandError::Temp)? {
        crate::out!(
            "removed {} (and its cache layers, {})",
            private_temp::path_for(&workspace).display(),
            private_temp::layers_path_for(&workspace).display()
        );
    } else {
        crate::out!("{} has no private temp", workspace.display());
    }
    Ok(())
}
