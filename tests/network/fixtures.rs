//! The stand-in registries, proven on the host without sandgate: each tool installs from
//! them directly, and again with the proxy variables naming the stand-in itself (which
//! answers absolute-URI requests as a forwarding proxy would). The second run shows that
//! the tool sends a loopback registry's requests to the proxy the variables name, as it must
//! inside a sandbox, where sandgate's proxy is the only way out.

use std::ffi::OsString;
use std::process::{Command, Output};

use crate::support::registry::*;
use crate::support::*;

/// Runs `argv` on the host in `env`'s workspace, with the host's proxy variables removed
/// and, when `proxy` is given, every proxy variable set to it and `NO_PROXY` empty.
fn host_run(env: &TestEnv, argv: &[OsString], proxy: Option<&str>) -> Output {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).current_dir(&env.ws);
    without_host_proxies(&mut cmd);
    if let Some(proxy) = proxy {
        for key in &PROXY_VARIABLES[..6] {
            cmd.env(key, proxy);
        }
        cmd.env("NO_PROXY", "").env("no_proxy", "");
    }
    output(&mut cmd)
}

/// Asserts that `paths` were served, each only in the form `absolute` says.
#[track_caller]
fn assert_served_as(stand_in: &StandIn, paths: &[&str], absolute: bool) {
    stand_in.assert_served(paths);
    for seen in stand_in.seen() {
        assert_eq!(
            seen.absolute, absolute,
            "{seen:?} (expected absolute-URI requests: {absolute})"
        );
    }
}

#[test]
fn cargo_fetches_from_the_stand_in_sparse_registry() {
    let env = TestEnv::new();
    let stand_in = StandIn::registries(&env.root.join("registry"));
    for proxy in [None, Some(stand_in.url("/"))] {
        let (project, home) = (env.ws.join("app"), env.ws.join("cargo-home"));
        let _ = std::fs::remove_dir_all(&project);
        let _ = std::fs::remove_dir_all(&home);
        cargo_project(&stand_in, &project, &home);
        stand_in.clear();
        let out = host_run(&env, &cargo_fetch(&project, &home), proxy.as_deref());
        assert_status(&out, 0);
        assert!(cargo_fetched(&home), "{}", show(&out));
        assert_served_as(&stand_in, &CARGO_PATHS, proxy.is_some());
    }
}

#[test]
fn npm_installs_from_the_stand_in_registry() {
    let env = TestEnv::new();
    let stand_in = StandIn::registries(&env.root.join("registry"));
    for (i, proxy) in [None, Some(stand_in.url("/"))].into_iter().enumerate() {
        let project = env.ws.join(format!("app{i}"));
        stand_in.clear();
        let out = host_run(&env, &npm_install(&stand_in, &project), proxy.as_deref());
        assert_status(&out, 0);
        assert!(npm_installed(&project), "{}", show(&out));
        assert_served_as(&stand_in, &NPM_PATHS, proxy.is_some());
    }
}

#[test]
fn pip_downloads_and_installs_from_the_stand_in_index() {
    let env = TestEnv::new();
    let stand_in = StandIn::registries(&env.root.join("registry"));
    for (i, proxy) in [None, Some(stand_in.url("/"))].into_iter().enumerate() {
        for install in [false, true] {
            let dest = env.ws.join(format!("py{i}-{install}"));
            stand_in.clear();
            let out = host_run(&env, &pip(&stand_in, &dest, install), proxy.as_deref());
            assert_status(&out, 0);
            assert!(pip_done(&dest, install), "{}", show(&out));
            assert_served_as(&stand_in, &PIP_PATHS, proxy.is_some());
        }
    }
}
