//! Removing a tree a sandbox could write into (a private temp, cache layers), while a
//! process an earlier call left behind may still be changing it.
//!
//! Everything goes through file descriptors: each directory is opened beneath its parent
//! with `O_NOFOLLOW`, and names are unlinked relative to it, so a symlink anywhere in the
//! tree — also one swapped in while this runs — is removed as a link and never followed,
//! and nothing outside the tree is touched. overlayfs leaves its work directory with mode
//! 000, which even its owner cannot list: such a directory is given back to its owner
//! (`fchmodat` without following a link) before it is opened. A tree deeper than
//! [`DEEPEST`] levels is not held open level by level: the too-deep directory is moved to
//! the top of the tree and emptied from there, so no depth exhausts the fds or the stack.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::fcntl::{openat, renameat2, OFlag, RenameFlags};
use nix::sys::stat::{fchmodat, FchmodatFlags, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// How many levels are held open at once.
const DEEPEST: usize = 32;

/// How often one name is retried when it keeps changing under us.
const ATTEMPTS: usize = 8;

/// Empties the directory `root` (a descriptor of it, readable) and everything beneath it;
/// the caller removes `root` itself.
///
/// # Errors
/// A removal that failed, or a name that kept changing through every attempt.
pub fn empty(root: BorrowedFd<'_>) -> io::Result<()> {
    let mut moved = 0u64;
    // Each pass empties the tree but for what it moved to the top: the next pass takes
    // those. A pass that moved nothing has emptied the tree.
    loop {
        let before = moved;
        empty_dir(root, root, 0, &mut moved)?;
        if moved == before {
            return Ok(());
        }
    }
}

fn empty_dir(
    root: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    depth: usize,
    moved: &mut u64,
) -> io::Result<()> {
    for name in names(dir)? {
        remove(root, dir, &name, depth, moved)?;
    }
    Ok(())
}

/// The names in `dir` (without `.` and `..`), read through a descriptor of its own (a
/// duplicate would share, and leave at the end, the position of every later listing).
fn names(dir: BorrowedFd<'_>) -> io::Result<Vec<CString>> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let listing = nix::dir::Dir::from_fd(openat(dir, ".", flags, Mode::empty())?)?;
    let mut names = Vec::new();
    for entry in listing {
        let name = entry?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    Ok(names)
}

/// Removes `name` in `parent`, whatever it is now.
fn remove(
    root: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    name: &CString,
    depth: usize,
    moved: &mut u64,
) -> io::Result<()> {
    for _ in 0..ATTEMPTS {
        match unlinkat(parent, name.as_c_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => return Ok(()),
            // A directory (EISDIR; EPERM from filesystems that say so).
            Err(Errno::EISDIR | Errno::EPERM) => {}
            Err(e) => return Err(e.into()),
        }
        if depth >= DEEPEST {
            move_to_top(root, parent, name, moved)?;
            return Ok(());
        }
        let dir = match open_dir(parent, name) {
            Ok(dir) => dir,
            Err(Errno::ENOENT) => return Ok(()),
            // Swapped for something else since the unlink: look again.
            Err(Errno::ENOTDIR | Errno::ELOOP | Errno::EACCES) => continue,
            Err(e) => return Err(e.into()),
        };
        empty_dir(root, dir.as_fd(), depth + 1, moved)?;
        match unlinkat(parent, name.as_c_str(), UnlinkatFlags::RemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => return Ok(()),
            // Refilled, or swapped, meanwhile: again.
            Err(Errno::ENOTEMPTY | Errno::ENOTDIR | Errno::EEXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other(format!(
        "{} keeps changing while it is removed (is a sandboxed process still running?)",
        OsStr::from_bytes(name.as_bytes()).to_string_lossy()
    )))
}

/// Opens the directory `name` in `parent` for listing, never through a link; one its
/// owner cannot read (overlayfs's work directory) is made the owner's first.
fn open_dir(parent: BorrowedFd<'_>, name: &CString) -> Result<OwnedFd, Errno> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match openat(parent, name.as_c_str(), flags, Mode::empty()) {
        Err(Errno::EACCES) => {
            fchmodat(
                parent,
                name.as_c_str(),
                Mode::S_IRWXU,
                FchmodatFlags::NoFollowSymlink,
            )?;
            openat(parent, name.as_c_str(), flags, Mode::empty())
        }
        opened => opened,
    }
}

/// Moves the directory `name` from deep in the tree to its top, under a name of its own.
fn move_to_top(
    root: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    name: &CString,
    moved: &mut u64,
) -> io::Result<()> {
    loop {
        *moved += 1;
        let to = CString::new(format!(".sandgate-deep-{moved}"))
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        match renameat2(
            parent,
            name.as_c_str(),
            root,
            to.as_c_str(),
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) | Err(Errno::ENOENT) => return Ok(()),
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// A tree far deeper than the levels held open, whose deepest directory nobody may
    /// list (as overlayfs leaves its work directory), with links to a directory outside:
    /// it is emptied, and the link's target keeps its mode and its content.
    #[test]
    fn a_deep_locked_tree_with_links_out_is_emptied_and_nothing_outside_changes() {
        let base = std::env::temp_dir().join(format!("sandgate-remove-{}", std::process::id()));
        let (tree, outside) = (base.join("tree"), base.join("outside"));
        std::fs::create_dir_all(outside.join("kept")).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o555)).unwrap();
        let mut deep = tree.clone();
        for level in 0..(3 * DEEPEST + 5) {
            deep.push(format!("level-{level}"));
            std::fs::create_dir_all(&deep).unwrap();
            std::os::unix::fs::symlink(&outside, deep.join("out")).unwrap();
        }
        std::fs::write(deep.join("file"), "x").unwrap();
        std::fs::set_permissions(&deep, std::fs::Permissions::from_mode(0o000)).unwrap();
        let root = std::fs::File::open(&tree).unwrap();

        let emptied = empty(root.as_fd());

        let left: Vec<_> = std::fs::read_dir(&tree)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        let outside_mode = mode(&outside);
        let kept = outside.join("kept").exists();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o755)).unwrap();
        let _ = std::fs::remove_dir_all(&base);
        assert!(emptied.is_ok(), "{emptied:?}");
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(outside_mode, 0o555);
        assert!(kept);
    }
}
