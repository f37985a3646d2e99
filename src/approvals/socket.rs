//! The server's unix socket: where it lies by default, that it is private to the caller,
//! and whether a server of the caller's listens there.

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Why the socket cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("neither XDG_RUNTIME_DIR nor HOME is set, so there is no default socket: give --socket PATH")]
    NoDefault,
    #[error("{path} is not private to this user: {why}")]
    NotPrivate { path: PathBuf, why: String },
    #[error("a server already listens at {0}: stop it first, or give another --socket")]
    Busy(PathBuf),
    #[error("no server listens at {path}: {why} (start one with `sandgate approvals serve`)")]
    NotListening { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `$XDG_RUNTIME_DIR/sandgate/approvals.sock`, else `$XDG_STATE_HOME` (default
/// `~/.local/state`) `/sandgate/approvals.sock`. Relative values are ignored, as the XDG
/// base directory rules say.
pub fn default_path() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = absolute("XDG_RUNTIME_DIR")
        .or_else(|| absolute("XDG_STATE_HOME"))
        .or_else(|| absolute("HOME").map(|home| home.join(".local/state")))?;
    Some(base.join("sandgate/approvals.sock"))
}

/// Returns `path` made absolute against the current directory.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// The caller's effective uid.
fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Checks that `path` is the caller's and shut to everybody else: a directory (or, with
/// `socket`, a socket) that is not a link, owned by the caller, with no group or other
/// permission bits.
fn check_private(path: &Path, socket: bool) -> Result<(), SocketError> {
    let not_private = |why: String| SocketError::NotPrivate {
        path: path.to_owned(),
        why,
    };
    let meta = std::fs::symlink_metadata(path).map_err(|source| SocketError::Io {
        path: path.to_owned(),
        source,
    })?;
    let kind = meta.file_type();
    if socket && !kind.is_socket() {
        return Err(not_private("it is not a socket".into()));
    }
    if !socket && !kind.is_dir() {
        return Err(not_private(
            "it is not a directory (a link is not taken)".into(),
        ));
    }
    if meta.uid() != me() {
        return Err(not_private(format!(
            "it belongs to uid {}, not to this user (uid {})",
            meta.uid(),
            me()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(not_private(format!(
            "its mode is {:o}: run `chmod go= {}`",
            meta.mode() & 0o7777,
            path.display()
        )));
    }
    Ok(())
}

/// The parent directory of the socket.
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("/"))
}

/// Where a listening socket was placed, to remove it again by [`Placed::remove`] unless
/// something else took its place meanwhile.
pub struct Placed {
    path: PathBuf,
    inode: (u64, u64),
}

impl Placed {
    pub fn remove(self) {
        let same =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.inode);
        if same {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates the socket's directory (0700) when missing, checks it is private, replaces a
/// stale socket of the caller's, and listens at `path` with mode 0600.
pub fn bind(path: &Path) -> Result<(UnixListener, Placed), SocketError> {
    let io = |source| SocketError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = parent(path);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    check_private(dir, false)?;
    match std::fs::symlink_metadata(path) {
        Ok(_) => {
            check_private(path, true)?;
            if UnixStream::connect(path).is_ok() {
                return Err(SocketError::Busy(path.to_owned()));
            }
            std::fs::remove_file(path).map_err(io)?;
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    // The socket is created 0600: no moment in which another user could connect.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = bound.map_err(io)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    let placed = Placed {
        path: path.to_owned(),
        inode: (meta.dev(), meta.ino()),
    };
    Ok((listener, placed))
}

/// Connects to the server at `path`, which must be private to the caller and served by a
/// process of the caller's outside any sandbox.
pub fn connect(path: &Path) -> Result<UnixStream, SocketError> {
    let not_listening = |why: String| SocketError::NotListening {
        path: path.to_owned(),
        why,
    };
    check_private(parent(path), false).map_err(|e| not_listening(e.to_string()))?;
    check_private(path, true).map_err(|e| not_listening(e.to_string()))?;
    let stream = UnixStream::connect(path).map_err(|e| not_listening(e.to_string()))?;
    crate::confinement::check_peer(&stream)
        .map_err(|why| not_listening(format!("its server: {why}")))?;
    Ok(stream)
}
