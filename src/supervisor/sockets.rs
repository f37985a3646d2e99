//! Mediated connects and binds: the supervisor copies the address out of the caller's
//! memory, resolves a pathname in the caller's own view, checks it — for a connect the
//! socket's provenance, for a bind that the sandbox may make a socket there — and acts on a
//! socket itself: the caller's own, taken with `pidfd_getfd`, or where that is refused a
//! new one of the same kind put in the caller's place once done. A TCP connect goes to
//! sandgate's proxy or nowhere; an abstract name is never bound (without namespaces it
//! could be a host daemon's, whose clients would then reach the sandbox).

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::SockaddrStorage;

use super::workers::{Connect, Target};
use super::{creds_of, observe, pidfd_for, resolve, Call, Context, SOCKADDR_UN_LEN};
use crate::sys;

/// Checks a TCP connect: the proxy's address (on an IPv6 socket, its IPv4-mapped form) is
/// connected by the supervisor, on its own copy of that address; any other goes nowhere,
/// with a marker naming it (the sandbox's network namespace has nothing else to reach, and
/// the proxy is the way out).
fn to_the_proxy(bytes: &[u8], socket: OwnedFd) -> Result<Connect, Refused> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    let port = |b: &[u8]| u16::from_be_bytes([b[2], b[3]]);
    let asked = match i32::from(family) {
        libc::AF_INET if bytes.len() >= 8 => SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]),
            port(bytes),
        )),
        libc::AF_INET6 if bytes.len() >= 24 => {
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&bytes[8..24]);
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port(bytes), 0, 0))
        }
        libc::AF_INET | libc::AF_INET6 => return Err(Errno::EINVAL.into()),
        _ => {
            return Err(Refused::Policy(
                Errno::EAFNOSUPPORT,
                format!("address family {family}"),
            ))
        }
    };
    let proxy = SocketAddrV4::new(Ipv4Addr::LOCALHOST, crate::network::PROXY_PORT);
    let target = match asked {
        SocketAddr::V4(v4) if v4 == proxy => Target::Proxy(SockaddrStorage::from(v4)),
        SocketAddr::V6(v6)
            if v6.ip().to_ipv4_mapped() == Some(*proxy.ip()) && v6.port() == proxy.port() =>
        {
            Target::Proxy(SockaddrStorage::from(SocketAddrV6::new(
                proxy.ip().to_ipv6_mapped(),
                proxy.port(),
                0,
                0,
            )))
        }
        other => return Err(Refused::Policy(Errno::EACCES, other.to_string())),
    };
    Ok(Connect {
        socket,
        target,
        may_wait: true,
        replaces: None,
    })
}

/// Why a mediated connect failed.
pub(super) enum Refused {
    /// The sandbox refused it (a marker is due): the errno and the address.
    Policy(Errno, String),
    /// A pathname socket outside the workspace and the private temp, not allowed by name.
    Provenance(String),
    /// The kernel would have failed it anyway (no such socket, bad fd, …).
    Kernel(Errno),
}

impl Refused {
    /// The answer to a refused connect or bind, with its marker when the sandbox refused.
    pub(super) fn answer(self, call: &Call<'_>) -> (sys::Answer, Option<crate::denial::Denial>) {
        use crate::policy::Mode;
        match self {
            Refused::Policy(errno, addr) => (
                sys::Answer::Error(errno as i32),
                Some(call.denial("network", None, Some(addr), Mode::FullAccess)),
            ),
            Refused::Provenance(path) => (
                sys::Answer::Error(libc::EACCES),
                Some(call.denial(crate::denial::NETWORK, Some(path), None, Mode::FullAccess)),
            ),
            Refused::Kernel(errno) => (sys::Answer::Error(errno as i32), None),
        }
    }
}

impl From<Errno> for Refused {
    fn from(e: Errno) -> Self {
        Refused::Kernel(e)
    }
}

/// Decides one `connect(fd, addr, len)` for the sandboxed caller: returns the connect to
/// perform, on a duplicate of the caller's socket, through the inode that was checked.
pub(super) fn mediate(call: &Call<'_>, context: &Context) -> Result<Connect, Refused> {
    let fd = i32::try_from(call.arg(0)).map_err(|_| Errno::EBADF)?;
    let len = usize::try_from(call.arg(2)).map_err(|_| Errno::EINVAL)?;
    if !(2..=SOCKADDR_UN_LEN).contains(&len) {
        return Err(Errno::EINVAL.into());
    }
    let bytes = call.read(call.arg(1), len)?;
    let pidfd = pidfd_for(call.tid())?;
    // The task behind the pid may have died and its number been reused since the
    // notification; once this passes, the memory read and the pidfd belong to the caller.
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    let (socket, replaces) = match sys::pidfd_getfd(pidfd.as_fd(), fd) {
        Ok(socket) => (socket, None),
        // Refused (a default container's profile refuses it): a socket of the same kind,
        // put in place of the caller's once connected.
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => fresh_socket(call, fd)?,
        Err(e) => return Err(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EBADF)).into()),
    };
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    let may_wait = match sys::socket_kind(socket.as_raw_fd()) {
        Some((libc::AF_UNIX, kind)) => kind != libc::SOCK_DGRAM,
        Some((libc::AF_INET | libc::AF_INET6, libc::SOCK_STREAM)) if context.proxy => {
            return to_the_proxy(&bytes, socket);
        }
        // Otherwise only inherited IP sockets get here: without a proxy a restricted
        // profile has no network.
        Some((domain, _)) => {
            return Err(Refused::Policy(
                Errno::EACCES,
                format!("socket family {domain}"),
            ))
        }
        None => return Err(Errno::ENOTSOCK.into()),
    };
    if i32::from(family) != libc::AF_UNIX {
        return Err(Errno::EINVAL.into());
    }
    let path = &bytes[2..];
    if path.is_empty() {
        return Err(Errno::EINVAL.into());
    }
    if path[0] == 0 {
        // Abstract address: sandgate cannot tell a socket made inside the sandbox from one
        // outside, and connecting on the caller's behalf would escape landlock's scoping.
        let name = String::from_utf8_lossy(&path[1..])
            .trim_end_matches('\0')
            .to_owned();
        return Err(Refused::Policy(Errno::EPERM, format!("@{name}")));
    }
    let path = path.split(|b| *b == 0).next().unwrap_or_default();
    let root = resolve::Root::new(call.open_proc("root")?)?;
    let cwd = call.open_proc("cwd")?;
    let creds = creds_of(call.tid())?;
    let (dir, socket_file) = resolve::resolve_socket(&root, cwd.as_fd(), path, &creds)?;
    let allowed = resolve::identity(&nix::sys::stat::fstat(socket_file.as_fd())?);
    let reachable = context.allowed_sockets.contains(&allowed)
        || resolve::nearest(
            dir.as_fd(),
            &root,
            &[&context.islands, &context.socket_roots],
        )? == Some(1);
    if !reachable {
        return Err(Refused::Provenance(observe::shown_path(
            call,
            libc::AT_FDCWD,
            path,
        )));
    }
    Ok(Connect {
        socket,
        target: Target::Unix(socket_file),
        may_wait,
        replaces,
    })
}

/// A bind the supervisor has checked: a socket (the caller's own, or a new one for its
/// place) and the name to bind, through the directory it resolved.
pub(super) struct Bind {
    socket: OwnedFd,
    /// The directory the name goes in, held while the bind goes through it.
    dir: OwnedFd,
    name: Vec<u8>,
    replaces: Option<(i32, bool)>,
}

impl Bind {
    /// Binds, and puts a new socket in the caller's place; the answer to give.
    pub(super) fn perform(&self, listener: &OwnedFd, id: u64) -> sys::Answer {
        let mut via = format!("/proc/self/fd/{}/", self.dir.as_raw_fd()).into_bytes();
        via.extend_from_slice(&self.name);
        let Ok(via) = CString::new(via) else {
            return sys::Answer::Error(libc::EINVAL);
        };
        let done = nix::sys::socket::UnixAddr::new(via.as_bytes())
            .and_then(|addr| nix::sys::socket::bind(self.socket.as_raw_fd(), &addr));
        let done = match (done, self.replaces) {
            (Ok(()), Some((target, cloexec))) => {
                sys::notif_addfd_at(listener.as_fd(), id, self.socket.as_fd(), target, cloexec)
                    .map_err(|_| Errno::EBADF)
            }
            (done, _) => done,
        };
        match done {
            Ok(()) => sys::Answer::Return(0),
            Err(e) => sys::Answer::Error(e as i32),
        }
    }
}

/// What a checked `bind(fd, addr, len)` comes to.
pub(super) enum Bound {
    /// The kernel may do it as asked: an unnamed socket given an autobound name (the
    /// length alone decides, and no address the caller rewrites can make it another).
    Kernel,
    Bind(Bind),
}

/// Decides one `bind` for the sandboxed caller, where the supervisor decides: a unix name
/// only where the sandbox may make a file of that name (a writable area, past the seal
/// rules), on the supervisor's copy of it; no abstract name.
pub(super) fn mediate_bind(call: &Call<'_>, context: &Context) -> Result<Bound, Refused> {
    let fd = i32::try_from(call.arg(0)).map_err(|_| Errno::EBADF)?;
    let len = usize::try_from(call.arg(2)).map_err(|_| Errno::EINVAL)?;
    if len < 2 {
        return Err(Errno::EINVAL.into());
    }
    let bytes = call.read(call.arg(1), len.min(SOCKADDR_UN_LEN))?;
    if i32::from(u16::from_ne_bytes([bytes[0], bytes[1]])) != libc::AF_UNIX {
        // No other family reaches a socket here (the filter refuses them).
        return Err(Errno::EAFNOSUPPORT.into());
    }
    let path = &bytes[2..];
    match path.first() {
        None => return Ok(Bound::Kernel),
        Some(0) => {
            let name = String::from_utf8_lossy(&path[1..])
                .trim_end_matches('\0')
                .to_owned();
            return Err(Refused::Policy(Errno::EPERM, format!("@{name}")));
        }
        Some(_) => {}
    }
    let path = path.split(|b| *b == 0).next().unwrap_or_default();
    let root = context.root.as_ref().ok_or(Errno::EACCES)?;
    // The path was copied above: `locate` takes it, and the cwd the caller binds from.
    let at = super::ops::PathArg {
        dirfd: libc::AT_FDCWD,
        ptr: 0,
    };
    let place = match super::place::locate(
        call,
        context,
        root,
        at,
        path,
        false,
        super::observe::Acts::OnName,
    )? {
        super::place::Located::Place(place) => place,
        _ => return Err(Errno::EACCES.into()),
    };
    let (Some(name), None) = (place.name.clone(), &place.object) else {
        return Err(Errno::EADDRINUSE.into());
    };
    let super::place::Area::Writable(named) = place.area else {
        return Err(Errno::EACCES.into());
    };
    // A socket file is a new name like any other: the seal rules that keep `.sandgate/`,
    // git's configuration and hooks apply (a socket in a hooks directory is refused too).
    let ordinary = named.here(&name).is_ok_and(|here| {
        super::seal::create(here, super::seal::Made::Node)
            == super::seal::Decision::Perform { no_exec: false }
    });
    if !ordinary {
        return Err(Refused::Provenance(observe::shown_path(
            call,
            libc::AT_FDCWD,
            path,
        )));
    }
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    let pidfd = pidfd_for(call.tid())?;
    let (socket, replaces) = match sys::pidfd_getfd(pidfd.as_fd(), fd) {
        Ok(socket) => (socket, None),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => fresh_socket(call, fd)?,
        Err(e) => return Err(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EBADF)).into()),
    };
    Ok(Bound::Bind(Bind {
        socket,
        dir: place.dir,
        name,
        replaces,
    }))
}

/// A new unix socket like the caller's `fd` — same type, same `O_NONBLOCK` — to connect
/// in its place, with where it goes: the caller's must be a unix socket that is neither
/// bound nor connected (one that is would lose that), read from its `/proc` entries.
fn fresh_socket(call: &Call<'_>, fd: i32) -> Result<(OwnedFd, Option<(i32, bool)>), Refused> {
    let link = call.proc_link(&format!("fd/{fd}")).ok_or(Errno::EBADF)?;
    let inode = link
        .to_str()
        .and_then(|l| l.strip_prefix("socket:["))
        .and_then(|l| l.strip_suffix(']'))
        .ok_or(Errno::ENOTSOCK)?;
    let tid = call.tid();
    let table =
        std::fs::read_to_string(format!("/proc/{tid}/net/unix")).map_err(|_| Errno::ESRCH)?;
    // `Num RefCount Protocol Flags Type St Inode [Path]`
    let row: Vec<&str> = table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(6) == Some(&inode))
        .ok_or_else(|| Refused::Policy(Errno::EACCES, "a socket that is not a unix one".into()))?;
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
    let kind = match row.get(4).copied() {
        Some("0001") => SockType::Stream,
        Some("0005") => SockType::SeqPacket,
        Some("0002") => SockType::Datagram,
        _ => return Err(Errno::EOPNOTSUPP.into()),
    };
    match (row.get(5).copied(), row.get(7)) {
        (Some("01"), None) => {}
        (Some("01"), Some(_)) => return Err(Errno::EOPNOTSUPP.into()),
        _ => return Err(Errno::EISCONN.into()),
    }
    let flags = super::fd_flags(tid, fd)?;
    let mut made = SockFlag::SOCK_CLOEXEC;
    if flags & libc::O_NONBLOCK != 0 {
        made |= SockFlag::SOCK_NONBLOCK;
    }
    let fresh = socket(AddressFamily::Unix, kind, made, None)?;
    Ok((fresh, Some((fd, flags & libc::O_CLOEXEC != 0))))
}
