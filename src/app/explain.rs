//! `sandgate explain`: what a call with these flags would do, without running anything —
//! the plan the run itself would follow (the same gathering and the same planning step),
//! and, for a call that requests a wider mode, who would decide and the plan if allowed.
//! Text for a person; `--json` for a program (an agent choosing what to request).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use super::ensure_audit_log;
use super::escalate::who_decides;
use super::plan::{self, gather};
use crate::cli::{Cli, RunArgs};
use crate::error::{Error, SubcommandError};
use crate::policy::secrets::Why;
use crate::policy::{Confinement, Plan};
use crate::policy::{Mode, Temp};
use crate::sandbox::{Backend, Guarantee, Layout};
use crate::shell::Caller;
use clap::Parser;

/// The explanation of one call.
#[derive(Debug, Serialize)]
struct Explained {
    command: Vec<String>,
    workspace: String,
    /// The mode the call runs in unasked, and how the policy came to it.
    standing: Standing,
    /// Set when the call runs inside another sandgate's sandbox.
    nested_in: Option<Mode>,
    /// The backend the call starts with (`auto` falls back to landlock when the kernel
    /// refuses namespaces only once the call starts: not known here).
    backend: Backend,
    /// The guarantees it cannot hold for the plan, which the call named to run without.
    unenforced: Vec<Guarantee>,
    plan: PlanView,
    /// What the call requests (`--sandbox-permissions`), when it requests a wider mode.
    request: Option<RequestView>,
}

#[derive(Debug, Serialize)]
struct Standing {
    mode: Mode,
    preset: String,
    approval: String,
    max_mode: Option<Mode>,
    timeout_secs: Option<u64>,
    keep_background: bool,
}

#[derive(Debug, Serialize)]
struct RequestView {
    mode: Mode,
    justification: String,
    /// The answerer that would be asked; `None` when the request is refused unasked.
    asked: Option<String>,
    /// Why it is refused without anyone being asked.
    refused: Option<String>,
    /// The plan the call would follow if the answer were "allowed once"; `None` when
    /// nobody is asked.
    plan_if_allowed: Option<PlanView>,
}

/// One plan as a person or a program needs it.
#[derive(Debug, Serialize)]
struct PlanView {
    mode: Mode,
    confined: bool,
    cwd: String,
    /// `$TMPDIR` inside (`None`: the host's, unchanged).
    tmpdir: Option<String>,
    writable: Vec<String>,
    /// Read-only although inside a writable root.
    protected: Vec<String>,
    /// Guarded git directories: only what git itself writes there is performed.
    git_dirs: Vec<String>,
    /// Nothing may be created, removed or renamed in them.
    frozen: Vec<String>,
    /// Read as empty, with why.
    hidden: Vec<HiddenView>,
    /// `per-call` (empty, gone after) or `per-workspace` (kept between calls).
    private_tmp: Option<&'static str>,
    /// Unix sockets reachable besides those beneath the workspace and the private temp.
    sockets: Vec<String>,
    /// `none`, `proxy` (only the hosts below), or `host` (full access).
    network: &'static str,
    hosts_allowed: Vec<String>,
    hosts_denied: Vec<String>,
    /// Written copy-on-write: the sandbox's changes stay in the workspace's layer.
    caches: Vec<String>,
    /// The caller's environment variables the command does not get.
    env_withheld: Vec<String>,
}

#[derive(Debug, Serialize)]
struct HiddenView {
    path: String,
    why: Why,
}

/// Explains the call `call` describes: a run's flags, then `-- CMD [ARGS]` or the shell's
/// `-c CMDSTRING` (a directive line at its head included); exit 0, or the error a run would
/// have stopped at.
pub(super) fn explain(call: Vec<OsString>, json: bool, caller: Caller) -> ExitCode {
    let (flags, command_string, json_among_flags) = split_own_words(call);
    let json = json || json_among_flags;
    match Cli::try_parse_from(std::iter::once(OsString::from("sandgate")).chain(flags)) {
        Ok(cli) => super::done(print(cli, command_string, json, caller)),
        Err(e) => super::usage(&e),
    }
}

/// Prints the explanation of the parsed call `cli`, with its `-c` string if any.
fn print(
    cli: Cli,
    command_string: Option<String>,
    json: bool,
    caller: Caller,
) -> Result<(), Error> {
    if cli.subcommand.is_some() {
        return Err(SubcommandError::ExplainSubcommand.into());
    }
    let mut args = cli.run;
    if let Some(string) = command_string {
        super::shell_mode::as_shell_command(&mut args, &string)?;
    }
    let explained = explained(&mut args, caller)?;
    let text = match json {
        true => serde_json::to_string_pretty(&explained).map_err(SubcommandError::Output)? + "\n",
        false => render(&explained),
    };
    crate::output::stdout_bytes(text.as_bytes());
    Ok(())
}

/// Takes what explain reads itself out of the call's flags (those before `--` or the
/// command's first word):
/// `-c CMDSTRING`, the shell-mode form the run's own flags do not define, and `--json`
/// wherever it stands. A flag's value is never taken for either.
fn split_own_words(call: Vec<OsString>) -> (Vec<OsString>, Option<String>, bool) {
    let takes_value = super::flags_taking_values();
    let mut flags = Vec::with_capacity(call.len());
    let (mut string, mut json) = (None, false);
    let mut words = call.into_iter();
    while let Some(word) = words.next() {
        // `--` or the command's first word: what follows is the command's own.
        if word == "--" || !word.to_string_lossy().starts_with('-') {
            flags.push(word);
            flags.extend(words.by_ref());
            break;
        }
        if word == "-c" && string.is_none() {
            string = words.next().map(|s| s.to_string_lossy().into_owned());
            continue;
        }
        if word == "--json" {
            json = true;
            continue;
        }
        let value = word
            .to_str()
            .and_then(|w| w.strip_prefix("--"))
            .is_some_and(|name| takes_value.contains(&name));
        flags.push(word);
        if value {
            flags.extend(words.next());
        }
    }
    (flags, string, json)
}

fn explained(args: &mut RunArgs, caller: Caller) -> Result<Explained, Error> {
    let g = gather(args)?;
    ensure_audit_log(&g, g.standing.mode);
    let standing = &g.standing;
    let now = plan::for_mode(&g, args, standing.mode)?;
    // A run stops here when the kernel cannot hold the profile and degrading is not
    // allowed; when it is, what would not hold is said.
    let (layout, unenforced) = plan::layout(&now, &g.features)?;
    plan::keepable(g.lifetime.keep_background, layout)?;
    let request = match &g.escalation {
        None => None,
        Some(request) => {
            let decided = who_decides(request, &g, args, caller);
            let plan_if_allowed = match decided {
                Ok(_) => Some(view(&plan::for_mode(&g, args, request.to())?, &g.env_names)),
                Err(_) => None,
            };
            Some(RequestView {
                mode: request.to(),
                justification: request.justification().to_owned(),
                asked: decided.as_ref().ok().cloned(),
                refused: decided.err(),
                plan_if_allowed,
            })
        }
    };
    Ok(Explained {
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        workspace: shown(&g.workspace),
        standing: Standing {
            mode: standing.mode,
            preset: standing.preset.clone(),
            approval: standing.approval.to_string(),
            max_mode: standing.max_mode,
            timeout_secs: g.lifetime.timeout.map(|t| t.as_secs()),
            keep_background: g.lifetime.keep_background,
        },
        nested_in: g.env.parent.as_ref().map(|p| p.mode),
        backend: layout.backend(),
        unenforced,
        plan: view(&now, &g.env_names).under(layout, &now.workspace),
        request,
    })
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

fn all(paths: &std::collections::BTreeSet<PathBuf>) -> Vec<String> {
    paths.iter().map(|p| shown(p)).collect()
}

impl PlanView {
    /// The view as the call runs under `layout`: the landlock backend's `$TMPDIR` is the
    /// workspace's private temp itself, not a private `/tmp` (the host's is out of reach),
    /// and it layers no cache (they stay read-only).
    fn under(mut self, layout: Layout, workspace: &Path) -> PlanView {
        if self.confined && layout == Layout::Landlock {
            self.tmpdir = Some(shown(&crate::private_temp::path_for(workspace)));
            self.private_tmp = Some("per-workspace, as TMPDIR only (the host's /tmp out of reach)");
            self.caches.clear();
        }
        self
    }
}

fn view(plan: &Plan, env_names: &[OsString]) -> PlanView {
    let mut v = PlanView {
        mode: plan.mode,
        confined: false,
        cwd: shown(&plan.cwd),
        tmpdir: plan.tmpdir.as_deref().map(shown),
        writable: vec![],
        protected: vec![],
        git_dirs: vec![],
        frozen: vec![],
        hidden: vec![],
        private_tmp: None,
        sockets: vec![],
        network: "host",
        hosts_allowed: vec![],
        hosts_denied: vec![],
        caches: vec![],
        env_withheld: vec![],
    };
    let Confinement::Restricted(r) = &plan.confinement else {
        return v;
    };
    v.confined = true;
    v.writable = all(&r.writable_roots);
    v.protected = all(&r.protected);
    v.protected.extend(all(&r.sealed));
    v.protected.sort();
    v.git_dirs = all(&r.git_dirs);
    v.frozen = all(&r.frozen);
    v.hidden = r
        .hidden
        .iter()
        .map(|(path, why)| HiddenView {
            path: shown(path),
            why: why.clone(),
        })
        .collect();
    v.private_tmp = Some(match r.temp {
        Temp::PerCall => "per-call",
        Temp::PerWorkspace => "per-workspace",
    });
    v.sockets = all(&r.allowed_sockets);
    v.network = if r.proxy.is_some() { "proxy" } else { "none" };
    if let Some(rules) = &r.proxy {
        v.hosts_allowed = rules.allowed.iter().map(ToString::to_string).collect();
        v.hosts_denied = rules.denied.iter().map(ToString::to_string).collect();
    }
    v.caches = r.caches.iter().map(|c| shown(&c.path)).collect();
    v.env_withheld = plan::withheld(r, env_names)
        .into_iter()
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    v.env_withheld.sort();
    v
}

/// The explanation as a person reads it.
fn render(e: &Explained) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!("command:    {}", e.command.join(" ")));
    line(format!("workspace:  {}", e.workspace));
    let s = &e.standing;
    line(format!(
        "standing:   {} (preset {}, approval {}{})",
        s.mode,
        s.preset,
        s.approval,
        s.max_mode
            .map(|m| format!(", at most {m}"))
            .unwrap_or_default()
    ));
    if let Some(parent) = e.nested_in {
        line(format!(
            "nested:     inside a {parent} sandbox: no call here runs wider than it"
        ));
    }
    if e.plan.confined {
        line(format!("backend:    {}", e.backend.name()));
    }
    if !e.unenforced.is_empty() {
        line(format!(
            "degraded:   without {} (--allow-degraded)",
            e.unenforced
                .iter()
                .map(|g| g.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(t) = s.timeout_secs {
        line(format!("timeout:    {t} s"));
    }
    if s.keep_background {
        line("background: processes left running are kept after the call".to_owned());
    }
    render_plan(&mut out, "runs as", &e.plan);
    if let Some(r) = &e.request {
        out.push_str(&format!(
            "\nrequests:   {} (\"{}\")\n",
            r.mode, r.justification
        ));
        if let Some(refused) = &r.refused {
            out.push_str(&format!("refused:    {refused}\n"));
        }
        if let (Some(asked), Some(plan)) = (&r.asked, &r.plan_if_allowed) {
            out.push_str(&format!("asks:       {asked}\n"));
            render_plan(&mut out, "if allowed once", plan);
        }
    }
    out
}

fn render_plan(out: &mut String, title: &str, p: &PlanView) {
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!("\n{title} {}:", p.mode));
    if !p.confined {
        line("  unconfined: the host's files, network and processes, as the caller".to_owned());
        return;
    }
    let list = |items: &[String]| {
        if items.is_empty() {
            "(none)".to_owned()
        } else {
            items.join(", ")
        }
    };
    line(format!("  cwd:        {}", p.cwd));
    line(format!("  writable:   {}", list(&p.writable)));
    line(format!("  protected:  {}", list(&p.protected)));
    if !p.git_dirs.is_empty() {
        line(format!(
            "  git dirs:   {} (what git writes there only)",
            list(&p.git_dirs)
        ));
    }
    if !p.frozen.is_empty() {
        line(format!("  frozen:     {}", list(&p.frozen)));
    }
    line(format!(
        "  /tmp:       private, {}{}",
        p.private_tmp.unwrap_or("per-call"),
        p.tmpdir
            .as_deref()
            .map(|t| format!("; TMPDIR={t}"))
            .unwrap_or_default()
    ));
    line(format!("  network:    {}", network(p)));
    if !p.sockets.is_empty() {
        line(format!("  sockets:    {}", list(&p.sockets)));
    }
    if !p.caches.is_empty() {
        line(format!("  caches:     {} (copy-on-write)", list(&p.caches)));
    }
    line(format!("  env held:   {}", list(&p.env_withheld)));
    line(format!("  hidden:     {} paths", p.hidden.len()));
    for h in &p.hidden {
        let why = match &h.why {
            Why::Listed { entry } => format!("listed: {entry}"),
            why => serde_json::to_value(why)
                .ok()
                .and_then(|v| v.get("reason")?.as_str().map(str::to_owned))
                .unwrap_or_default(),
        };
        line(format!("    {}  ({why})", h.path));
    }
}

/// The network a plan gives, in words.
fn network(p: &PlanView) -> String {
    if p.network != "proxy" {
        return "none".to_owned();
    }
    let never = if p.hosts_denied.is_empty() {
        String::new()
    } else {
        format!(" (never {})", p.hosts_denied.join(", "))
    };
    format!(
        "through sandgate's proxy to {}{never}",
        p.hosts_allowed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<OsString> {
        w.iter().map(OsString::from).collect()
    }

    #[test]
    fn json_and_a_command_string_are_taken_wherever_they_stand_but_never_as_a_value() {
        let (flags, string, json) =
            split_own_words(words(&["--sandbox", "read-only", "--json", "-c", "make"]));
        assert_eq!(
            (flags, string, json),
            (
                words(&["--sandbox", "read-only"]),
                Some("make".into()),
                true
            )
        );
        // The value of a flag that takes one, and anything after `--`, stay as they are.
        let call = words(&["--keep-env", "--json", "--", "echo", "--json", "-c"]);
        let (flags, string, json) = split_own_words(call.clone());
        assert_eq!((flags, string, json), (call, None, false));
        let call = words(&["--keep-env", "-c", "--", "true"]);
        assert_eq!(split_own_words(call.clone()), (call, None, false));
        let call = words(&["--sandbox", "read-only", "curl", "--json", "-c", "x"]);
        assert_eq!(split_own_words(call.clone()), (call, None, false));
    }
}
