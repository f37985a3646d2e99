//! The SOCKS5 side of the proxy (RFC 1928): no authentication, the CONNECT command only,
//! the destination named by domain (resolved here, as `socks5h://` asks) or by address.
//! fast-socks5 reads and writes the protocol's messages; the checks are the proxy's own.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use fast_socks5::server::Socks5ServerProtocol;
use fast_socks5::util::target_addr::TargetAddr;
use fast_socks5::{ReplyError, Socks5Command};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::{Blocked, Gate, REQUEST_TIME};

pub(super) async fn serve(stream: TcpStream, gate: Arc<Gate>, _slot: OwnedSemaphorePermit) {
    let request = tokio::time::timeout(REQUEST_TIME, async {
        Socks5ServerProtocol::accept_no_auth(stream)
            .await?
            .read_command()
            .await
    })
    .await;
    // A malformed handshake, an unknown command or address type has had its answer from
    // fast-socks5 where the protocol has one; the connection just ends.
    let Ok(Ok((protocol, command, target))) = request else {
        return;
    };
    if !matches!(command, Socks5Command::TCPConnect) {
        let _ = protocol.reply_error(&ReplyError::CommandNotSupported).await;
        return;
    }
    let (host, port) = match target {
        TargetAddr::Ip(address) => (address.ip().to_string(), address.port()),
        TargetAddr::Domain(name, port) => (name, port),
    };
    let mut upstream = match gate.open(&host, port).await {
        Ok(upstream) => upstream,
        Err(blocked) => {
            let reply = match blocked {
                Blocked::Refused(_) => ReplyError::ConnectionNotAllowed,
                Blocked::BadHost(_) => ReplyError::HostUnreachable,
                Blocked::Unreachable { refused: true, .. } => ReplyError::ConnectionRefused,
                Blocked::Unreachable { refused: false, .. } => ReplyError::HostUnreachable,
            };
            let _ = protocol.reply_error(&reply).await;
            return;
        }
    };
    // The reply's bound address is the unspecified one: the host's own addresses are none
    // of the sandbox's business, and clients ignore the field for CONNECT.
    let bound = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
    let Ok(mut client) = protocol.reply_success(bound).await else {
        return;
    };
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}
