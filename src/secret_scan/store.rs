//! The scan's cache: one file per root in `/tmp/sandgate-UID/` (`private_temp`),
//! named by a hash of what the scan depends on (format, scope, root, skipped trees, caller).
//!
//! The directory is the caller's, 0700, reached with no link on the way; inside every
//! sandbox `/tmp` is private, so no sandboxed process can write a cache that a later call
//! trusts. A cache file is used only when it is a regular file of the caller's, private
//! (mode 0600), with a single link, and parses completely; otherwise the scan is made anew.
//! It is written to a fresh file beside it and renamed into place, so a reader never sees
//! half of one, and two calls at once each leave a whole file.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use sha2::{Digest, Sha256};

use super::{Caller, Node, Root, Snapshot, Source, Watched, MAX_DEPTH, MAX_ENTRIES};

/// Bumped whenever the format or the scan's rules change: an older file is then ignored.
const FORMAT: &[u8] = b"sandgate-hidden-scan 3\n";
/// A file larger than this is not one sandgate wrote.
const MAX_BYTES: u64 = 16 << 20;

/// The cache file's name for `root` as `caller` scans it.
pub fn name(root: &Root, caller: &Caller) -> String {
    let mut hash = Sha256::new();
    hash.update(FORMAT);
    hash.update([root.scope as u8]);
    hash.update(caller.uid.to_le_bytes());
    for group in &caller.groups {
        hash.update(group.to_le_bytes());
    }
    for path in std::iter::once(&root.path)
        .chain(&root.skip)
        .chain(&root.xdg)
    {
        hash.update((path.as_os_str().len() as u64).to_le_bytes());
        hash.update(path.as_os_str().as_bytes());
    }
    let digest = hash.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("hidden-scan-{hex}")
}

/// Where the cache of `root` lies (whether or not it exists).
pub fn path(root: &Root, caller: &Caller) -> PathBuf {
    crate::private_temp::base().join(name(root, caller))
}

/// The cached snapshot of `root`, when there is a usable one.
pub fn load(root: &Root, caller: &Caller) -> Option<Snapshot> {
    let base = crate::private_temp::open_base(false).ok()??;
    let fd = nix::fcntl::openat(
        &base.fd,
        name(root, caller).as_str(),
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let st = nix::sys::stat::fstat(&fd).ok()?;
    let private = st.st_mode & libc::S_IFMT == libc::S_IFREG
        && st.st_uid == caller.uid
        && st.st_mode & 0o077 == 0
        && st.st_nlink == 1
        && u64::try_from(st.st_size).is_ok_and(|n| n <= MAX_BYTES);
    if !private {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    decode(&bytes, root)
}

/// Writes `snapshot` as the cache of its root; a failure only costs the next call a scan.
pub fn save(snapshot: &Snapshot, caller: &Caller) {
    let Ok(Some(base)) = crate::private_temp::open_base(true) else {
        return;
    };
    let name = name(&snapshot.root, caller);
    let temp = format!(".{name}.{}", std::process::id());
    let written = nix::fcntl::openat(
        &base.fd,
        temp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(std::io::Error::from)
    .and_then(|fd| std::fs::File::from(fd).write_all(&encode(snapshot)));
    let renamed = written.and_then(|()| {
        Ok(nix::fcntl::renameat(
            base.fd.as_fd(),
            temp.as_str(),
            base.fd.as_fd(),
            name.as_str(),
        )?)
    });
    if renamed.is_err() {
        let _ = nix::unistd::unlinkat(
            &base.fd,
            temp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
}

/// The bytes of `snapshot`: the format line, the walk's time and flags, then the tree in
/// preorder.
pub fn encode(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = FORMAT.to_vec();
    out.extend(snapshot.walked.to_le_bytes());
    out.push(u8::from(snapshot.truncated));
    encode_node(&snapshot.tree, &mut out);
    out
}

fn encode_node(node: &Node, out: &mut Vec<u8>) {
    bytes(out, node.name.as_bytes());
    for n in [node.dev, node.ino] {
        out.extend(n.to_le_bytes());
    }
    for t in [node.mtime, node.ctime] {
        out.extend(t.to_le_bytes());
    }
    out.extend(node.files.to_le_bytes());
    out.push(u8::from(node.closed));
    out.push(u8::from(node.unread));
    for names in [&node.secret, &node.public, &node.closed_below] {
        count(out, names.len());
        for name in names {
            bytes(out, name.as_bytes());
        }
    }
    count(out, node.watched.len());
    for w in &node.watched {
        bytes(out, w.name.as_bytes());
        out.extend(w.ino.to_le_bytes());
        out.extend(w.ctime.to_le_bytes());
    }
    count(out, node.children.len());
    for child in &node.children {
        encode_node(child, out);
    }
}

fn count(out: &mut Vec<u8>, n: usize) {
    out.extend(u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    count(out, b.len());
    out.extend(b);
}

/// Parses a cache of `root`; `None` for anything but a complete, well-formed one.
pub fn decode(data: &[u8], root: &Root) -> Option<Snapshot> {
    let mut r = Reader {
        data: data.strip_prefix(FORMAT)?,
        nodes: 0,
    };
    let walked = r.i64()?;
    let truncated = r.u8()? != 0;
    let tree = r.node(0)?;
    if !r.data.is_empty() || !tree.name.is_empty() {
        return None;
    }
    Some(Snapshot {
        root: root.clone(),
        walked,
        truncated,
        tree,
        source: Source::Cached,
    })
}

/// A cursor over cache bytes; every read is checked.
struct Reader<'a> {
    data: &'a [u8],
    nodes: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.data.len() < n {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A count of items of at least `size` bytes each, which cannot exceed what is left.
    fn count(&mut self, size: usize) -> Option<usize> {
        let n = usize::try_from(self.u32()?).ok()?;
        (n <= self.data.len() / size).then_some(n)
    }

    fn name(&mut self) -> Option<OsString> {
        let n = self.count(1)?;
        let name = self.take(n)?.to_vec();
        // A name is one path component: never empty of meaning, never a way out.
        if name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".." {
            return None;
        }
        Some(OsString::from_vec(name))
    }

    /// A list of non-empty names.
    fn names(&mut self) -> Option<Vec<OsString>> {
        (0..self.count(4)?)
            .map(|_| self.name().filter(|n| !n.is_empty()))
            .collect()
    }

    fn node(&mut self, depth: usize) -> Option<Node> {
        self.nodes += 1;
        // Every node but the root is an entry of a directory read: directories the
        // bounds left unread are recorded too.
        if depth > MAX_DEPTH || self.nodes > MAX_ENTRIES + 1 {
            return None;
        }
        let name = self.name()?;
        if depth > 0 && name.is_empty() {
            return None;
        }
        let (dev, ino) = (self.u64()?, self.u64()?);
        let (mtime, ctime) = (self.i64()?, self.i64()?);
        let files = self.u32()?;
        let closed = self.u8()? != 0;
        let unread = self.u8()? != 0;
        let secret = self.names()?;
        let public = self.names()?;
        let closed_below = self.names()?;
        let watched = (0..self.count(4)?)
            .map(|_| {
                Some(Watched {
                    name: self.name().filter(|n| !n.is_empty())?,
                    ino: self.u64()?,
                    ctime: self.i64()?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let children = (0..self.count(4)?)
            .map(|_| self.node(depth + 1))
            .collect::<Option<Vec<_>>>()?;
        Some(Node {
            name,
            dev,
            ino,
            mtime,
            ctime,
            files,
            secret,
            public,
            closed_below,
            unread,
            closed,
            watched,
            children,
        })
    }
}
