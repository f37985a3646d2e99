//! Renames and links the seal rules let happen only as copies (see `seal`): a file moved
//! to the name `config` (git's own `config.lock` → `config`), or into a `hooks` directory.
//!
//! The supervisor reads the source (a regular file, never through a symlink, at most
//! [`LIMIT`] bytes), checks it — as git configuration that may not add or change an entry
//! naming a program, against the file it replaces — writes what it checked into a fresh
//! file of its own in the destination directory, under a staging name the sandbox can
//! neither write nor rename ([`seal::STAGING_PREFIX`]), and renames that over the
//! destination; then it removes the source, as the rename would have. The file that lands
//! is one no sandboxed process ever held open, so nothing written to the source after the
//! check reaches it, and every sandbox's supervisor keeps its hands off the staging name
//! (two sandgate calls may share a workspace).

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{openat, renameat2, AtFlags, OFlag, RenameFlags};
use nix::sys::stat::{fchmod, fstat, fstatat, FileStat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::seal;
use crate::policy::gitconfig::{self, Refusal};

/// The largest file copied. Git configuration and hooks are small; a larger hook is
/// refused with EXDEV, so that `mv` copies it itself (through creates the supervisor
/// performs, which leave it without execute bits).
pub const LIMIT: usize = 1 << 20;

/// One end of a copy: a directory the supervisor may act in, and a name in it.
pub struct End<'a> {
    pub dir: BorrowedFd<'a>,
    pub name: &'a [u8],
}

/// What the copy is for.
#[derive(Clone, Copy, Debug)]
pub struct How {
    /// Check the new bytes as git configuration replacing the destination.
    pub validate: bool,
    /// Leave the copy without execute bits.
    pub no_exec: bool,
    /// Keep the source (a link) rather than remove it (a rename).
    pub keep_source: bool,
    /// Fail with EEXIST when the destination exists (a link, or `RENAME_NOREPLACE`).
    pub no_replace: bool,
}

/// Why a copy did not happen.
#[derive(Debug)]
pub enum Failed {
    /// The new configuration names a program.
    Refused(Refusal),
    /// The kernel's answer to one of the steps.
    Errno(Errno),
}

impl From<Errno> for Failed {
    fn from(e: Errno) -> Self {
        Failed::Errno(e)
    }
}

/// Copies `from` over `to` as `how` says.
///
/// # Errors
/// See [`Failed`]; EXDEV for a source over [`LIMIT`] (a hook: `mv` then copies it
/// itself), EFBIG for configuration over it.
pub fn copy_in(from: &End<'_>, to: &End<'_>, how: How) -> Result<(), Failed> {
    let (source, st) = open_regular(from)?;
    let bytes = read_bounded(&source, st.st_size).map_err(|e| match e {
        Errno::EFBIG if !how.validate => Errno::EXDEV,
        e => e,
    })?;
    let existing = match fstatat(to.dir, name(to.name), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Some(st),
        Err(Errno::ENOENT) => None,
        Err(e) => return Err(e.into()),
    };
    if how.no_replace && existing.is_some() {
        return Err(Errno::EEXIST.into());
    }
    if how.validate {
        let old = match existing {
            Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => {
                let (file, st) = open_regular(to)?;
                Some(read_bounded(&file, st.st_size)?)
            }
            _ => None,
        };
        // `config.worktree` (in any case, with a folding directory's trailing dots): git
        // reads it beside `config`, each judged with what the other says.
        let lower = to.name.to_ascii_lowercase();
        let file = if lower.starts_with(b"config.worktree") {
            gitconfig::File::Worktree
        } else {
            gitconfig::File::Config { worktree: None }
        };
        let beside = match file {
            gitconfig::File::Config { .. } => {
                let end = End {
                    dir: to.dir,
                    name: b"config.worktree",
                };
                match open_regular(&end) {
                    Ok((f, st)) => Some(read_bounded(&f, st.st_size)?),
                    Err(Errno::ENOENT) => None,
                    Err(e) => return Err(e.into()),
                }
            }
            gitconfig::File::Worktree => None,
        };
        let file = match file {
            gitconfig::File::Config { .. } => gitconfig::File::Config {
                worktree: beside.as_deref(),
            },
            worktree => worktree,
        };
        gitconfig::check_replacement_in(file, old.as_deref(), &bytes).map_err(Failed::Refused)?;
    }
    let mut mode = st.st_mode & 0o777;
    if how.no_exec {
        mode &= !0o111;
    }
    let staged = staging_name();
    let file = openat(
        to.dir,
        staged.as_c_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )?;
    let written = write_all(&file, &bytes)
        .and_then(|()| fchmod(file.as_fd(), Mode::from_bits_truncate(mode)));
    drop(file);
    let flags = if how.no_replace {
        RenameFlags::RENAME_NOREPLACE
    } else {
        RenameFlags::empty()
    };
    let landed =
        written.and_then(|()| renameat2(to.dir, staged.as_c_str(), to.dir, name(to.name), flags));
    if let Err(e) = landed {
        let _ = unlinkat(to.dir, staged.as_c_str(), UnlinkatFlags::NoRemoveDir);
        return Err(e.into());
    }
    if !how.keep_source {
        // Only the file that was copied: a supervisor of another sandbox may have put
        // something else at that name meanwhile.
        let still = fstatat(from.dir, name(from.name), AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|now| (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino));
        if still {
            let _ = unlinkat(from.dir, name(from.name), UnlinkatFlags::NoRemoveDir);
        }
    }
    Ok(())
}

fn name(bytes: &[u8]) -> &OsStr {
    OsStr::from_bytes(bytes)
}

/// Opens `end` for reading as a regular file, never through a symlink and never waiting
/// (a FIFO swapped in is refused, not waited on).
fn open_regular(end: &End<'_>) -> Result<(OwnedFd, FileStat), Errno> {
    let file = openat(
        end.dir,
        name(end.name),
        OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let st = fstat(file.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Errno::EPERM);
    }
    Ok((file, st))
}

/// Reads a whole file of (about) `size` bytes, failing with EFBIG past [`LIMIT`].
fn read_bounded(file: &OwnedFd, size: i64) -> Result<Vec<u8>, Errno> {
    if usize::try_from(size).map_or(true, |s| s > LIMIT) {
        return Err(Errno::EFBIG);
    }
    let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match nix::unistd::read(file, &mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() > LIMIT {
                    return Err(Errno::EFBIG);
                }
            }
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

fn write_all(file: &OwnedFd, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        match nix::unistd::write(file, bytes) {
            Ok(0) => return Err(Errno::EIO),
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A staging name no other copy uses: this process, a counter, and the time.
pub fn staging_name() -> CString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut name = seal::STAGING_PREFIX.to_vec();
    name.extend_from_slice(format!("{:x}.{n:x}.{nanos:x}", std::process::id()).as_bytes());
    // No NUL can be in it: the prefix and hex digits.
    CString::new(name).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(path: &std::path::Path) -> OwnedFd {
        match std::fs::File::open(path) {
            Ok(f) => f.into(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_checked_copy_replaces_the_destination_and_removes_the_source() -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir()?;
        let d = dir(tmp.path());
        std::fs::write(tmp.path().join("config"), "[core]\n\tfsmonitor = mine\n")?;
        std::fs::write(
            tmp.path().join("config.lock"),
            "[core]\n\tfsmonitor = mine\n[user]\n\temail = a@b\n",
        )?;
        std::fs::set_permissions(
            tmp.path().join("config.lock"),
            std::fs::Permissions::from_mode(0o640),
        )?;
        let end = |name: &'static str| End {
            dir: d.as_fd(),
            name: name.as_bytes(),
        };
        let how = How {
            validate: true,
            no_exec: false,
            keep_source: false,
            no_replace: false,
        };
        assert!(copy_in(&end("config.lock"), &end("config"), how).is_ok());
        assert!(!tmp.path().join("config.lock").exists());
        let meta = std::fs::metadata(tmp.path().join("config"))?;
        assert_eq!(meta.permissions().mode() & 0o777, 0o640);
        assert!(std::fs::read_to_string(tmp.path().join("config"))?.contains("email"));
        // A program added: refused, nothing changed, nothing staged left behind.
        std::fs::write(
            tmp.path().join("config.lock"),
            "[core]\n\tfsmonitor = evil\n",
        )?;
        assert!(matches!(
            copy_in(&end("config.lock"), &end("config"), how),
            Err(Failed::Refused(r)) if r.key() == Some("core.fsmonitor")
        ));
        assert!(std::fs::read_to_string(tmp.path().join("config"))?.contains("mine"));
        let names: Vec<_> = std::fs::read_dir(tmp.path())?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // A symlink is no source.
        std::os::unix::fs::symlink("config", tmp.path().join("l"))?;
        assert!(matches!(
            copy_in(&end("l"), &end("config"), how),
            Err(Failed::Errno(Errno::ELOOP))
        ));
        Ok(())
    }

    #[test]
    fn a_hook_copied_in_loses_its_execute_bits() -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir()?;
        std::fs::create_dir(tmp.path().join("hooks"))?;
        std::fs::write(tmp.path().join("x"), "#!/bin/sh\n")?;
        std::fs::set_permissions(tmp.path().join("x"), std::fs::Permissions::from_mode(0o755))?;
        let (top, hooks) = (dir(tmp.path()), dir(&tmp.path().join("hooks")));
        let how = How {
            validate: false,
            no_exec: true,
            keep_source: false,
            no_replace: true,
        };
        let from = End {
            dir: top.as_fd(),
            name: b"x",
        };
        let to = End {
            dir: hooks.as_fd(),
            name: b"pre-commit",
        };
        assert!(copy_in(&from, &to, how).is_ok());
        let meta = std::fs::metadata(tmp.path().join("hooks/pre-commit"))?;
        assert_eq!(meta.permissions().mode() & 0o777, 0o644);
        Ok(())
    }
}
