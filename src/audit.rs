//! The audit log: JSON lines, append-only, hash-chained. Every escalation
//! request leaves exactly one `approval/asked` and one `approval/decided` record with the
//! same id, whatever the outcome.
//!
//! Each line carries `prev`, the sha256 of the line before it (64 zeros for the first), so
//! an edited, removed or reordered line breaks the chain and `sandgate audit verify` says
//! where. Appends take an exclusive `flock` and read the last line under it, so concurrent
//! sandgate processes chain their lines in order and never interleave them.
//!
//! The lock is taken on a lock file in `/tmp/sandgate-UID` (named after the log's path),
//! where no sandbox reaches, rather than on the log: a log can be rotated, and a process
//! kept from an earlier call could open the fresh one that no mount of its sandbox masks,
//! lock it, and so fail every later escalation. (Where that directory cannot be had — run
//! inside a sandbox, say — the log itself is locked.) Whoever holds the lock can only make
//! sandgate wait a bounded time ([`LOCK_WAIT`]); then the append fails, and a grant with
//! it.

use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::logfile::{self, Access, Dirs, LogFileError, Which};

/// `prev` of the first line.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// How far back from the end to look for the last line (longer lines break the chain).
const MAX_LINE: u64 = 1 << 20;
/// How long an append waits for the lock before giving up. Appends hold it for one read
/// and one write, so a wait this long means the holder is not a sandgate appending.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Why the audit log could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot write the audit log {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("cannot read the audit log {}: {source}", path.display())]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("the audit log {} is broken at line {line}: {reason}", path.display())]
    Broken {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error(transparent)]
    Open(#[from] LogFileError),
    #[error("the audit log {} stayed locked for {} s (held by {holder}); giving up rather than waiting for it", path.display(), LOCK_WAIT.as_secs())]
    Locked { path: PathBuf, holder: String },
}

/// An append-only audit log at a path.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
    /// Where a sandboxed command could have planted a link (see [`logfile::open`]).
    untrusted_roots: Vec<PathBuf>,
}

fn sha256_hex(line: &[u8]) -> String {
    Sha256::digest(line)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl AuditLog {
    /// An audit log at `path` (created, with its directory, on first append).
    pub fn new(path: PathBuf) -> AuditLog {
        AuditLog {
            path,
            untrusted_roots: Vec::new(),
        }
    }

    /// The same log, opened without following a link beneath any of `roots` (canonical
    /// directories a sandboxed command could write in).
    pub fn with_untrusted_roots(mut self, roots: Vec<PathBuf>) -> AuditLog {
        self.untrusted_roots = roots;
        self
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the log's directory and file (mode 0600) if missing, so it exists — and can
    /// be protected — before any sandbox starts.
    ///
    /// # Errors
    /// The directory or file cannot be created.
    pub fn ensure_exists(&self) -> Result<(), AuditError> {
        self.open().map(drop)
    }

    fn open(&self) -> Result<File, AuditError> {
        Ok(logfile::open(
            Which::AuditLog,
            &self.path,
            &self.untrusted_roots,
            Access::ReadAppend,
            Dirs::Create,
        )?)
    }

    /// The file whose `flock` serialises appends (see the module docs); `log`, a handle of
    /// the log, where sandgate's own directory cannot be had.
    pub fn lock_file(&self, log: &File) -> io::Result<File> {
        let name = format!(
            "audit-{}.lock",
            &sha256_hex(self.path.as_os_str().as_encoded_bytes())[..16]
        );
        let Ok(Some(base)) = crate::private_temp::open_base(true) else {
            return log.try_clone();
        };
        let fd = nix::fcntl::openat(
            &base.fd,
            name.as_str(),
            nix::fcntl::OFlag::O_RDWR
                | nix::fcntl::OFlag::O_CREAT
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )?;
        Ok(File::from(fd))
    }

    /// Takes the exclusive lock, retrying with backoff for at most [`LOCK_WAIT`].
    fn lock(&self, mut file: File) -> Result<Flock<File>, AuditError> {
        let deadline = Instant::now() + LOCK_WAIT;
        let mut pause = Duration::from_millis(5);
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(locked) => return Ok(locked),
                Err((back, Errno::EINTR)) => file = back,
                Err((back, Errno::EWOULDBLOCK)) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(AuditError::Locked {
                            path: self.path.clone(),
                            holder: lock_holder(&back),
                        });
                    }
                    std::thread::sleep(pause.min(deadline - now));
                    pause = (pause * 2).min(Duration::from_millis(50));
                    file = back;
                }
                Err((_, e)) => {
                    return Err(AuditError::Io {
                        path: self.path.clone(),
                        source: e.into(),
                    })
                }
            }
        }
    }

    /// Appends one record of `kind` with `fields`, adding `type`, `ts` and `prev`.
    ///
    /// # Errors
    /// The log cannot be opened, locked or written; the caller must then not proceed.
    pub fn append(&self, kind: &str, fields: Map<String, Value>) -> Result<(), AuditError> {
        let io_err = |source| AuditError::Io {
            path: self.path.clone(),
            source,
        };
        let mut file = self.open()?;
        let _locked = self.lock(self.lock_file(&file).map_err(io_err)?)?;
        let prev = last_line(&mut file)
            .map_err(io_err)?
            .map_or_else(|| GENESIS.to_owned(), |l| sha256_hex(&l));
        let mut record = Map::new();
        record.insert("type".into(), Value::from(kind));
        record.insert("ts".into(), Value::from(now_rfc3339()));
        record.extend(fields);
        record.insert("prev".into(), Value::from(prev));
        let mut line = Value::Object(record).to_string().into_bytes();
        line.push(b'\n');
        // One write of the whole line on an O_APPEND fd, under the lock.
        file.write_all(&line).map_err(io_err)?;
        file.sync_data().map_err(io_err)
    }
}

/// Names who holds the `flock` on `file`, from `/proc/locks`: "pid N (comm)" for each.
fn lock_holder(file: &File) -> String {
    let unknown = || "another process".to_owned();
    let Ok(st) = nix::sys::stat::fstat(file.as_fd()) else {
        return unknown();
    };
    let (major, minor) = (libc::major(st.st_dev), libc::minor(st.st_dev));
    let id = format!("{major:02x}:{minor:02x}:{}", st.st_ino);
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return unknown();
    };
    let holders: Vec<String> = locks
        .lines()
        .filter_map(|line| {
            // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; waiters have "->".
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(1) != Some(&"FLOCK") || fields.get(5) != Some(&id.as_str()) {
                return None;
            }
            let pid = fields.get(4)?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            Some(match comm.trim() {
                "" => format!("pid {pid}"),
                comm => format!("pid {pid} ({comm})"),
            })
        })
        .collect();
    if holders.is_empty() {
        unknown()
    } else {
        holders.join(", ")
    }
}

/// Returns the last complete line of `file` (without its newline), if any.
fn last_line(file: &mut File) -> io::Result<Option<Vec<u8>>> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    let start = len.saturating_sub(MAX_LINE);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    if tail.last() == Some(&b'\n') {
        tail.pop();
    }
    let begin = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    Ok(Some(tail[begin..].to_vec()))
}

/// Returns the current time as RFC 3339 UTC, to the millisecond.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Checks the chain of the log at `path`; returns the number of lines.
///
/// # Errors
/// The first line whose `prev` does not match the line before it, or that is not a JSON
/// object with a `prev`.
pub fn verify(path: &Path) -> Result<usize, AuditError> {
    let file = File::open(path).map_err(|source| AuditError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let mut expected = GENESIS.to_owned();
    let mut count = 0;
    for (index, line) in io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(|source| AuditError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
        let broken = |reason: String| AuditError::Broken {
            path: path.to_path_buf(),
            line: index + 1,
            reason,
        };
        let value: Value =
            serde_json::from_slice(&line).map_err(|e| broken(format!("not JSON: {e}")))?;
        let prev = value
            .get("prev")
            .and_then(Value::as_str)
            .ok_or_else(|| broken("no `prev` field".into()))?;
        if prev != expected {
            return Err(broken(
                "`prev` does not match the sha256 of the line before: the log was edited".into(),
            ));
        }
        expected = sha256_hex(&line);
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_lines_chain_and_an_edit_breaks_the_chain() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let log = AuditLog::new(dir.path().join("state/audit.jsonl"));
        for i in 0..3 {
            let mut f = Map::new();
            f.insert("id".into(), Value::from(i));
            log.append("approval/asked", f)?;
        }
        assert_eq!(verify(log.path())?, 3);
        let text = std::fs::read_to_string(log.path())?;
        std::fs::write(log.path(), text.replacen("\"id\":1", "\"id\":7", 1))?;
        match verify(log.path()) {
            Err(AuditError::Broken { line, .. }) => assert_eq!(line, 3),
            other => panic!("expected a break at line 3, got {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn a_held_lock_fails_the_append_in_bounded_time_and_names_the_holder(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let log = AuditLog::new(dir.path().join("audit.jsonl"));
        log.ensure_exists()?;
        let lock = log.lock_file(&File::open(log.path())?)?;
        let held = Flock::lock(lock, FlockArg::LockExclusive).map_err(|(_, e)| e)?;
        let start = Instant::now();
        match log.append("approval/asked", Map::new()) {
            Err(AuditError::Locked { holder, .. }) => {
                assert!(
                    holder.contains(&format!("pid {}", std::process::id())),
                    "{holder}"
                )
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        assert!(start.elapsed() < LOCK_WAIT + Duration::from_secs(5));
        drop(held);
        log.append("approval/asked", Map::new())?;
        assert_eq!(verify(log.path())?, 1);
        Ok(())
    }
}
