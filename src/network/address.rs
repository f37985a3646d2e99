//! Which destination addresses the proxy may connect to without `--allow-private-hosts`.
//!
//! An allowed host name is only as safe as the addresses it resolves to: a name that
//! resolves to loopback or to the local network would turn the allowlist into a way to
//! reach the machine's own services (or the LAN's) from inside the sandbox. So the proxy
//! connects only to addresses on the public internet unless the caller says otherwise.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// False for loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
/// (169.254/16, fe80::/10), multicast, unspecified, broadcast, 0/8, CGNAT 100.64/10,
/// the reserved and benchmark ranges, and for IPv6 everything outside global unicast
/// (2000::/3). IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) IPv6 addresses are
/// judged by the IPv4 address they carry, since a connect to them reaches that address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    // The documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24) stay open: they
    // are never a local service, and some networks' resolvers answer with them for every
    // outside name, to route it through their own gateway.
    let [a, b, c, _] = ip.octets();
    let closed = a == 0 // "this network", including 0.0.0.0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 168)
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 224; // multicast, reserved and broadcast
    !closed
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return is_public_v4(v4);
    }
    // Only global unicast (2000::/3) is routed on the internet: this leaves out the
    // unspecified and loopback addresses, unique local (fc00::/7), link-local (fe80::/10),
    // site-local, multicast (ff00::/8), discard-only (100::/64) and the unassigned rest.
    let s = ip.segments();
    (s[0] & 0xe000) == 0x2000
}

/// The IPv4 address an IPv6 address stands for, when a connect to it reaches that
/// IPv4 address: `::ffff:a.b.c.d` (mapped), `::a.b.c.d` (compatible) and `64:ff9b::a.b.c.d`
/// (NAT64). `::` and `::1` are IPv6's own unspecified and loopback addresses, not IPv4.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new(
        (s[6] >> 8) as u8,
        (s[6] & 0xff) as u8,
        (s[7] >> 8) as u8,
        (s[7] & 0xff) as u8,
    );
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse()
            .unwrap_or_else(|e| panic!("bad test address {text}: {e}"))
    }

    #[test]
    fn closed_ranges_are_not_public() {
        for text in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.1.2.3",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "100::1",
            "fe00::1",
            "4000::1",
            // IPv4 carried in IPv6 is judged as IPv4.
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:192.168.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
        ] {
            assert!(!is_public(ip(text)), "{text} must not count as public");
        }
    }

    #[test]
    fn internet_addresses_are_public() {
        for text in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "151.101.1.63",
            "172.15.255.255",
            "172.32.0.1",
            "192.167.255.255",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a04:4e42::223",
            "::ffff:151.101.1.63",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.80",
            "2001:db8::1",
            "64:ff9b::808:808",
        ] {
            assert!(is_public(ip(text)), "{text} must count as public");
        }
    }
}
