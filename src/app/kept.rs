//! `sandgate ps` and `sandgate stop`: what calls with `--keep-background` left running, per
//! workspace or all of it (`kept` keeps the records).

use serde_json::json;

use super::gather_env;
use crate::approval::{neutralise, shell_quote};
use crate::cli::KeptSelection;
use crate::error::{Error, SubcommandError};
use crate::kept::{self, Record};
use crate::policy;

/// The records `which` selects: a workspace's (resolved as a run resolves it), or all.
fn selected(which: &KeptSelection) -> Result<(Vec<Record>, Option<std::path::PathBuf>), Error> {
    let workspace = match which.all {
        true => None,
        false => {
            let env = gather_env()?;
            Some(policy::resolve_workspace(
                which.workspace.as_deref(),
                &env.cwd,
                &env.homes,
            )?)
        }
    };
    let records = kept::live(workspace.as_deref()).map_err(SubcommandError::Kept)?;
    Ok((records, workspace))
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
pub(super) fn ps(which: &KeptSelection, json: bool) -> Result<(), Error> {
    let (records, workspace) = selected(which)?;
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
        return Ok(());
    }
    if listed.is_empty() {
        crate::out!("nothing kept running in {}", scope(workspace.as_deref()));
        return Ok(());
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
    Ok(())
}

/// `sandgate stop [--workspace DIR | --all] [--json]`.
pub(super) fn stop(which: &KeptSelection, json: bool) -> Result<(), Error> {
    let (records, workspace) = selected(which)?;
    let mut stopped = Vec::new();
    for record in &records {
        match kept::stop(record) {
            Ok(()) => stopped.push(record),
            Err(e) => crate::say!("sandgate: cannot stop {}: {e}", record.pid),
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
    match stopped.len() == records.len() {
        true => Ok(()),
        false => Err(SubcommandError::NotAllStopped {
            stopped: stopped.len(),
            of: records.len(),
        }
        .into()),
    }
}

/// A command line as a shell would read it back, safe to show on a terminal: the
/// command, like the processes it left, is the sandbox's text.
fn shell_words(words: &[String]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
    neutralise(&quoted.join(" "))
}
