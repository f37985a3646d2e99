//! What the seal rules need of a directory besides its name's class: whether it folds
//! case (then names are compared as it compares them).

use std::os::fd::{AsFd, BorrowedFd};

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;

use super::seal;
use crate::sys;

/// What the seal rules need of a directory: its own name's class, and whether it folds
/// case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    pub dir: seal::Dir,
    pub casefold: bool,
}

impl Named {
    /// Looks at the directory `dir` (any fd of it), named `name` by whoever reached it.
    pub fn of(dir: BorrowedFd<'_>, name: &[u8]) -> Named {
        // A filesystem that finds names without regard to case (FAT, exFAT, SMB, HFS+), or
        // a casefold directory on one that can (ext4, tmpfs). A directory that cannot be
        // opened for reading could fold case unseen: read it the strict way.
        let folding_filesystem = nix::sys::statfs::fstatfs(dir)
            .map_or(true, |fs| FOLDING.contains(&fs.filesystem_type().0));
        let casefold = folding_filesystem
            || openat(
                dir,
                ".",
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_or(true, |d| sys::is_casefolded(d.as_fd()));
        Named {
            dir: seal::dir(name),
            casefold,
        }
    }

    /// The class of `name` in this directory.
    ///
    /// # Errors
    /// See [`seal::name`].
    pub fn here(&self, name: &[u8]) -> Result<seal::Here, seal::Seal> {
        Ok(seal::Here {
            dir: self.dir,
            name: seal::name(name, self.casefold)?,
        })
    }
}

/// The filesystems that find a name whatever its case (`statfs` magic numbers): FAT,
/// exFAT, SMB (old and new) and HFS+.
const FOLDING: [libc::c_long; 6] = [
    0x4d44,
    0x2011_bab0,
    0xff53_4d42_u32 as libc::c_long,
    0xfe53_4d42_u32 as libc::c_long,
    0x517b,
    0x482b,
];
