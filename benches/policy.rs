//! Micro-benchmark of the policy stage — configuration layering, the escalation check and
//! the profile build for one call — so a regression on sandgate's per-call hot path shows.
//! Plain harness (`cargo bench --bench policy`): prints nanoseconds per iteration.

use std::hint::black_box;
use std::time::Instant;

use sandgate::policy::config::{Managed, Project, User};
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
    let _ = std::fs::remove_dir_all(&ws);
}
