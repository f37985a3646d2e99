//! Opening a name the supervisor resolved, for the caller: never through a symlink, never
//! as a controlling terminal, and for an existing file opened to write, only once the seal
//! rules allowed the very file the open got.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, Mode};

use super::place;
use super::seal::{self, Decision, Seal};

/// What [`open_checked`] came to.
pub enum Checked {
    Opened(OwnedFd),
    /// The file the open got is one the seal rules refuse to open for writing.
    Sealed(Seal),
}

/// Opens `name` in `dir` with the caller's `flags` (never following a symlink). For an
/// existing file opened to write (`existing`: where it is to the seal rules), the rules
/// are decided again on the file the open got — another process may have renamed
/// something else to the name since the supervisor looked (a second sandgate call in the
/// workspace has a supervisor of its own) — and it is truncated only once they allowed
/// it, so nothing they would refuse is changed.
pub fn open_checked(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: i32,
    mode: u32,
    existing: Option<seal::Here>,
) -> Result<Checked, Errno> {
    let Some(here) = existing else {
        return open_at(dir, name, flags, mode).map(Checked::Opened);
    };
    let file = open_at(dir, name, flags & !(libc::O_CREAT | libc::O_TRUNC), mode)?;
    let st = fstat(file.as_fd())?;
    if let Decision::Refuse(seal) = seal::write(here, place::kind_of(&st)) {
        return Ok(Checked::Sealed(seal));
    }
    if flags & libc::O_TRUNC != 0 {
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => return Err(Errno::EISDIR),
            libc::S_IFREG if flags & libc::O_ACCMODE == libc::O_RDONLY => {
                // O_RDONLY|O_TRUNC truncates in Linux: through a writable handle of the
                // same file.
                let via = format!("/proc/self/fd/{}", file.as_raw_fd());
                let writable = nix::fcntl::open(
                    via.as_str(),
                    OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )?;
                nix::unistd::ftruncate(&writable, 0)?;
            }
            libc::S_IFREG => nix::unistd::ftruncate(&file, 0)?,
            _ => {}
        }
    }
    Ok(Checked::Opened(file))
}

/// Opens `name` in `dir` with the caller's `flags`, never through a symlink and never
/// giving the caller a controlling terminal.
pub fn open_at(dir: BorrowedFd<'_>, name: &OsStr, flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlag::from_bits_truncate(flags | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC),
        Mode::from_bits_truncate(mode),
    )
}
