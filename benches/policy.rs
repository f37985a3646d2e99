//! Micro-benchmark of the policy stage — configuration layering, the escalation check and
//! the profile build for one call — so a regression on sandgate's per-call hot path shows.
//! Plain harness (`cargo bench --bench policy`): prints nanoseconds per iteration.

use std::hint::black_box;
use std::time::Instant;

use sandgate::policy::config::{Managed, Project, User};
use sandgate::policy::gitconfig;
use sandgate::policy::standing::{self, Knobs};
use sandgate::policy::{self, escalation, Env, Mode, Request};
use sandgate::sandbox::seccomp;

fn time(name: &str, iterations: u32, mut f: impl FnMut()) {
    for _ in 0..iterations / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    let per = start.elapsed().as_nanos() / u128::from(iterations);
    println!("{name:<40} {per:>9} ns/iter");
}

fn main() {
    let ws = std::env::temp_dir().join(format!("sandgate-bench-policy-{}", std::process::id()));
    let _ = std::fs::create_dir_all(ws.join(".git/hooks"));
    let env = Env {
        cwd: ws.clone(),
        tmpdir: None,
        home: None,
        ptys: vec![],
        parent: None,
        // The real homes: guarding their persistence paths is part of the cost.
        homes: sandgate::policy::home::caller_homes(),
        approval_token_file: None,
        path: vec![],
        xdg: vec![],
    };
    let knobs = Knobs {
        preset: Some("auto".into()),
        mode: None,
        approval: None,
    };
    let (user, managed, project) = (User::default(), Managed::default(), Project::default());

    time("standing (layers + preset derivation)", 20_000, || {
        black_box(standing::resolve(&knobs, &user, &managed, &project, None).ok());
    });
    time("escalation check", 200_000, || {
        black_box(
            escalation::validate(
                Some("full-access"),
                Some("fetch dependencies"),
                Mode::WorkspaceWrite,
            )
            .ok(),
        );
    });
    time("plan (workspace, profile, protected paths)", 5_000, || {
        let request = Request {
            mode: Some(Mode::WorkspaceWrite),
            workspace: Some(ws.clone()),
            command: vec!["true".into()],
            observe: true,
            ..Request::default()
        };
        black_box(policy::resolve(request, &env).ok());
    });
    // The homes of $HOME and the passwd entry (and /etc, as root), as a call scans them.
    let as_root = nix::unistd::geteuid().is_root();
    let roots = policy::secrets::rule_roots(Mode::WorkspaceWrite, &env.homes, &[], as_root)
        .unwrap_or_default();
    let caller = sandgate::secret_scan::Caller::current();
    time("hidden-files rule: scans from the cache", 2_000, || {
        for root in &roots {
            black_box(sandgate::secret_scan::snapshot(root, &caller, &[]));
        }
    });
    time("hidden-files rule: full scans", 50, || {
        for root in &roots {
            black_box(sandgate::secret_scan::walk(root, &caller, &[]));
        }
    });
    time("seccomp programs (notifying + refusing)", 2_000, || {
        black_box(
            seccomp::prepare(
                true,
                true,
                seccomp::PathCalls::PerformedAndObserved,
                seccomp::Terminal::Unreachable,
                seccomp::Sockets::Unix,
            )
            .ok(),
        );
    });
    // What the supervisor checks when git renames `config.lock` over `config`: a clone's
    // configuration with the user's own entries, before and after `git remote add`.
    let old = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
               \tlogallrefupdates = true\n\tfsmonitor = false\n\tpager = less -R\n\
               [remote \"origin\"]\n\turl = https://example.com/project.git\n\
               \tfetch = +refs/heads/*:refs/remotes/origin/*\n\
               [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n\
               [submodule \"vendor/lib\"]\n\turl = https://example.com/lib.git\n\tactive = true\n\
               [alias]\n\tlg = \"!git log --oneline --graph\"\n[user]\n\temail = me@example.com\n";
    let new = format!("{old}[remote \"upstream\"]\n\turl = /srv/upstream.git\n\tfetch = +refs/heads/*:refs/remotes/upstream/*\n");
    time("git config check (remote add, 0.6 KiB)", 20_000, || {
        black_box(gitconfig::check_replacement(Some(old.as_bytes()), new.as_bytes()).ok());
    });
    let big = new.repeat(gitconfig::MAX_LEN / new.len());
    time("git config check (1 MiB, over itself)", 20, || {
        black_box(gitconfig::check_replacement(Some(big.as_bytes()), big.as_bytes()).ok());
    });
    let _ = std::fs::remove_dir_all(&ws);
}
