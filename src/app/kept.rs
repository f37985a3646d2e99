//! `sandgate ps` and `sandgate stop`: what calls with `--keep-background` left running, per
//! workspace or all of it (`kept` keeps the records).

use std::process::ExitCode;

use serde_json::json;

use super::{finish, gather_env};
use crate::approval::{neutralise, shell_quote};
use crate::cli::KeptSelection;
use crate::error::{EXIT_CONFIG, EXIT_INTERNAL};
use crate::kept::{self, KeptError, Record};
use crate::policy;

/// The records `which` selects: a workspace's (resolved as a run resolves it), or all.
fn selected(which: &KeptSelection) -> Result<(Vec<Record>, Option<std::path::PathBuf>), ExitCode> {
    let workspace = match which.all {
        true => None,
        false => {
            let resolved = gather_env().and_then(|env| {
                Ok(policy::resolve_workspace(
                    which.workspace.as_deref(),
                    &env.cwd,
                    &env.homes,
                )?)
            });
            Some(resolved.map_err(|err| finish(Err(err), None))?)
        }
    };
    match kept::live(workspace.as_deref()) {
        Ok(records) => Ok((records, workspace)),
        Err(e) => Err(failed(&e)),
    }
}

fn failed(e: &KeptError) -> ExitCode {
    crate::say!("sandgate: {e}");
    match e {
        KeptError::Directory(_) => ExitCode::from(EXIT_CONFIG),
        _ => ExitCode::from(EXIT_INTERNAL),
    }
}

/// Where `which` looked, for "nothing" messages.
fn scope(workspace: Option<&std::path::Path>) -> String {
    workspace.map_or_else(|| "any workspace".into(), |w| w.display().to_string())
}

/// A record as JSON, with the processes in its namespace when `processes`.
fn shown(record: &Record, processes: Option<&[kept::Process]>) -> serde_json::Value {
    let mut v = json!({
        "pid": record.pid,
        "workspace": record.workspace,
        "mode": record.mode,
        "command": record.command,
        "started": record.started_at(),
    });
    if let (Some(processes), Some(fields)) = (processes, v.as_object_mut()) {
        fields.insert("processes".into(), json!(processes));
    }
    v
}

/// `sandgate ps [--workspace DIR | --all] [--json]`.
pub(super) fn ps(which: &KeptSelection, json: bool) -> ExitCode {
    let (records, workspace) = match selected(which) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let listed: Vec<(Record, Vec<kept::Process>)> = records
        .into_iter()
        .map(|r| {
            let processes = r.processes();
            (r, processes)
        })
        .collect();
    if json {
        let kept: Vec<_> = listed.iter().map(|(r, p)| shown(r, Some(p))).collect();
        crate::out!("{}", json!({ "kept": kept }));
        return ExitCode::SUCCESS;
    }
    if listed.is_empty() {
        crate::out!("nothing kept running in {}", scope(workspace.as_deref()));
        return ExitCode::SUCCESS;
    }
    let mut text = String::new();
    for (record, processes) in &listed {
        text.push_str(&format!(
            "{}  {}  {}  since {}  {}\n",
            record.pid,
            neutralise(&record.workspace.to_string_lossy()),
            record.mode,
            record.started_at(),
            shell_words(&record.command)
        ));
        for p in processes {
            text.push_str(&format!("  {:>7}  {}\n", p.pid, neutralise(&p.command)));
        }
    }
    crate::output::stdout_bytes(text.as_bytes());
    ExitCode::SUCCESS
}

/// `sandgate stop [--workspace DIR | --all] [--json]`.
pub(super) fn stop(which: &KeptSelection, json: bool) -> ExitCode {
    let (records, workspace) = match selected(which) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let mut stopped = Vec::new();
    let mut status = ExitCode::SUCCESS;
    for record in &records {
        match kept::stop(record) {
            Ok(()) => stopped.push(record),
            Err(e) => {
                crate::say!("sandgate: cannot stop {}: {e}", record.pid);
                status = ExitCode::from(EXIT_INTERNAL);
            }
        }
    }
    if json {
        let list: Vec<_> = stopped.iter().map(|r| shown(r, None)).collect();
        crate::out!("{}", json!({ "stopped": list }));
    } else if stopped.is_empty() && records.is_empty() {
        crate::out!("nothing kept running in {}", scope(workspace.as_deref()));
    } else {
        for r in &stopped {
            crate::out!(
                "stopped {} ({}: {})",
                r.pid,
                neutralise(&r.workspace.to_string_lossy()),
                shell_words(&r.command)
            );
        }
    }
    status
}

/// A command line as a shell would read it back, safe to show on a terminal: the
/// command, like the processes it left, is the sandbox's text.
fn shell_words(words: &[String]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
    neutralise(&quoted.join(" "))
}
