//! Checks on the paths a restricted call is given: that a writable root cannot be
//! redirected by a symlink planted in an earlier call, and which paths the private temp
//! would hide.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The host directories every restricted sandbox replaces with private ones.
pub const SHARED_TEMPS: [&str; 2] = ["/tmp", "/dev/shm"];

/// Returns the first symlink on the way to `given` (absolute, as the user wrote it) that
/// lies inside one of `roots`. A sandboxed command may have planted it there in an
/// earlier call to point a later call's writable root at, say, `~/.ssh`; nothing tells
/// such a link from one the user made, so the root is refused either way.
pub fn planted_symlink(given: &Path, roots: &BTreeSet<PathBuf>) -> Option<PathBuf> {
    let mut resolved = PathBuf::from("/");
    for part in given.components() {
        match part {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                let next = resolved.join(name);
                let is_link = next.symlink_metadata().ok()?.file_type().is_symlink();
                if is_link {
                    if roots.iter().any(|r| resolved.starts_with(r)) {
                        return Some(next);
                    }
                    resolved = std::fs::canonicalize(&next).ok()?;
                } else {
                    resolved = next;
                }
            }
        }
    }
    None
}

/// Returns true when the private `/tmp` or `/dev/shm` would cover `path`.
pub fn hidden_by_temp(path: &Path) -> bool {
    SHARED_TEMPS
        .iter()
        .any(|t| path.starts_with(t) && path != Path::new(t))
}

/// Returns true when `path` is one of the shared temp directories themselves: as a
/// workspace or writable root it would hand the host's sockets and shared memory (and
/// every workspace's private temp) to the sandbox.
pub fn is_shared_temp(path: &Path) -> bool {
    SHARED_TEMPS.iter().any(|t| path == Path::new(t))
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
        std::os::unix::fs::symlink(&ws, base.join("ws-link"))?;
        let roots = BTreeSet::from([ws.clone()]);
        assert_eq!(
            planted_symlink(&ws.join("planted"), &roots),
            Some(ws.join("planted"))
        );
        assert_eq!(
            planted_symlink(&ws.join("real/../planted"), &roots),
            Some(ws.join("planted"))
        );
        assert_eq!(planted_symlink(&ws.join("real"), &roots), None);
        // A link outside every root (the user's own) is followed, then checked beyond.
        assert_eq!(planted_symlink(&base.join("ws-link/real"), &roots), None);
        assert_eq!(
            planted_symlink(&base.join("ws-link/planted"), &roots),
            Some(ws.join("planted"))
        );
        Ok(())
    }

    #[test]
    fn what_the_private_temp_hides() {
        assert!(hidden_by_temp(Path::new("/tmp/ws")));
        assert!(hidden_by_temp(Path::new("/dev/shm/x")));
        assert!(!hidden_by_temp(Path::new("/tmp")));
        assert!(!hidden_by_temp(Path::new("/tmpx/ws")));
        assert!(is_shared_temp(Path::new("/tmp")));
        assert!(!is_shared_temp(Path::new("/tmp/ws")));
    }
}
