//! Which destination addresses the proxy may connect to without `--allow-private-hosts`.
//!
//! An allowed host name is only as safe as the addresses it resolves to: a name that
//! resolves to loopback, to the local network or to one of this machine's own addresses
//! would turn the allowlist into a way to reach the machine's own services (or the LAN's)
//! from inside the sandbox. So the proxy connects only to addresses on the public internet
//! that no interface of this machine holds, unless the caller says otherwise.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why the proxy does not connect to an address without `--allow-private-hosts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Loopback, private, link-local, shared, multicast, reserved, unspecified: never the
    /// public internet.
    Private,
    /// A documentation range (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32,
    /// 3fff::/20): routed nowhere on the internet, so where it leads is a local network's
    /// choice (some use them for their own gateways or for the machine itself).
    Documentation,
    /// Assigned to one of this machine's interfaces: a cloud VM's public address reaches
    /// every service the machine binds on `0.0.0.0`.
    Local,
}

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Closed::Private => "private",
            Closed::Documentation => "documentation range",
            Closed::Local => "this machine's own",
        })
    }
}

/// Why `ip` is closed, or `None` when the proxy may connect to it. `local` holds the
/// addresses of this machine's interfaces, read at the resolution that produced `ip`
/// (interfaces come and go). IPv4-mapped, IPv4-compatible and NAT64 IPv6 addresses are
/// judged by the IPv4 address they carry, since a connect to them reaches that address.
pub fn closed(ip: IpAddr, local: &[IpAddr]) -> Option<Closed> {
    let reached = match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    };
    let canonical = |a: &IpAddr| match a {
        IpAddr::V6(v6) => embedded_v4(*v6).map_or(*a, IpAddr::V4),
        IpAddr::V4(_) => *a,
    };
    let range = match reached {
        IpAddr::V4(v4) => closed_v4(v4),
        IpAddr::V6(v6) => closed_v6(v6),
    };
    // A range says the more familiar reason (loopback is "private" before it is "ours").
    range.or_else(|| {
        local
            .iter()
            .map(canonical)
            .any(|a| a == reached)
            .then_some(Closed::Local)
    })
}

/// True when `ip` lies in no closed range (this machine's own addresses aside).
pub fn is_public(ip: IpAddr) -> bool {
    closed(ip, &[]).is_none()
}

fn closed_v4(ip: Ipv4Addr) -> Option<Closed> {
    let [a, b, c, _] = ip.octets();
    let private = a == 0 // "this network", including 0.0.0.0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 168)
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 224; // multicast, reserved and broadcast
    let documentation =
        (a, b, c) == (192, 0, 2) || (a, b, c) == (198, 51, 100) || (a, b, c) == (203, 0, 113);
    if private {
        Some(Closed::Private)
    } else if documentation {
        Some(Closed::Documentation)
    } else {
        None
    }
}

fn closed_v6(ip: Ipv6Addr) -> Option<Closed> {
    let s = ip.segments();
    if (s[0], s[1]) == (0x2001, 0x0db8) || (s[0] == 0x3fff && s[1] & 0xf000 == 0) {
        return Some(Closed::Documentation);
    }
    // 6to4 (2002::/16) and Teredo (2001::/32) carry an IPv4 address (the host's own, or a
    // private one) that a relay of the local network's choosing reaches: where they lead
    // is not the internet's to say, so neither is public.
    if s[0] == 0x2002 || (s[0], s[1]) == (0x2001, 0) {
        return Some(Closed::Private);
    }
    // Only global unicast (2000::/3) is routed on the internet: this leaves out the
    // unspecified and loopback addresses, unique local (fc00::/7), link-local (fe80::/10),
    // site-local, multicast (ff00::/8), discard-only (100::/64) and the unassigned rest.
    ((s[0] & 0xe000) != 0x2000).then_some(Closed::Private)
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
            "2002:7f00:1::1",
            "2002:a00:1::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
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
            "64:ff9b::808:808",
            "192.0.1.255",
            "192.0.3.0",
            "198.51.99.255",
            "198.51.101.0",
            "203.0.112.255",
            "203.0.114.0",
            "2001:db9::1",
            "2001:db7:ffff::1",
            "3ffe:ffff::1",
            "3fff:1000::1",
        ] {
            assert!(is_public(ip(text)), "{text} must count as public");
        }
    }

    #[test]
    fn documentation_ranges_are_closed_and_say_so() {
        for text in [
            "192.0.2.0",
            "192.0.2.255",
            "198.51.100.7",
            "203.0.113.80",
            "2001:db8::1",
            "2001:db8:ffff:ffff::1",
            "3fff::1",
            "3fff:fff:ffff::1",
            "::ffff:203.0.113.80",
            "64:ff9b::c000:201",
        ] {
            assert_eq!(closed(ip(text), &[]), Some(Closed::Documentation), "{text}");
        }
    }

    #[test]
    fn the_machines_own_addresses_are_closed_however_they_are_spelt() {
        let local = [
            ip("11.22.33.44"),
            ip("2a01:4f8::7"),
            ip("::ffff:151.101.1.63"),
        ];
        for text in [
            "11.22.33.44",
            "::ffff:11.22.33.44",
            "::11.22.33.44",
            "64:ff9b::b16:212c",
            "2a01:4f8::7",
            "151.101.1.63",
        ] {
            assert_eq!(closed(ip(text), &local), Some(Closed::Local), "{text}");
        }
        // A neighbour of a local address is not the machine itself.
        assert_eq!(closed(ip("11.22.33.45"), &local), None);
        assert_eq!(closed(ip("2a01:4f8::8"), &local), None);
        // A closed range says its own reason, local or not.
        assert_eq!(closed(ip("10.0.0.1"), &local), Some(Closed::Private));
        assert_eq!(
            closed(ip("127.0.0.1"), &[ip("127.0.0.1")]),
            Some(Closed::Private)
        );
    }
}
