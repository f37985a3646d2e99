//! Package managers against stand-in registries served by the test: `cargo fetch`,
//! `npm install`, `pip download` and `pip install --target` succeed in workspace-write
//! through the proxy with the registry allowed, and fail with a marker naming it when
//! another host is allowed instead (so the proxy runs, and refuses). The stand-in records
//! every request, so a success went through the proxy: nothing else leaves the sandbox.

use std::ffi::OsString;
use std::path::Path;

use crate::network::call::*;
use crate::support::registry::*;
use crate::support::*;

/// Some other host is allowed: the proxy runs, and the registry is not listed.
fn other_host_only() -> Vec<String> {
    allow(&["registry.sandgate.test"], true)
}

/// Bounds a tool's run: a hang shows as status 124 instead of a stuck test.
fn bounded(argv: Vec<OsString>) -> Vec<OsString> {
    let mut bounded = vec![OsString::from("timeout"), OsString::from("120")];
    bounded.extend(argv);
    bounded
}

/// Runs `argv` with the registry not listed, then as the marker's hint says (with
/// `--allow-private-hosts`, as the stand-in is on loopback). Asserts the refusal and that
/// nothing reached the stand-in; returns the allowed call.
fn refused_then_allowed(
    env: &TestEnv,
    stand_in: &StandIn,
    argv: &[OsString],
    done: &dyn Fn() -> bool,
) -> Call {
    let call = sandboxed(env, &other_host_only(), &bounded(argv.to_vec()));
    assert_command_failed(&call.out);
    assert_ne!(
        call.out.status.code(),
        Some(124),
        "it hung\n{}",
        show(&call.out)
    );
    let marker = call.assert_unlisted("127.0.0.1", stand_in.port());
    assert!(!done(), "it succeeded anyway\n{}", show(&call.out));
    assert!(stand_in.seen().is_empty(), "{:?}", stand_in.seen());

    let mut flags: Vec<String> = marker["allow"]
        .as_array()
        .unwrap_or_else(|| panic!("{marker}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect();
    flags.push("--allow-private-hosts".into());
    let call = sandboxed(env, &flags, &bounded(argv.to_vec()));
    assert_status(&call.out, 0);
    assert!(done(), "{}", show(&call.out));
    call.assert_no_network_marker();
    call
}

#[test]
fn cargo_fetch_goes_through_the_proxy_to_an_allowed_registry() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let stand_in = StandIn::registries(&env.root.join("registry"));
    let (project, home) = (env.ws.join("app"), env.ws.join("cargo-home"));
    cargo_project(&stand_in, &project, &home);
    let argv = cargo_fetch(&project, &home);
    refused_then_allowed(&env, &stand_in, &argv, &|| cargo_fetched(&home));
    stand_in.assert_served(&CARGO_PATHS);
}

#[test]
fn npm_install_goes_through_the_proxy_to_an_allowed_registry() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let stand_in = StandIn::registries(&env.root.join("registry"));
    let project = env.ws.join("app");
    let argv = npm_install(&stand_in, &project);
    refused_then_allowed(&env, &stand_in, &argv, &|| npm_installed(&project));
    stand_in.assert_served(&NPM_PATHS);
}

#[test]
fn pip_download_and_install_go_through_the_proxy_to_an_allowed_index() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let stand_in = StandIn::registries(&env.root.join("registry"));
    for install in [false, true] {
        let dest: &Path = &env.ws.join(if install { "site" } else { "wheels" });
        let argv = pip(&stand_in, dest, install);
        refused_then_allowed(&env, &stand_in, &argv, &|| pip_done(dest, install));
        stand_in.assert_served(&PIP_PATHS);
        stand_in.clear();
    }
}
