//! Attacks on the allowlist that get through: each test states what must hold and fails
//! while the proxy lets the attack succeed.
//!
//! The resolver's search list. The proxy resolves a listed name with the system resolver
//! as it was written, without the trailing dot that makes it absolute. A name below a
//! listed domain that does not exist is then retried under each `search` domain of
//! `/etc/resolv.conf` (`nx.allowed.test` becomes `nx.allowed.test.corp.test`), and the
//! proxy connects to that host: one no pattern names. In a Kubernetes pod (`ndots:5`) the
//! search domains are even tried first.
//!
//! The test runs sandgate in a network and mount namespace of its own, where a small DNS
//! server answers for `corp.test` only, `/etc/resolv.conf` names it with `search
//! corp.test`, and an upstream records what reaches it.
//!
//! The machine's own address. A listed name that resolves to an address one of the
//! machine's interfaces holds (on a cloud VM, its public address) would reach every service
//! the machine binds on `0.0.0.0`. The test gives a network namespace of its own a
//! public-looking address on a veth interface, runs the upstream on `0.0.0.0` there, and
//! points a listed name at that address with a hosts file.

use std::path::Path;
use std::process::Command;

use crate::network::call::*;
use crate::support::*;

/// The port of the upstream in the test's own network namespace.
const PORT: u16 = 8080;

/// Answers A queries for the names in `ANSWERS` with 127.0.0.1, NXDOMAIN for the rest.
const DNS: &str = r#"
import socket, struct, sys
answers = sys.argv[1].split(',')
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('127.0.0.1', 53))
open(sys.argv[2], 'w').close()
while True:
    data, peer = s.recvfrom(512)
    i, labels = 12, []
    while data[i]:
        labels.append(data[i + 1:i + 1 + data[i]].decode())
        i += 1 + data[i]
    name, qtype, question = '.'.join(labels).lower(), data[i + 1:i + 3], data[12:i + 5]
    if name in answers and qtype == b'\x00\x01':
        answer = b'\xc0\x0c' + struct.pack('>HHIH', 1, 1, 60, 4) + socket.inet_aton('127.0.0.1')
        s.sendto(data[:2] + b'\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00' + question + answer, peer)
    elif name in answers:
        s.sendto(data[:2] + b'\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00' + question, peer)
    else:
        s.sendto(data[:2] + b'\x81\x83\x00\x01\x00\x00\x00\x00\x00\x00' + question, peer)
"#;

/// Records the request line and Host header of each request, answers `served PATH`.
/// Arguments: the port, the file of what was seen, the file made once it listens, and the
/// address to bind (127.0.0.1 when not given).
const UPSTREAM: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[4] if len(sys.argv) > 4 else '127.0.0.1', int(sys.argv[1])))
s.listen(16)
open(sys.argv[3], 'w').close()
while True:
    c, _ = s.accept()
    head = b''
    while b'\r\n\r\n' not in head:
        more = c.recv(4096)
        if not more:
            break
        head += more
    lines = head.decode('latin1').split('\r\n')
    host = [l.split(':', 1)[1].strip() for l in lines if l.lower().startswith('host:')]
    with open(sys.argv[2], 'a') as seen:
        seen.write(lines[0].split(' ')[1] + ' ' + ''.join(host) + '\n')
    body = ('served ' + lines[0].split(' ')[1]).encode()
    c.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' % len(body) + body)
    c.close()
"#;

/// `sandgate` (as built by [`command`]) in a fresh network and mount namespace: `setup`
/// (shell lines, `$d` being `dir`; `exit 99` says the setup failed, and each server's
/// pid is its `kill` list) runs first, then sandgate, then `kill` of `servers`. As root
/// `unshare -mn` does; otherwise a user namespace mapping the caller to root, and a nested
/// one mapping root back to the caller for sandgate.
fn in_own_namespace(sandgate: Command, dir: &Path, setup: &str, servers: &str) -> Command {
    let back = if is_root() {
        String::new()
    } else {
        format!(
            "unshare --map-user={} --map-group={}",
            nix::unistd::geteuid(),
            nix::unistd::getegid()
        )
    };
    let script = format!(
        r#"d="$1"; shift
ip link set lo up || exit 99
{setup}
{back} "$@"; rc=$?
kill {servers}
exit $rc"#
    );
    let mut cmd = Command::new("unshare");
    cmd.arg(if is_root() { "-mn" } else { "-Urmn" });
    cmd.args(["sh", "-c", &script, "sh"]).arg(dir);
    behind(cmd, &sandgate)
}

/// Writes `text` to `dir/name`.
fn write_in(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{name}: {e}"));
}

/// `sandgate` in a namespace of its own ([`in_own_namespace`]) where `/etc/resolv.conf`
/// names the DNS server of [`DNS`] (answering for `answers`) with `search corp.test`,
/// `/etc/hosts` names only localhost, and the upstream of [`UPSTREAM`] listens on
/// 127.0.0.1:[`PORT`], writing what reached it to `dir/seen`.
fn with_search_domain(sandgate: Command, dir: &Path, answers: &[&str]) -> Command {
    write_in(
        dir,
        "resolv.conf",
        "nameserver 127.0.0.1\nsearch corp.test\noptions timeout:2 attempts:1\n",
    );
    write_in(dir, "hosts", "127.0.0.1 localhost\n");
    write_in(dir, "dns.py", DNS);
    write_in(dir, "upstream.py", UPSTREAM);
    let setup = format!(
        r#"# Each call starts its own servers: an earlier call's ready files say nothing of these.
rm -f "$d/dns.ready" "$d/up.ready"
mount --bind "$d/resolv.conf" /etc/resolv.conf || exit 99
mount --bind "$d/hosts" /etc/hosts || exit 99
/usr/bin/python3 "$d/dns.py" {answers} "$d/dns.ready" </dev/null >/dev/null 2>&1 & dns=$!
/usr/bin/python3 "$d/upstream.py" {PORT} "$d/seen" "$d/up.ready" </dev/null >/dev/null 2>&1 & up=$!
for i in $(seq 100); do [ -e "$d/dns.ready" ] && [ -e "$d/up.ready" ] && break; sleep 0.1; done
[ -e "$d/dns.ready" ] && [ -e "$d/up.ready" ] || exit 99"#,
        answers = answers.join(","),
    );
    in_own_namespace(sandgate, dir, &setup, "$dns $up")
}

fn seen(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("seen"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_listed_domain_does_not_reach_hosts_under_the_resolvers_search_domains() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let dir = env.root.join("dns");
    std::fs::create_dir(&dir).unwrap();
    let listed = format!("*.allowed.test:{PORT}");
    let log = denial_log(&env);
    // The DNS server knows a listed name and one under the search domain.
    let answers = ["ok.allowed.test", "nx.allowed.test.corp.test"];

    // Control: a listed name that exists is fetched through the proxy, by plain HTTP and by
    // SOCKS with the name resolved by the proxy (private: the upstream is on loopback).
    // curl with `args` at `url`, in the namespace with the DNS server and the upstream.
    let fetch = |args: &[&str], url: &str| {
        let sandgate = command(&env, &allow(&[&listed], true), &log, &curl(args, url));
        let call = run(&env, with_search_domain(sandgate, &dir, &answers));
        assert_ne!(
            call.out.status.code(),
            Some(99),
            "setup: {}",
            show(&call.out)
        );
        call
    };
    for args in [vec![], vec!["--socks5-hostname", PROXY]] {
        let call = fetch(&args, &format!("http://ok.allowed.test:{PORT}/t/listed"));
        call.assert_fetched("/t/listed");
    }
    assert_eq!(
        seen(&dir),
        [
            "/t/listed ok.allowed.test:8080",
            "/t/listed ok.allowed.test:8080"
        ]
    );
    std::fs::remove_file(dir.join("seen")).unwrap();

    // `nx.allowed.test` does not exist; `nx.allowed.test.corp.test` is no listed host and
    // must not be reached, with or without the trailing dot that makes the name absolute.
    for (args, host) in [
        (vec![], "nx.allowed.test"),
        (vec![], "nx.allowed.test."),
        (vec!["-p"], "nx.allowed.test"),
        (vec!["--socks5-hostname", PROXY], "nx.allowed.test"),
    ] {
        let call = fetch(&args, &format!("http://{host}:{PORT}/t/search"));
        assert!(
            seen(&dir).is_empty(),
            "{args:?} {host}: the proxy reached nx.allowed.test.corp.test, a host no pattern \
             names, through the resolver's search list: {:?}\n{}",
            seen(&dir),
            show(&call.out)
        );
        // The proxy answers that the name does not resolve: 502 for plain HTTP, or a
        // refused tunnel or SOCKS request (curl fails).
        let curled = call.curl();
        assert!(
            curled.status == 502 || !call.out.status.success(),
            "{}",
            show(&call.out)
        );
        assert!(!curled.body.contains("served"), "{}", show(&call.out));
    }
}

/// A public-looking address (11.0.0.0/8 is routed on the internet) that this test gives an
/// interface of its own network namespace: the machine's "own" address there.
const OWN: &str = "11.22.33.44";
/// The listed name the hosts file points at [`OWN`].
const OWN_NAME: &str = "own.sandgate.test";

/// `sandgate` in a namespace of its own ([`in_own_namespace`]) where a veth interface
/// holds [`OWN`], the upstream of [`UPSTREAM`] listens on `0.0.0.0:`[`PORT`] (writing what
/// reached it to `dir/seen`), and `/etc/hosts` maps [`OWN_NAME`] to [`OWN`].
fn with_own_address(sandgate: Command, dir: &Path) -> Command {
    write_in(
        dir,
        "hosts",
        &format!("127.0.0.1 localhost\n{OWN} {OWN_NAME}\n"),
    );
    write_in(dir, "upstream.py", UPSTREAM);
    let setup = format!(
        r#"ip link add sg0 type veth peer name sg1 || exit 99
ip addr add {OWN}/24 dev sg0 || exit 99
ip link set sg0 up && ip link set sg1 up || exit 99
rm -f "$d/up.ready"
mount --bind "$d/hosts" /etc/hosts || exit 99
/usr/bin/python3 "$d/upstream.py" {PORT} "$d/seen" "$d/up.ready" 0.0.0.0 </dev/null >/dev/null 2>&1 & up=$!
for i in $(seq 100); do [ -e "$d/up.ready" ] && break; sleep 0.1; done
[ -e "$d/up.ready" ] || exit 99"#
    );
    in_own_namespace(sandgate, dir, &setup, "$up")
}

#[test]
fn a_listed_name_resolving_to_the_machines_own_address_is_refused() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let dir = env.root.join("own");
    std::fs::create_dir(&dir).unwrap();
    let log = denial_log(&env);
    let fetch = |listed: &str, private: bool, args: &[&str], url: &str| {
        let sandgate = command(&env, &allow(&[listed], private), &log, &curl(args, url));
        let call = run(&env, with_own_address(sandgate, &dir));
        assert_ne!(
            call.out.status.code(),
            Some(99),
            "setup: {}",
            show(&call.out)
        );
        call
    };
    let by_name = format!("{OWN_NAME}:{PORT}");
    let by_address = format!("{OWN}:{PORT}");

    // The name and the address, by plain HTTP, through CONNECT and through SOCKS: each is
    // refused before anything reaches the upstream, and the marker says why.
    for (listed, host) in [(&by_name, OWN_NAME), (&by_address, OWN)] {
        for args in [vec!["-f"], vec!["-p"], vec!["--socks5-hostname", PROXY]] {
            let call = fetch(listed, false, &args, &format!("http://{listed}/t/own"));
            assert_command_failed(&call.out);
            let marker = call.assert_host_refused(host, PORT);
            let message = marker["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(&format!("{OWN} (this machine's own)"))
                    && message.contains("--allow-private-hosts"),
                "{args:?} {host}: {marker}"
            );
            assert!(
                seen(&dir).is_empty(),
                "{args:?} {host}: {:?}\n{}",
                seen(&dir),
                show(&call.out)
            );
        }
    }

    // Control: with --allow-private-hosts the same name reaches the upstream on the
    // machine's own address, so the refusals above are the rule's and not a dead address.
    for args in [vec![], vec!["--socks5-hostname", PROXY]] {
        let call = fetch(&by_name, true, &args, &format!("http://{by_name}/t/own"));
        call.assert_fetched("/t/own");
        call.assert_no_network_marker();
    }
    assert_eq!(
        seen(&dir),
        [
            format!("/t/own {OWN_NAME}:{PORT}"),
            format!("/t/own {OWN_NAME}:{PORT}")
        ]
    );
}
