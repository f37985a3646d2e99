//! A listed name that resolves to a loopback address is refused without
//! `--allow-private-hosts`: the proxy resolves the name itself and checks the address it
//! will connect to, not the name. The name comes from a hosts file of the test's own,
//! bind-mounted over `/etc/hosts` in a mount namespace of sandgate's alone.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use crate::network::call::*;
use crate::support::registry::StandIn;
use crate::support::*;

/// The test-only name the hosts file maps to 127.0.0.1.
const NAME: &str = "registry.sandgate.test";

/// `sandgate` (as built by [`command`]) run in a private mount namespace where `/etc/hosts`
/// is `hosts`. As root `unshare -m` does; otherwise a user namespace mapping the caller to
/// root makes the bind mount, and a nested one maps root back to the caller, so that
/// sandgate runs as the unprivileged user it is.
fn with_hosts_file(sandgate: Command, hosts: &Path) -> Command {
    let mut cmd = Command::new("unshare");
    let script = if is_root() {
        cmd.arg("-m");
        r#"mount --bind "$1" /etc/hosts || exit 99; shift; exec "$@""#.to_owned()
    } else {
        cmd.arg("-Urm");
        format!(
            r#"mount --bind "$1" /etc/hosts || exit 99; shift; exec unshare --map-user={} --map-group={} "$@""#,
            nix::unistd::geteuid(),
            nix::unistd::getegid()
        )
    };
    cmd.args(["sh", "-c", &script, "sh"]).arg(hosts);
    behind(cmd, &sandgate)
}

#[test]
fn a_listed_name_resolving_to_loopback_needs_allow_private_hosts() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let hosts = env.root.join("hosts");
    std::fs::write(
        &hosts,
        format!("127.0.0.1 localhost\n::1 localhost\n127.0.0.1 {NAME}\n"),
    )
    .unwrap();
    let listed = format!("{NAME}:{}", upstream.port());
    let url = format!("http://{listed}/t/name");
    let log = denial_log(&env);

    // The name resolves to the upstream in that namespace (so a refusal below is the
    // private-address rule, not an unknown name).
    let mut resolve = env.sandgate("full-access");
    resolve.args(["--", "getent", "hosts", NAME]);
    let out = output(&mut with_hosts_file(resolve, &hosts));
    assert_status(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("127.0.0.1"),
        "{}",
        show(&out)
    );

    for args in [vec!["-f"], vec!["-p"], vec!["--socks5-hostname", PROXY]] {
        let sandgate = command(&env, &allow(&[&listed], false), &log, &curl(&args, &url));
        let call = run(&env, with_hosts_file(sandgate, &hosts));
        assert_ne!(
            call.out.status.code(),
            Some(99),
            "cannot mount: {}",
            show(&call.out)
        );
        assert_command_failed(&call.out);
        call.assert_host_refused(NAME, upstream.port());
        assert!(
            upstream.seen().is_empty(),
            "{args:?}: {:?}",
            upstream.seen()
        );
    }

    // Control: with --allow-private-hosts the same name reaches the upstream, by plain HTTP
    // and by SOCKS with the name resolved by the proxy.
    for (args, path) in [
        (vec![], "/t/name"),
        (vec!["--socks5-hostname", PROXY], "/t/name"),
    ] {
        let sandgate = command(&env, &allow(&[&listed], true), &log, &curl(&args, &url));
        let call = run(&env, with_hosts_file(sandgate, &hosts));
        call.assert_fetched(path);
        call.assert_no_network_marker();
    }
    assert_eq!(upstream.paths(), ["/t/name", "/t/name"]);
}
