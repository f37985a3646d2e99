//! Checks on the paths a restricted call is given: that a writable root cannot be
//! redirected by a symlink planted in an earlier call, and which paths the private temp
//! would hide.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The host directories every restricted sandbox replaces with private, writable ones.
pub const SHARED_TEMPS: [&str; 2] = ["/tmp", "/dev/shm"];

/// Every host directory a restricted sandbox covers: the shared temps, the terminals'
/// (`/dev/pts`, where each of the user's other terminals could be opened and read — no
/// job control guards a terminal that is not one's controlling terminal), and `/dev`
/// itself, whose other devices (the consoles and serial lines a login types on, the
/// console's screen memory, input devices, disks) are the host's. What must stay visible
/// beneath them (the caller's own terminal, [`DEVICES`], a workspace under `/tmp`) is put
/// back at its own path. A path counts as beneath the first of them that holds it.
pub const COVERED: [&str; 4] = ["/tmp", "/dev/shm", "/dev/pts", "/dev"];

/// The devices every restricted sandbox keeps, where the host has them: the ones any
/// program may expect, none of which reaches anything of the host's.
pub const DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// Links followed before giving up with ELOOP, as the kernel does.
const MAX_LINKS: usize = 40;

/// A path resolved the way the kernel would, with every symlink followed on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The canonical path.
    pub path: PathBuf,
    /// Each symlink followed, as its own (canonical-parent) path.
    pub links: Vec<PathBuf>,
}

impl Resolved {
    /// Returns the first link followed that lies inside one of `roots`. A sandboxed
    /// command may have planted it there in an earlier call to point a later call's
    /// writable root at, say, `~/.ssh`; nothing tells such a link from one the user made,
    /// so the root is refused either way.
    pub fn planted_in(&self, roots: &BTreeSet<PathBuf>) -> Option<&PathBuf> {
        self.links.iter().find(|link| {
            let parent = link.parent().unwrap_or(Path::new("/"));
            roots.iter().any(|r| parent.starts_with(r))
        })
    }
}

/// Resolves `given` (absolute) like `canonicalize`, but in one walk that also records
/// every symlink it follows: deciding on the links and resolving the path in two walks
/// would let a process swap a directory for a link between them.
///
/// # Errors
/// A missing component, a loop (ELOOP), or a non-directory on the way.
pub fn resolve(given: &Path) -> std::io::Result<Resolved> {
    let mut resolved = PathBuf::from("/");
    let mut links = Vec::new();
    let mut pending: Vec<std::ffi::OsString> = given
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    while let Some(name) = pending.pop() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&name);
        let meta = next.symlink_metadata()?;
        if !meta.file_type().is_symlink() {
            resolved = next;
            continue;
        }
        if links.len() >= MAX_LINKS {
            return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
        }
        let target = std::fs::read_link(&next)?;
        links.push(next);
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        for c in target.components().rev() {
            match c {
                Component::Normal(n) => pending.push(n.to_owned()),
                Component::ParentDir => pending.push("..".into()),
                _ => {}
            }
        }
    }
    Ok(Resolved {
        path: resolved,
        links,
    })
}

/// Returns true when one of the [`COVERED`] directories would hide `path`.
pub fn hidden_by_temp(path: &Path) -> bool {
    COVERED
        .iter()
        .any(|t| path.starts_with(t) && path != Path::new(t))
}

/// Keeps only the paths that no other path of the set lies beneath. What is kept visible
/// on top of the private temp is bound with everything beneath it, so a nested path is
/// already there; making its mount point too would walk into the host's directory bound
/// above it (and remove what is in the way: the host's own files).
pub fn outermost<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> BTreeSet<PathBuf> {
    let all: BTreeSet<&PathBuf> = paths.collect();
    all.iter()
        .filter(|p| !all.iter().any(|q| q != *p && p.starts_with(q)))
        .map(|p| (*p).clone())
        .collect()
}

/// Returns true when `path` is one of the shared temp directories themselves: as a
/// workspace or writable root it would hand the host's sockets and shared memory (and
/// every workspace's private temp) to the sandbox.
pub fn is_shared_temp(path: &Path) -> bool {
    SHARED_TEMPS.iter().any(|t| path == Path::new(t))
}

/// Returns true when `path` is a user's sandgate state directory in the shared temp,
/// `/tmp/sandgate-UID`: it holds every workspace's private temp and cache layers and the
/// hidden-files scan's cache, which later calls trust because no sandbox can write them.
pub fn is_sandgate_state(path: &Path) -> bool {
    path.parent() == Some(Path::new("/tmp"))
        && path.file_name().is_some_and(|name| {
            name.to_str()
                .and_then(|n| n.strip_prefix("sandgate-"))
                .is_some_and(|uid| !uid.is_empty() && uid.bytes().all(|b| b.is_ascii_digit()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_inside_a_root_is_found_and_one_outside_is_not() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let base = std::fs::canonicalize(dir.path())?;
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join("real"))?;
        std::fs::create_dir_all(base.join("elsewhere"))?;
        std::os::unix::fs::symlink(base.join("elsewhere"), ws.join("planted"))?;
        std::os::unix::fs::symlink("ws", base.join("ws-link"))?;
        let roots = BTreeSet::from([ws.clone()]);
        let planted = resolve(&ws.join("planted"))?;
        assert_eq!(planted.path, base.join("elsewhere"));
        assert_eq!(planted.planted_in(&roots), Some(&ws.join("planted")));
        let dotdot = resolve(&ws.join("real/../planted"))?;
        assert_eq!(dotdot.planted_in(&roots), Some(&ws.join("planted")));
        assert_eq!(resolve(&ws.join("real"))?.planted_in(&roots), None);
        // A link outside every root (the user's own) is followed, then checked beyond.
        let users = resolve(&base.join("ws-link/real"))?;
        assert_eq!(users.path, ws.join("real"));
        assert_eq!(users.planted_in(&roots), None);
        let through = resolve(&base.join("ws-link/planted"))?;
        assert_eq!(through.planted_in(&roots), Some(&ws.join("planted")));
        assert_eq!(
            through.path,
            std::fs::canonicalize(base.join("ws-link/planted"))?
        );
        std::os::unix::fs::symlink("loop", base.join("loop"))?;
        assert!(resolve(&base.join("loop")).is_err());
        Ok(())
    }

    #[test]
    fn what_the_private_temp_hides() {
        assert!(hidden_by_temp(Path::new("/tmp/ws")));
        assert!(hidden_by_temp(Path::new("/dev/shm/x")));
        assert!(!hidden_by_temp(Path::new("/tmp")));
        assert!(!hidden_by_temp(Path::new("/tmpx/ws")));
        assert!(is_shared_temp(Path::new("/tmp")));
        let paths = ["/tmp/a", "/tmp/a/s", "/tmp/b", "/tmp/ab"].map(PathBuf::from);
        assert_eq!(
            outermost(paths.iter()),
            BTreeSet::from(["/tmp/a", "/tmp/b", "/tmp/ab"].map(PathBuf::from))
        );
        assert!(!is_shared_temp(Path::new("/tmp/ws")));
        assert!(is_sandgate_state(Path::new("/tmp/sandgate-0")));
        assert!(is_sandgate_state(Path::new("/tmp/sandgate-65534")));
        assert!(!is_sandgate_state(Path::new("/tmp/sandgate-0/ws-1234")));
        assert!(!is_sandgate_state(Path::new("/tmp/sandgate-x")));
        assert!(!is_sandgate_state(Path::new("/var/tmp/sandgate-0")));
    }
}
