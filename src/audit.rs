//! The audit log (DESIGN §6): JSON lines, append-only, hash-chained. Every escalation
//! request leaves exactly one `approval/asked` and one `approval/decided` record with the
//! same id, whatever the outcome.
//!
//! Each line carries `prev`, the sha256 of the line before it (64 zeros for the first), so
//! an edited, removed or reordered line breaks the chain and `sandgate audit verify` says
//! where. Appends take an exclusive `flock` and read the last line under it, so concurrent
//! sandgate processes chain their lines in order and never interleave them.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// `prev` of the first line.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// How far back from the end to look for the last line (longer lines break the chain).
const MAX_LINE: u64 = 1 << 20;

/// Why the audit log could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot write the audit log {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("the audit log {} is broken at line {line}: {reason}", path.display())]
    Broken {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// An append-only audit log at a path.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
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
        AuditLog { path }
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
        let io_err = |source| AuditError::Io {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(io_err)
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
        let file = self.open()?;
        let mut locked =
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io_err(e.into()))?;
        let prev = last_line(&mut locked)
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
        locked.write_all(&line).map_err(io_err)?;
        locked.sync_data().map_err(io_err)
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
    let file = File::open(path).map_err(|source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut expected = GENESIS.to_owned();
    let mut count = 0;
    for (index, line) in io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(|source| AuditError::Io {
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
}
