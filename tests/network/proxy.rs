//! The proxy's allowlist: plain HTTP, CONNECT tunnels and SOCKS5 reach an allowed local
//! upstream; another port, another host, an unlisted name and a private address without
//! `--allow-private-hosts` get a 403 (or a SOCKS refusal) and a marker, and nothing reaches
//! the upstream.

use std::net::Ipv4Addr;

use crate::network::call::*;
use crate::support::registry::StandIn;
use crate::support::*;

/// The environment inside names the proxy, whatever the host's proxy variables said (a
/// host `NO_PROXY=*` would otherwise send every request around the proxy, into a refusal).
#[test]
fn the_proxy_variables_inside_name_the_proxy() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let script = r#"printf '%s|' "$HTTP_PROXY" "$http_proxy" "$HTTPS_PROXY" "$https_proxy" "$ALL_PROXY" "$all_proxy" "${NO_PROXY-unset}" "${no_proxy-unset}""#;
    let mut cmd = command(
        &env,
        &allow(&[&upstream.authority()], true),
        &denial_log(&env),
        &["/bin/sh", "-c", script],
    );
    cmd.env("HTTP_PROXY", "http://192.0.2.1:9")
        .env("https_proxy", "http://192.0.2.1:9")
        .env("NO_PROXY", "*")
        .env("no_proxy", "127.0.0.1");
    let call = run(&env, cmd);
    assert_status(&call.out, 0);
    let http = format!("http://{PROXY}");
    let socks = format!("socks5h://{PROXY}");
    assert_eq!(
        String::from_utf8_lossy(&call.out.stdout),
        format!("{http}|{http}|{http}|{http}|{socks}|{socks}|||"),
    );
}

#[test]
fn plain_http_and_connect_tunnels_reach_an_allowed_local_upstream() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let flags = allow(&[&upstream.authority()], true);

    // curl takes the proxy from http_proxy.
    let call = sandboxed(&env, &flags, &curl(&[], &upstream.url("/t/plain")));
    call.assert_fetched("/t/plain");
    call.assert_no_network_marker();
    assert!(upstream.served("/t/plain"), "{:?}", upstream.seen());

    // -p: a CONNECT tunnel through the proxy, then the request inside it.
    let call = sandboxed(&env, &flags, &curl(&["-p"], &upstream.url("/t/tunnel")));
    call.assert_fetched("/t/tunnel");
    assert_eq!(call.curl().connect, 200, "{}", show(&call.out));
    call.assert_no_network_marker();
    let tunnelled = upstream.seen().into_iter().find(|s| s.path == "/t/tunnel");
    assert!(
        tunnelled.is_some_and(|s| !s.absolute),
        "the tunnelled request did not arrive as the client sent it: {:?}",
        upstream.seen()
    );
}

#[test]
fn socks5_with_remote_resolution_reaches_an_allowed_upstream_only() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (upstream, other) = (
        StandIn::plain(Ipv4Addr::LOCALHOST),
        StandIn::plain(Ipv4Addr::LOCALHOST),
    );
    let flags = allow(&[&upstream.authority()], true);

    let call = sandboxed(
        &env,
        &flags,
        &curl(&["--socks5-hostname", PROXY], &upstream.url("/t/socks")),
    );
    call.assert_fetched("/t/socks");
    call.assert_no_network_marker();

    // Without http_proxy, curl takes ALL_PROXY (socks5h://, names resolved by the proxy).
    let mut argv = vec!["env".to_owned(), "-u".into(), "http_proxy".into()];
    argv.extend(["-u".into(), "HTTP_PROXY".into()]);
    argv.extend(curl(&[], &upstream.url("/t/all-proxy")));
    let call = sandboxed(&env, &flags, &argv);
    call.assert_fetched("/t/all-proxy");
    upstream.assert_served(&["/t/socks", "/t/all-proxy"]);

    // Another port through SOCKS: refused by the proxy ("not allowed by ruleset").
    let call = sandboxed(
        &env,
        &flags,
        &curl(&["--socks5-hostname", PROXY], &other.url("/t/socks")),
    );
    assert_command_failed(&call.out);
    call.assert_unlisted("127.0.0.1", other.port());
    assert!(other.seen().is_empty(), "{:?}", other.seen());
}

/// Another port of the same address, another loopback address on an allowed port number,
/// and an unlisted name: 403 with a one-line reason, a marker naming the host, the port and
/// the `--allow-host` that would allow it, and nothing at the upstream. The control allows
/// them as the markers say and reaches both upstreams.
#[test]
fn other_ports_hosts_and_names_get_403_and_a_marker() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let allowed = StandIn::plain(Ipv4Addr::LOCALHOST);
    let other_port = StandIn::plain(Ipv4Addr::LOCALHOST);
    let other_host = StandIn::plain(Ipv4Addr::new(127, 0, 0, 2));
    // 127.0.0.1 on the other host's port is allowed: only the address differs.
    let same_port = format!("127.0.0.1:{}", other_host.port());
    let flags = allow(&[&allowed.authority(), &same_port], true);

    let call = sandboxed(&env, &flags, &curl(&[], &other_port.url("/t/port")));
    assert_status(&call.out, 0);
    let curled = call.curl();
    assert_eq!(curled.status, 403, "{}", show(&call.out));
    assert_eq!(
        curled.body.trim().lines().count(),
        1,
        "the 403 says why in one line: {curled:?}"
    );
    let port_marker = call.assert_unlisted("127.0.0.1", other_port.port());

    let call = sandboxed(&env, &flags, &curl(&["-p"], &other_port.url("/t/port")));
    assert_command_failed(&call.out);
    assert_eq!(call.curl().connect, 403, "{}", show(&call.out));
    call.assert_unlisted("127.0.0.1", other_port.port());

    let call = sandboxed(&env, &flags, &curl(&["-f"], &other_host.url("/t/host")));
    assert_command_failed(&call.out);
    assert_eq!(call.curl().status, 403, "{}", show(&call.out));
    let host_marker = call.assert_unlisted("127.0.0.2", other_host.port());

    let name = format!("http://unlisted.sandgate.test:{}/t/name", allowed.port());
    let call = sandboxed(&env, &flags, &curl(&["-f"], &name));
    assert_command_failed(&call.out);
    assert_eq!(call.curl().status, 403, "{}", show(&call.out));
    call.assert_unlisted("unlisted.sandgate.test", allowed.port());

    for upstream in [&allowed, &other_port, &other_host] {
        assert!(upstream.seen().is_empty(), "{:?}", upstream.seen());
    }

    // Control: allowed as the markers say, both are reached.
    let mut flags: Vec<String> = Vec::new();
    for marker in [&port_marker, &host_marker] {
        let hint = marker["allow"]
            .as_array()
            .unwrap_or_else(|| panic!("{marker}"));
        flags.extend(
            hint.iter()
                .map(|v| v.as_str().unwrap_or_default().to_owned()),
        );
    }
    flags.push("--allow-private-hosts".into());
    for (upstream, path) in [(&other_port, "/t/port"), (&other_host, "/t/host")] {
        let call = sandboxed(&env, &flags, &curl(&[], &upstream.url(path)));
        call.assert_fetched(path);
        call.assert_no_network_marker();
        upstream.assert_served(&[path]);
    }
}

/// A listed loopback upstream is still a private destination: without
/// `--allow-private-hosts` neither plain HTTP, nor CONNECT, nor SOCKS reaches it.
#[test]
fn a_listed_loopback_upstream_needs_allow_private_hosts() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let listed = allow(&[&upstream.authority()], false);
    for (args, what) in [
        (vec!["-f"], "plain"),
        (vec!["-p"], "connect"),
        (vec!["--socks5-hostname", PROXY], "socks"),
    ] {
        let call = sandboxed(&env, &listed, &curl(&args, &upstream.url("/t/private")));
        assert_command_failed(&call.out);
        match what {
            "plain" => assert_eq!(call.curl().status, 403, "{}", show(&call.out)),
            "connect" => assert_eq!(call.curl().connect, 403, "{}", show(&call.out)),
            _ => {}
        }
        call.assert_host_refused("127.0.0.1", upstream.port());
        assert!(upstream.seen().is_empty(), "{what}: {:?}", upstream.seen());
    }
    // Control: the same upstream with the flag.
    let call = sandboxed(
        &env,
        &allow(&[&upstream.authority()], true),
        &curl(&[], &upstream.url("/t/private")),
    );
    call.assert_fetched("/t/private");
    call.assert_no_network_marker();
}

/// A connect that bypasses the proxy fails at once with EACCES and a marker naming the
/// address, and nothing reaches the upstream; the one allowed destination is the proxy.
#[test]
fn direct_connections_bypassing_the_proxy_fail_fast_with_a_marker() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let flags = allow(&[&upstream.authority()], true);
    let addr = upstream.authority();
    let probe = probe().to_string_lossy().into_owned();

    // Control: unconfined, the probe reaches the upstream.
    assert_eq!(env.probe("full-access", &["tcp-connect", &addr]), "ok");
    upstream.clear();

    let call = sandboxed(
        &env,
        &flags,
        &["timeout", "20", &probe, "tcp-connect", &addr],
    );
    assert_eq!(
        String::from_utf8_lossy(&call.out.stdout).trim(),
        "err:EACCES",
        "{}",
        show(&call.out)
    );
    call.assert_connect_refused(&addr);

    let call = sandboxed(
        &env,
        &flags,
        &curl(&["--noproxy", "*"], &upstream.url("/t/direct")),
    );
    assert_command_failed(&call.out);
    assert_eq!(
        call.out.status.code(),
        Some(7),
        "curl: cannot connect\n{}",
        show(&call.out)
    );
    call.assert_connect_refused(&addr);
    assert!(upstream.seen().is_empty(), "{:?}", upstream.seen());

    // The proxy itself is the one address a sandboxed connect reaches.
    let call = sandboxed(
        &env,
        &flags,
        &["timeout", "20", &probe, "tcp-connect", PROXY],
    );
    assert_eq!(
        String::from_utf8_lossy(&call.out.stdout).trim(),
        "ok",
        "{}",
        show(&call.out)
    );
    call.assert_no_network_marker();
}

/// UDP, raw sockets and a DNS lookup stay refused with allowed hosts, each with a marker;
/// the UDP control shows the datagram would have arrived.
#[test]
fn udp_raw_and_dns_stay_refused_with_markers() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let flags = allow(&[&upstream.authority()], true);
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_addr = udp.local_addr().unwrap().to_string();
    let probe = probe().to_string_lossy().into_owned();
    let mut buf = [0u8; 8];

    // Control: unconfined, the datagram arrives (loopback delivers it before sendto returns).
    assert_eq!(env.probe("full-access", &["udp-send", &udp_addr]), "ok");
    assert!(
        udp.recv(&mut buf).is_ok(),
        "the control datagram never arrived"
    );

    let call = sandboxed(&env, &flags, &[&probe, "udp-send", &udp_addr]);
    assert_eq!(
        String::from_utf8_lossy(&call.out.stdout).trim(),
        "err:EPERM"
    );
    assert!(
        call.network_markers()
            .iter()
            .any(|m| m["syscall"] == "socket"),
        "{:?}",
        call.markers
    );
    assert!(udp.recv(&mut buf).is_err(), "a sandboxed datagram arrived");

    let call = sandboxed(&env, &flags, &[&probe, "raw-socket"]);
    assert_eq!(
        String::from_utf8_lossy(&call.out.stdout).trim(),
        "err:EPERM"
    );
    assert!(!call.network_markers().is_empty(), "{:?}", call.markers);

    // The resolver's query needs a UDP socket (or a TCP connect to the name server).
    let call = sandboxed(
        &env,
        &flags,
        &["timeout", "20", "getent", "hosts", "example.com"],
    );
    assert_eq!(call.out.status.code(), Some(2), "{}", show(&call.out));
    assert!(
        !call.network_markers().is_empty(),
        "the lookup failed without a network marker\n{}",
        show(&call.out)
    );
}

/// With allowed hosts, the sockets clients open besides their TCP one (an IPv6 probe, the
/// interface list through route netlink) are allowed, and they reach nothing new: an IPv6
/// connect reaches the proxy only by its IPv4-mapped address, `::1` is refused with a
/// marker, and any other netlink family stays refused. Without allowed hosts none of these
/// sockets can even be made.
#[test]
fn ipv6_and_route_netlink_sockets_reach_only_the_proxy() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let script = r#"
import errno, socket
def attempt(make, addr=None):
    try:
        s = make()
        if addr is not None:
            s.settimeout(5)
            s.connect(addr)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
v6 = lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
print(attempt(v6, ("::ffff:127.0.0.1", 3128)),
      attempt(v6, ("::1", 3128)),
      attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)),
      attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)),
      attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)))
"#;
    let argv = ["/usr/bin/python3", "-c", script];
    let call = sandboxed(&env, &allow(&[&upstream.authority()], true), &argv);
    assert_eq!(
        String::from_utf8_lossy(&call.out.stdout).trim(),
        "ok EACCES ok EPERM EPERM",
        "{}",
        show(&call.out)
    );
    call.assert_connect_refused("[::1]:3128");

    // Without allowed hosts: no TCP, no netlink at all.
    let call = sandboxed(&env, &[], &argv);
    assert_eq!(
        String::from_utf8_lossy(&call.out.stdout).trim(),
        "EPERM EPERM EPERM EPERM EPERM",
        "{}",
        show(&call.out)
    );
}

/// A project file cannot allow a host (its `allowed_hosts` is ignored with a warning), and
/// whatever sandgate printed before the proxy started does not stop the proxy.
#[test]
fn a_project_file_cannot_allow_a_host_and_its_warning_leaves_the_proxy_working() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let other = StandIn::plain(Ipv4Addr::LOCALHOST);
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        format!(r#"{{"allowed_hosts": ["{}"]}}"#, other.authority()),
    )
    .unwrap();
    let flags = allow(&[&upstream.authority()], true);

    let call = sandboxed(&env, &flags, &curl(&[], &upstream.url("/t/listed")));
    call.assert_fetched("/t/listed");
    let stderr = String::from_utf8_lossy(&call.out.stderr);
    assert!(stderr.contains("ignoring `allowed_hosts`"), "{stderr}");

    let call = sandboxed(&env, &flags, &curl(&[], &other.url("/t/project")));
    assert_eq!(call.curl().status, 403, "{}", show(&call.out));
    call.assert_unlisted("127.0.0.1", other.port());
    assert!(other.seen().is_empty(), "{:?}", other.seen());
}

/// A call whose wider mode an approval endpoint granted, with a host allowed: asking
/// leaves nothing in sandgate's process that the proxy, forked after it, depends on.
#[test]
fn the_proxy_serves_a_call_granted_through_an_approval_endpoint() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let endpoint = crate::support::endpoint::TestEndpoint::http(|request, _| {
        crate::support::endpoint::Reply::decision(request, "allowed-once")
    });
    let log = denial_log(&env);
    let mut cmd = env.sandgate("read-only");
    crate::support::registry::without_host_proxies(&mut cmd);
    cmd.args(allow(&[&upstream.authority()], true))
        .args(["--sandbox-permissions", "workspace-write"])
        .args(["--justification", "fetch it"])
        .args(["--approval-endpoint", &endpoint.url])
        .arg("--denial-log")
        .arg(&log)
        .arg("--")
        .args(curl(&[], &upstream.url("/t/granted")));
    let call = run(&env, cmd);
    assert_eq!(endpoint.requests().len(), 1, "{}", show(&call.out));
    call.assert_fetched("/t/granted");
    assert!(upstream.served("/t/granted"), "{:?}", upstream.seen());
}

/// A proxy that cannot start is said on stderr; the command runs without the network it
/// asked for, never with more.
#[test]
fn a_proxy_that_cannot_start_is_said_and_reaches_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let mut cmd = command(
        &env,
        &allow(&[&upstream.authority()], true),
        &denial_log(&env),
        &curl(&[], &upstream.url("/t/unstarted")),
    );
    cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", "proxy");
    let call = run(&env, cmd);
    let stderr = String::from_utf8_lossy(&call.out.stderr);
    assert!(
        stderr.contains(
            "the proxy could not start, so the allowed hosts were unreachable: pretended"
        ),
        "{}",
        show(&call.out)
    );
    assert_ne!(call.curl().status, 200, "{}", show(&call.out));
    assert!(!upstream.served("/t/unstarted"), "{:?}", upstream.seen());
}
