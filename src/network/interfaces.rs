//! The addresses this machine's interfaces hold, read afresh for each resolution: an
//! interface can come up, change its address or gain one (a VPN, DHCP, a cloud VM's
//! public address) while a long build's proxy runs.

use std::net::IpAddr;

/// Every address assigned to an interface of this machine (in the proxy's network
/// namespace, the host's), IPv4 and IPv6, up or down.
///
/// # Errors
/// The kernel would not list them; the caller then cannot tell a local address from a
/// remote one and must refuse.
pub fn addresses() -> std::io::Result<Vec<IpAddr>> {
    let listed = nix::ifaddrs::getifaddrs()?;
    Ok(listed
        .filter_map(|interface| {
            let address = interface.address?;
            if let Some(v4) = address.as_sockaddr_in() {
                return Some(IpAddr::V4(v4.ip()));
            }
            address.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_addresses_are_listed() -> std::io::Result<()> {
        let listed = addresses()?;
        assert!(
            listed.contains(&IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
            "{listed:?}"
        );
        Ok(())
    }
}
