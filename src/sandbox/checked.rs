//! A path the child opens again after sandgate resolved it, with the object it must find
//! there: what was checked in sandgate is what the child mounts on, or nothing.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::sys::stat::fstat;

use crate::sys;

/// A file's identity: device and inode.
pub(super) type Identity = (u64, u64);

/// A path the child re-opens, and the object it must find there.
#[derive(Debug)]
pub(super) struct Checked {
    pub(super) path: CString,
    pub(super) id: Identity,
}

impl Checked {
    /// Opens `path` in sandgate with no symlink anywhere in it and records what it names.
    pub(super) fn record(path: &Path) -> io::Result<Checked> {
        let fd = crate::no_symlinks::open(path)?;
        Ok(Checked {
            path: cstring(path)?,
            id: identity(fd.as_fd())?,
        })
    }

    /// Re-opens the path in the child; fails with `ESTALE` when it names another object
    /// than the one recorded (it was swapped since).
    pub(super) fn open(&self) -> io::Result<OwnedFd> {
        let fd = sys::open_path(&self.path, 0)?;
        if identity(fd.as_fd())? != self.id {
            return Err(io::Error::from_raw_os_error(libc::ESTALE));
        }
        Ok(fd)
    }
}

pub(super) fn identity(fd: BorrowedFd<'_>) -> io::Result<Identity> {
    let st = fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// `path` as the C string the kernel takes; `EINVAL` for one with a NUL byte.
pub(super) fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}
