//! The mount-namespace layer: a private view of the filesystem in which everything is
//! mounted read-only except the writable roots, protected paths are read-only bind mounts
//! inside them, and `read-only` gets an empty, private `/tmp`.
//!
//! Landlock cannot carve a read-only hole in a writable tree, and it does not govern
//! `chmod`, `chown`, `utimes` or extended attributes at all; a read-only mount refuses all
//! of those with `EROFS`, which is why every restricted profile gets this layer.
//!
//! `MountPlan::build` runs in sandgate (it allocates); `MountPlan::apply` runs in the forked
//! child, in this order:
//! 1. `unshare` a mount namespace (with a user namespace when not root) and map our own
//!    uid/gid into it, so nothing outside changes and the child needs no privilege;
//! 2. make every mount private, so nothing propagates back to the host;
//! 3. bind each writable root (and each pinned path) onto itself, making it its own mount;
//! 4. mark the whole tree read-only, recursively;
//! 5. re-open the writable binds for writing (only those whose host mount was writable —
//!    sandgate never turns a read-only host mount writable);
//! 6. bind each protected path onto itself, read-only (after 5, so it stays read-only);
//! 7. mount the private `/tmp` last, on top of everything;
//! 8. re-enter the working directory by path: the process's cwd still points into the
//!    mount it was on before the binds were stacked on top (the read-only one).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};

use crate::policy::Restrictions;
use crate::sys;

/// One writable bind mount.
#[derive(Debug)]
struct RwBind {
    path: CString,
    /// False when the host mount is already read-only: then it stays read-only.
    reopen: bool,
}

/// Everything the child needs to build its mount namespace, prepared before forking.
#[derive(Debug)]
pub struct MountPlan {
    /// `Some((uid_map, gid_map))` when a user namespace is needed (sandgate is not root).
    id_maps: Option<(Vec<u8>, Vec<u8>)>,
    rw_binds: Vec<RwBind>,
    ro_binds: Vec<CString>,
    private_tmp: bool,
    cwd: Option<CString>,
}

/// Returns the uid/gid maps for a user namespace, or `None` when sandgate runs as root
/// and needs none.
fn id_maps() -> Option<(Vec<u8>, Vec<u8>)> {
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    (!uid.is_root()).then(|| {
        (
            format!("{uid} {uid} 1\n").into_bytes(),
            format!("{gid} {gid} 1\n").into_bytes(),
        )
    })
}

fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

impl MountPlan {
    /// Prepares the mount steps for `r`.
    ///
    /// # Errors
    /// A path with an interior NUL byte cannot be mounted.
    pub fn build(r: &Restrictions, cwd: &Path) -> io::Result<MountPlan> {
        // Shallow paths first, so a nested root is bound on top of its parent's bind.
        let mut writable: Vec<&Path> = r
            .writable_roots
            .iter()
            .chain(r.pinned.iter())
            .map(|p| p.as_path())
            .collect();
        writable.sort_by_key(|p| p.components().count());
        let rw_binds = writable
            .into_iter()
            .map(|p| {
                let read_only_host = nix::sys::statvfs::statvfs(p)
                    .map(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
                    .unwrap_or(true);
                Ok(RwBind {
                    path: cstring(p)?,
                    reopen: !read_only_host,
                })
            })
            .collect::<io::Result<_>>()?;
        let ro_binds = r
            .protected
            .iter()
            .map(|p| cstring(p))
            .collect::<io::Result<_>>()?;
        Ok(MountPlan {
            id_maps: id_maps(),
            rw_binds,
            ro_binds,
            private_tmp: r.private_tmp,
            cwd: Some(cstring(cwd)?),
        })
    }

    /// Builds the private mount namespace in the calling (child) process; see the module
    /// docs for the order. Runs after `fork` in a single-threaded child.
    pub fn apply(&self) -> io::Result<()> {
        let mut flags = CloneFlags::CLONE_NEWNS;
        if self.id_maps.is_some() {
            flags |= CloneFlags::CLONE_NEWUSER;
        }
        unshare(flags)?;
        if let Some((uid_map, gid_map)) = &self.id_maps {
            sys::write_file(c"/proc/self/setgroups", b"deny")?;
            sys::write_file(c"/proc/self/uid_map", uid_map)?;
            sys::write_file(c"/proc/self/gid_map", gid_map)?;
        }
        let none = None::<&std::ffi::CStr>;
        mount(
            none,
            c"/",
            none,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            none,
        )?;
        for bind in &self.rw_binds {
            let path = bind.path.as_c_str();
            mount(
                Some(path),
                path,
                none,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                none,
            )?;
        }
        sys::mount_setattr(c"/", true, libc::MOUNT_ATTR_RDONLY, 0)?;
        for bind in self.rw_binds.iter().filter(|b| b.reopen) {
            sys::mount_setattr(&bind.path, false, 0, libc::MOUNT_ATTR_RDONLY)?;
        }
        for path in &self.ro_binds {
            mount(
                Some(path.as_c_str()),
                path.as_c_str(),
                none,
                MsFlags::MS_BIND,
                none,
            )?;
            sys::mount_setattr(path, false, libc::MOUNT_ATTR_RDONLY, 0)?;
        }
        if self.private_tmp {
            mount(
                Some(c"tmpfs"),
                c"/tmp",
                Some(c"tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(c"mode=1777"),
            )?;
        }
        if let Some(cwd) = &self.cwd {
            // A cwd hidden by the private /tmp cannot be re-entered; the old one stays.
            let _ = nix::unistd::chdir(cwd.as_c_str());
        }
        Ok(())
    }

    /// Returns true when the plan mounts a private `/tmp`.
    pub fn private_tmp(&self) -> bool {
        self.private_tmp
    }
}

impl MountPlan {
    /// A plan with no binds: exercises exactly the namespace, id-map and read-only steps.
    pub fn probe() -> MountPlan {
        MountPlan {
            id_maps: id_maps(),
            rw_binds: vec![],
            ro_binds: vec![],
            private_tmp: false,
            cwd: None,
        }
    }
}
