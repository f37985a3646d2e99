//! Opening a canonical path only as the object it named when it was resolved: no
//! component may be a symlink, so nothing a process swapped in since (one an earlier call
//! left running) is followed.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

/// Opens a canonical `path` (`O_PATH`) only if no component of it is a symlink: it then
/// opens as the object it named when it was resolved, not whatever a link swapped in since
/// (by a process an earlier call left running) points to.
///
/// # Errors
/// `ELOOP` when a component is a symlink now; any other open failure.
pub fn open(path: &Path) -> io::Result<OwnedFd> {
    use nix::fcntl::{openat, openat2, OFlag, OpenHow, ResolveFlag, AT_FDCWD};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    match openat2(AT_FDCWD, path, how) {
        // Inside a sandgate sandbox (a nested call) openat2 is refused: the same, by hand,
        // one component at a time, none of them followed.
        Err(nix::errno::Errno::ENOSYS) => {
            let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let mut cur = openat(AT_FDCWD, "/", flags, nix::sys::stat::Mode::empty())?;
            for part in path.iter().skip(1) {
                cur = openat(&cur, part, flags, nix::sys::stat::Mode::empty())?;
                if nix::sys::stat::fstat(&cur)?.st_mode & libc::S_IFMT == libc::S_IFLNK {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP));
                }
            }
            Ok(cur)
        }
        other => Ok(other?),
    }
}
