//! The supervisor: one thread in sandgate that answers the seccomp notifications of the
//! sandboxed process tree.
//!
//! Today it mediates `connect` (DESIGN §3): it copies the address out of the caller's
//! memory, resolves a pathname in the caller's own view of the filesystem, checks that the
//! socket lies beneath a writable root, and then connects a duplicate of the caller's
//! socket (`pidfd_getfd`) *itself*, through the inode it resolved. It never answers
//! CONTINUE: the kernel would re-read an address the caller can still rewrite.
//!
//! If the supervisor is gone, the kernel fails pending and future notified calls with
//! ENOSYS, so its death refuses connects rather than allowing them.

mod resolve;

use std::collections::HashSet;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{connect, UnixAddr};
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use crate::sys;
use resolve::{Creds, Inode};

/// `sizeof(struct sockaddr_un)`.
const SOCKADDR_UN_LEN: usize = std::mem::size_of::<libc::sockaddr_un>();

/// Starts the supervisor thread for `listener`. `writable_roots` are paths in the
/// sandbox's own view; they are identified by inode through `child`'s root, once, now —
/// the child has finished building its mount namespace by the time sandgate gets here.
///
/// # Errors
/// The thread could not be started.
pub fn spawn(listener: OwnedFd, child: Pid, writable_roots: Vec<PathBuf>) -> io::Result<()> {
    let roots: HashSet<Inode> = writable_roots
        .iter()
        .filter_map(|root| {
            let inside =
                Path::new(&format!("/proc/{child}/root")).join(root.strip_prefix("/").ok()?);
            let st = nix::sys::stat::stat(&inside).ok()?;
            Some((st.st_dev, st.st_ino))
        })
        .collect();
    std::thread::Builder::new()
        .name("sandgate-supervisor".into())
        .spawn(move || serve(&listener, &roots))
        .map(drop)
}

/// Answers notifications until every sandboxed process is gone.
fn serve(listener: &OwnedFd, roots: &HashSet<Inode>) {
    loop {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Err(_) => return,
            Ok(_) => {}
        }
        let revents = fds[0].revents().unwrap_or(PollFlags::POLLHUP);
        if !revents.contains(PollFlags::POLLIN) {
            // POLLHUP: no process is left under the filter.
            return;
        }
        let notif = match sys::notif_recv(listener.as_fd()) {
            Ok(n) => n,
            // ENOENT: the caller died or was interrupted before we received it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => continue,
            Err(_) => return,
        };
        let result = match i64::from(notif.data.nr) {
            libc::SYS_connect => mediate_connect(listener, &notif, roots).map(|()| 0),
            // The gate notifies nothing else; refuse anything unexpected.
            _ => Err(Errno::ENOSYS),
        };
        // ENOENT here: the caller went away meanwhile; nothing to answer.
        let _ = sys::notif_respond(listener.as_fd(), notif.id, result.map_err(|e| e as i32));
    }
}

/// Copies `len` bytes at `addr` out of the calling task.
fn read_memory(pid: Pid, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; len];
    let remote = [RemoteIoVec {
        base: addr as usize,
        len,
    }];
    let n = process_vm_readv(pid, &mut [IoSliceMut::new(&mut buf)], &remote)?;
    if n != len {
        return Err(Errno::EFAULT);
    }
    Ok(buf)
}

/// Opens a pidfd for the calling thread's process.
fn pidfd_for(tid: Pid) -> Result<OwnedFd, Errno> {
    match sys::pidfd_open(tid.as_raw(), true) {
        Ok(fd) => Ok(fd),
        Err(_) => {
            // Kernels before 6.9 have no thread pidfds: use the thread group leader.
            let status =
                std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| Errno::ESRCH)?;
            let tgid = status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
                .ok_or(Errno::ESRCH)?;
            sys::pidfd_open(tgid, false)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::ESRCH)))
        }
    }
}

/// Reads the calling thread's filesystem credentials.
fn creds_of(tid: Pid) -> Result<Creds, Errno> {
    let status =
        std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| Errno::ESRCH)?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::split_whitespace)
    };
    // "Uid:\treal\teffective\tsaved\tfilesystem"
    let fs_id = |name| {
        field(name)
            .and_then(|mut f| f.nth(3))
            .and_then(|v| v.parse().ok())
    };
    Ok(Creds {
        fsuid: fs_id("Uid:").ok_or(Errno::ESRCH)?,
        fsgid: fs_id("Gid:").ok_or(Errno::ESRCH)?,
        groups: field("Groups:")
            .map(|f| f.filter_map(|g| g.parse().ok()).collect())
            .unwrap_or_default(),
    })
}

/// Decides and performs one `connect(fd, addr, len)` for the sandboxed caller.
fn mediate_connect(
    listener: &OwnedFd,
    notif: &libc::seccomp_notif,
    roots: &HashSet<Inode>,
) -> Result<(), Errno> {
    let tid = Pid::from_raw(notif.pid as libc::pid_t);
    let [fd, addr, len, ..] = notif.data.args;
    let fd = i32::try_from(fd).map_err(|_| Errno::EBADF)?;
    let len = usize::try_from(len).map_err(|_| Errno::EINVAL)?;
    if !(2..=SOCKADDR_UN_LEN).contains(&len) {
        return Err(Errno::EINVAL);
    }
    let bytes = read_memory(tid, addr, len)?;
    let pidfd = pidfd_for(tid)?;
    // The task behind `notif.pid` may have died and its number been reused between the
    // notification and now; once this check passes, the memory read and the pidfd both
    // belong to the caller.
    if !sys::notif_id_valid(listener.as_fd(), notif.id) {
        return Err(Errno::EINTR);
    }
    let socket = sys::pidfd_getfd(pidfd.as_fd(), fd)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EBADF)))?;
    match sys::socket_kind(std::os::fd::AsRawFd::as_raw_fd(&socket)) {
        Some((libc::AF_UNIX, _)) => {}
        // Only inherited IP sockets get here: restricted profiles have no network.
        Some(_) => return Err(Errno::EACCES),
        None => return Err(Errno::ENOTSOCK),
    }
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    if i32::from(family) != libc::AF_UNIX {
        return Err(Errno::EINVAL);
    }
    let path = &bytes[2..];
    if path.is_empty() {
        return Err(Errno::EINVAL);
    }
    if path[0] == 0 {
        // Abstract address: sandgate cannot tell a socket made inside the sandbox from one
        // outside, and connecting on the caller's behalf would escape landlock's scoping.
        return Err(Errno::EPERM);
    }
    let path = path.split(|b| *b == 0).next().unwrap_or_default();
    let root = sys::open_path(&proc_path(tid, "root"), libc::O_DIRECTORY).map_err(io_errno)?;
    let cwd = sys::open_path(&proc_path(tid, "cwd"), libc::O_DIRECTORY).map_err(io_errno)?;
    let creds = creds_of(tid)?;
    let resolved = resolve::resolve(&root, &cwd, path, &creds)?;
    if !resolve::is_beneath(&resolved.dir, &root, roots)? {
        return Err(Errno::EACCES);
    }
    let via = format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&resolved.socket)
    );
    let target = UnixAddr::new(via.as_str())?;
    connect(std::os::fd::AsRawFd::as_raw_fd(&socket), &target)
}

fn proc_path(tid: Pid, what: &str) -> std::ffi::CString {
    std::ffi::CString::new(format!("/proc/{tid}/{what}")).unwrap_or_default()
}

fn io_errno(e: io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EACCES))
}
