//! The proxy that is a sandbox's only way to the network: HTTP (absolute-URI requests and
//! `CONNECT`) and SOCKS5 on one listener, each destination checked against the allowlist,
//! resolved here and connected only when its address is allowed.
//!
//! It runs in a process of its own outside the sandbox, so the sandbox never resolves a name
//! or opens a socket to anything but this listener. The order of the checks is the point:
//! the requested name is judged first, then resolved once, and the connect goes to one of
//! the addresses that passed — never to a fresh resolution, which a hostile DNS answer
//! could point elsewhere between the check and the connect.

mod http;
mod socks;

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::address::{closed, Closed};
use super::interfaces;
use crate::policy::host_rules::{canonical_host, HostRules, Verdict};

/// How many client connections are served at once; more wait in the listen backlog. Each
/// costs the proxy two fds (client and upstream): the bound keeps a sandboxed process from
/// using up the proxy's fds, while leaving far more room than package managers use.
const MAX_CONNECTIONS: usize = 256;
/// How long a client has to send its request (HTTP headers or the SOCKS5 handshake).
const REQUEST_TIME: Duration = Duration::from_secs(30);
/// How long resolving and connecting to a destination may take.
const CONNECT_TIME: Duration = Duration::from_secs(10);

/// Why the proxy refused a request (one line for the client's 403, and the marker).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Refusal {
    /// The host as the client named it, in canonical form (lower case, no trailing dot, an
    /// IPv6 literal in brackets), so that `{host}:{port}` is a valid `--allow-host` pattern.
    pub host: String,
    pub port: u16,
    pub reason: String,
    /// true when `--allow-host host:port` would allow it (not listed); false when
    /// `denied_hosts` refuses it or it resolves only to closed addresses (private, documentation
    /// ranges, this machine's own).
    pub listable: bool,
}

impl Refusal {
    /// A request sandgate's proxy refused. Only `full-access` (which has the host's
    /// network) reaches the host without the proxy; a host that is merely not listed is
    /// better allowed alone with `--allow-host`, which the marker says.
    pub fn denial(&self) -> crate::denial::Denial {
        crate::denial::Denial {
            what: crate::denial::Operation {
                op: crate::denial::NETWORK,
                path: None,
                addr: None,
                host: Some(self.host.clone()),
                port: Some(self.port),
                syscall: "proxy",
                pid: 0,
            },
            needed: crate::policy::Mode::FullAccess,
            protected: !self.listable,
            reason: Some(self.reason.clone()),
        }
    }
}

impl Refusal {
    /// The `--allow-host` pattern that would allow exactly this destination.
    pub fn allow_pattern(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Sets the proxy up on `listener`, to serve (with [`Ready::serve`]) HTTP proxy requests
/// (absolute-URI GET/POST/... for http://, and CONNECT) and SOCKS5 (no auth, CONNECT
/// command, domain/IPv4/IPv6 targets, remote resolution) on the same listener (dispatch on
/// the first byte: 0x05 = SOCKS5) until `until` polls POLLHUP.
/// Every target host is checked with `rules.verdict`, resolved by the proxy itself
/// (tokio::net::lookup_host → getaddrinfo, so /etc/hosts applies), and connected only to a
/// resolved address that `address::closed` leaves open — no private or documentation
/// range, none of this machine's own addresses — unless `rules.allow_private`; never
/// re-resolved after the check. A refused request calls `refused` BEFORE the client gets
/// its answer (HTTP 403 with a one-line text/plain reason; SOCKS5 reply 0x02 "not allowed by
/// ruleset"), so that the marker exists when the client sees the refusal.
/// Builds its own tokio current_thread runtime; the caller is a freshly forked process.
pub fn ready(listener: std::net::TcpListener, until: OwnedFd) -> std::io::Result<Ready> {
    // Debug builds only (the ones `cargo test` runs): a proxy that cannot start, so that
    // the way a call says so can be tested. No variable weakens a release binary.
    #[cfg(debug_assertions)]
    if std::env::var("SANDGATE_DEBUG_PRETEND_MISSING")
        .is_ok_and(|l| l.split(',').any(|f| f.trim() == "proxy"))
    {
        return Err(std::io::Error::other(
            "pretended (SANDGATE_DEBUG_PRETEND_MISSING=proxy)",
        ));
    }
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let listener = {
        let _inside = runtime.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    let (hung_up, hangup) = oneshot::channel();
    std::thread::Builder::new()
        .name("proxy-until".into())
        .spawn(move || {
            wait_for_hangup(&until);
            let _ = hung_up.send(());
        })?;
    Ok(Ready {
        runtime,
        listener,
        hangup,
    })
}

/// A proxy set up to serve: its runtime, the listener registered with it, and the thread
/// that watches the lifeline. Made before the proxy tells sandgate it started, so that a
/// failure up to here is said rather than found as refused connects.
pub struct Ready {
    runtime: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    hangup: oneshot::Receiver<()>,
}

impl Ready {
    /// Serves (see [`ready`]) until the lifeline hangs up.
    pub fn serve(
        self,
        rules: HostRules,
        refused: Box<dyn Fn(&Refusal) + Send + Sync>,
    ) -> std::io::Result<()> {
        let gate = Arc::new(Gate { rules, refused });
        self.runtime
            .block_on(serve(self.listener, gate, self.hangup))
    }
}

/// Blocks until `fd` reports POLLHUP (or an error). Polling for no events at all means a
/// readable fd — a seccomp listener with a notification waiting — never wakes this thread;
/// the kernel reports hang-up and errors whatever was asked for.
fn wait_for_hangup(fd: &OwnedFd) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::empty())];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            // Only POLLHUP, POLLERR or POLLNVAL can be reported: each ends the proxy. So
            // does a failing poll, which would otherwise leave the proxy without an end.
            Ok(_) | Err(_) => return,
        }
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    gate: Arc<Gate>,
    mut hangup: oneshot::Receiver<()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = tokio::select! {
            biased;
            _ = &mut hangup => return Ok(()),
            slot = slots.clone().acquire_owned() => slot,
        };
        let Ok(slot) = slot else {
            return Ok(());
        };
        let accepted = tokio::select! {
            biased;
            _ = &mut hangup => return Ok(()),
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(connection(stream, gate.clone(), slot));
            }
            // Out of fds or a connection reset before accept: wait a little rather than
            // spin on an error that the next accept would return at once.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Serves one client connection, as SOCKS5 when its first byte is SOCKS5's version.
async fn connection(stream: TcpStream, gate: Arc<Gate>, slot: OwnedSemaphorePermit) {
    let mut first = [0u8; 1];
    match tokio::time::timeout(REQUEST_TIME, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == 0x05 => socks::serve(stream, gate, slot).await,
        Ok(Ok(1)) => http::serve(stream, gate, slot).await,
        _ => {}
    }
}

/// The rules of the call and the way refusals are reported.
struct Gate {
    rules: HostRules,
    refused: Box<dyn Fn(&Refusal) + Send + Sync>,
}

/// Why no upstream connection was made.
enum Blocked {
    /// The rules refuse the destination; `refused` has been called.
    Refused(Refusal),
    /// The request names no valid host.
    BadHost(String),
    /// The destination could not be resolved or reached.
    Unreachable { message: String, refused: bool },
}

impl Gate {
    fn refuse(&self, refusal: Refusal) -> Blocked {
        (self.refused)(&refusal);
        Blocked::Refused(refusal)
    }

    /// Checks `host`:`port` against the rules, resolves it, and connects to an address
    /// that passed the checks.
    async fn open(&self, host: &str, port: u16) -> Result<TcpStream, Blocked> {
        let Some(host) = canonical_host(host) else {
            return Err(Blocked::BadHost(format!(
                "`{host}` is not a host name or address"
            )));
        };
        if port == 0 {
            return Err(Blocked::BadHost(format!("{host}: port 0 is not a port")));
        }
        let target = format!("{host}:{port}");
        match self.rules.verdict(&host, port) {
            Verdict::Allowed => {}
            Verdict::Denied => {
                return Err(self.refuse(Refusal {
                    reason: format!("{target} is denied by the configuration (denied_hosts)"),
                    host,
                    port,
                    listable: false,
                }))
            }
            Verdict::NotListed => {
                return Err(self.refuse(Refusal {
                    reason: format!("{target} is not an allowed host (--allow-host {target})"),
                    host,
                    port,
                    listable: true,
                }))
            }
        }
        let resolved = tokio::time::timeout(CONNECT_TIME, resolve(&host, port)).await;
        let addresses = match resolved {
            Ok(Ok(addresses)) if !addresses.is_empty() => addresses,
            Ok(Ok(_)) => return Err(unreachable(format!("{host} has no address"), false)),
            Ok(Err(e)) => return Err(unreachable(format!("cannot resolve {host}: {e}"), false)),
            Err(_) => return Err(unreachable(format!("resolving {host} timed out"), false)),
        };
        let open = if self.rules.allow_private {
            addresses
        } else {
            match open_addresses(&addresses) {
                Ok(open) => open,
                Err(why) => {
                    return Err(self.refuse(Refusal {
                        reason: format!("{host} {why} (--allow-private-hosts)"),
                        host,
                        port,
                        listable: false,
                    }))
                }
            }
        };
        match tokio::time::timeout(CONNECT_TIME, connect_first(&open)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(unreachable(
                format!("cannot connect to {target}: {e}"),
                e.kind() == std::io::ErrorKind::ConnectionRefused,
            )),
            Err(_) => Err(unreachable(
                format!("connecting to {target} timed out"),
                false,
            )),
        }
    }
}

/// The addresses of `addresses` the proxy may connect to without `--allow-private-hosts`,
/// in their order; or, when there is none, why (each address with the reason it is
/// closed). The machine's own addresses are read here, at each resolution.
fn open_addresses(addresses: &[SocketAddr]) -> Result<Vec<SocketAddr>, String> {
    let local = interfaces::addresses().map_err(|e| {
        format!("cannot be checked: this machine's own addresses cannot be listed ({e})")
    })?;
    let judged: Vec<(SocketAddr, Option<Closed>)> = addresses
        .iter()
        .map(|a| (*a, closed(a.ip(), &local)))
        .collect();
    let open: Vec<SocketAddr> = judged
        .iter()
        .filter(|(_, why)| why.is_none())
        .map(|(a, _)| *a)
        .collect();
    if !open.is_empty() {
        return Ok(open);
    }
    let listed: Vec<String> = judged
        .iter()
        .filter_map(|(a, why)| Some(format!("{} ({})", a.ip(), (*why)?)))
        .collect();
    Err(format!(
        "resolves only to addresses the proxy does not connect to: {}",
        listed.join(", ")
    ))
}

fn unreachable(message: String, refused: bool) -> Blocked {
    Blocked::Unreachable { message, refused }
}

/// The addresses of a canonical host: an IP literal is its own address (no DNS); a name is
/// resolved by the system's resolver, so /etc/hosts and nsswitch apply as for any program.
async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = literal.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    Ok(tokio::net::lookup_host((host, port)).await?.collect())
}

/// Connects to the first of `addresses` that answers, in the resolver's order.
async fn connect_first(addresses: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests;
