//! Red team, the proxy and the host's own addresses: IPv6 forms that carry an IPv4
//! address the proxy would refuse, other than the mapped, compatible and NAT64 forms it
//! already judges by the IPv4 inside.

use crate::support::*;

/// Attack: list (or have listed) an IPv6 literal whose routing carries loopback or this
/// machine's own IPv4 address: 6to4 (`2002:AABB:CCDD::/48` is the IPv4 `AA.BB.CC.DD`
/// tunnelled over protocol 41; `2002:7f00:1::` is 127.0.0.1) and Teredo (`2001:0::/32`,
/// which carries a server address and an obfuscated client address). Both lie in 2000::/3,
/// so the proxy counts them as the public internet and connects; on a host with a 6to4
/// or Teredo route the packet leaves for the embedded IPv4 address. Should fail: the
/// README promises that the proxy never connects to loopback or a private address "also
/// when a listed name resolves there", and judges IPv6 forms carrying IPv4 by that IPv4;
/// the proxy must refuse these with 403 instead of trying (502 means it tried).
#[test]
fn redteam_the_proxy_refuses_6to4_and_teredo_forms_of_closed_addresses() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mut failures = vec![];
    for host in [
        "[2002:7f00:1::1]",    // 6to4 of 127.0.0.1
        "[2002:a00:1::1]",     // 6to4 of 10.0.0.1
        "[2002:a9fe:a9fe::1]", // 6to4 of 169.254.169.254 (cloud metadata)
        "[2001:0:7f00:1::1]",  // Teredo with server 127.0.0.1
    ] {
        let script = format!(
            "curl -s -m 8 -o /dev/null -w '%{{http_code}}' -x http://127.0.0.1:3128 http://{host}:8080/"
        );
        let mut cmd = env.sandgate("read-only");
        cmd.args(["--allow-host", &format!("{host}:8080")])
            .args(["--", "/bin/sh", "-c", &script]);
        let out = output(&mut cmd);
        let code = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        // The landlock backend runs no proxy (a known limit): nothing answers at all.
        let refused = if landlock_backend() { "000" } else { "403" };
        if code != refused {
            failures.push(format!(
                "{host}: the proxy answered {code} (it tried to connect), not 403"
            ));
        }
    }
    assert_none(failures);
}

/// Attack: reach a host unix socket that lies outside the workspace but on the same file
/// system, by giving its inode a name beneath the workspace: `ln OUTSIDE/svc.sock
/// ws/link.sock` (a hard link, which the supervisor would perform), then connect to the
/// new name — the connect rule goes by where the path lies, and the link lies in the
/// workspace. Should fail: the link is refused (each writable root is a mount of its own,
/// so the kernel answers EXDEV) and the connect never reaches the host's listener.
#[test]
fn redteam_a_hard_link_does_not_bring_a_host_socket_into_the_workspace() {
    if !require_full_enforcement() {
        return;
    }
    use std::io::Write;
    let env = TestEnv::new();
    let path = env.outside.join("svc.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        "ln '{}' link.sock 2>/dev/null; '{}' unix-connect link.sock",
        path.display(),
        probe().display()
    );
    let out = env.sh("workspace-write", &script);
    let mut reached = false;
    while let Ok((mut conn, _)) = listener.accept() {
        reached = true;
        let _ = conn.write_all(b"host");
    }
    assert!(
        !reached && !String::from_utf8_lossy(&out.stdout).contains("ok"),
        "the host's socket was reached through a hard link: {}",
        show(&out)
    );
}
