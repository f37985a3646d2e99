//! What calls with `--keep-background` left running: one record per kept PID namespace,
//! for `sandgate ps` and `sandgate stop`.
//!
//! A record lies in `/tmp/sandgate-UID/kept/`, beside the private temps and reached like
//! them (`private_temp`: every component opened without following a link, the caller's own
//! directories 0700): no sandbox sees it (each has its own `/tmp`), and only sandgate writes
//! there. It names the namespace's init by its host pid *and* its start time (field 22 of
//! `/proc/PID/stat`), since a pid is reused once its process is gone: a record whose pid
//! now names another process, or nothing, is stale, and is removed whenever it is read.
//!
//! Stopping kills init through a pidfd, opened before the start time is checked, so the
//! signal reaches the process that was checked. The kernel then kills every process in the
//! namespace; init's end is only observable once they are all gone.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, Mode as Perm};
use serde::{Deserialize, Serialize};

use crate::policy::Mode;
use crate::private_temp::{self, TempError};
use crate::process_table;
use crate::sys;

/// The longest record read: a command line of any sane length fits many times over.
const MAX_RECORD: u64 = 1 << 20;

/// How long `stop` waits for a namespace to be empty.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// Why kept namespaces cannot be recorded, listed or stopped.
#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    #[error(transparent)]
    Directory(#[from] TempError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("process {pid} did not end within {} seconds of SIGKILL", STOP_WAIT.as_secs())]
    StillRunning { pid: libc::pid_t },
}

impl From<nix::Error> for KeptError {
    fn from(e: nix::Error) -> Self {
        KeptError::Io(e.into())
    }
}

/// The call a kept namespace comes from, as its record shows it.
#[derive(Clone, Debug)]
pub struct Call {
    pub workspace: PathBuf,
    pub mode: Mode,
    /// The command as it was run (lossy where it was not UTF-8).
    pub command: Vec<String>,
    pub started: SystemTime,
}

/// One kept namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Its init's pid on the host.
    pub pid: libc::pid_t,
    /// Its init's start time, in clock ticks since boot.
    pub start: u64,
    pub workspace: PathBuf,
    pub mode: Mode,
    pub command: Vec<String>,
    /// When the call started, in seconds since the epoch.
    pub started: u64,
}

/// A process in a kept namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Process {
    /// Its pid on the host.
    pub pid: libc::pid_t,
    pub command: String,
}

impl Record {
    /// The record of `pid`, the init of a namespace `call` left running (sandgate's child,
    /// so its pid cannot have been reused).
    ///
    /// # Errors
    /// `pid` has no `/proc` entry.
    pub fn new(pid: libc::pid_t, call: &Call) -> Result<Record, KeptError> {
        let entry = process_table::entry(pid)
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ESRCH))?;
        Ok(Record {
            pid,
            start: entry.start,
            workspace: call.workspace.clone(),
            mode: call.mode,
            command: call.command.clone(),
            started: call
                .started
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        })
    }

    fn file_name(&self) -> String {
        format!("{}-{}.json", self.pid, self.start)
    }

    /// Writes the record (a new file, 0600, never through a link).
    ///
    /// # Errors
    /// The directory is not usable (see `private_temp`), or the file cannot be written.
    pub fn save(&self) -> Result<(), KeptError> {
        let dir = open_dir(true)?.ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?;
        let fd = openat(
            dir.as_fd(),
            self.file_name().as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Perm::from_bits_truncate(0o600),
        )?;
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        std::fs::File::from(fd).write_all(&json)?;
        Ok(())
    }

    /// Whether the record's init is still the process running under its pid.
    fn is_live(&self) -> bool {
        process_table::entry(self.pid).is_some_and(|e| e.start == self.start && !e.zombie)
    }

    /// The processes in the namespace now (init's descendants), parents first.
    pub fn processes(&self) -> Vec<Process> {
        process_table::descendants(&process_table::table(), self.pid)
            .into_iter()
            .filter_map(|pid| {
                Some(Process {
                    pid,
                    command: process_table::command_line(pid)?,
                })
            })
            .collect()
    }

    /// When the call started, as RFC 3339 (UTC).
    pub fn started_at(&self) -> String {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(self.started);
        humantime::format_rfc3339_seconds(at).to_string()
    }
}

/// The records directory, `/tmp/sandgate-UID/kept` (made when `create`).
fn open_dir(create: bool) -> Result<Option<OwnedFd>, KeptError> {
    Ok(private_temp::open_kept(create)?.map(|dir| dir.fd))
}

/// The records of live kept namespaces, of `workspace` or of all; stale ones are removed.
///
/// # Errors
/// The directory is not usable (see `private_temp`) or cannot be read.
pub fn live(workspace: Option<&Path>) -> Result<Vec<Record>, KeptError> {
    let Some(dir) = open_dir(false)? else {
        return Ok(vec![]);
    };
    let readable = openat(
        dir.as_fd(),
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Perm::empty(),
    )?;
    let mut names: Vec<std::ffi::OsString> = nix::dir::Dir::from_fd(readable)?
        .iter()
        .filter_map(Result::ok)
        .map(|e| os_name(e.file_name()))
        .filter(|n| n.to_string_lossy().ends_with(".json"))
        .collect();
    names.sort();
    let mut records = Vec::new();
    for name in names {
        match read_record(dir.as_fd(), &name) {
            Some(record) if record.is_live() => records.push(record),
            // Stale, or not a record sandgate wrote: nothing to keep.
            _ => remove(dir.as_fd(), &name),
        }
    }
    records.retain(|r| workspace.is_none_or(|w| r.workspace == w));
    records.sort_by_key(|r| (r.started, r.pid));
    Ok(records)
}

/// Reads one record: a regular file of the caller's with one link, opened without
/// following a link.
fn read_record(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) -> Option<Record> {
    let fd = openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Perm::empty(),
    )
    .ok()?;
    let st = fstat(fd.as_fd()).ok()?;
    let mine = st.st_uid == nix::unistd::geteuid().as_raw();
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || !mine || st.st_nlink != 1 {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_RECORD)
        .read_to_end(&mut bytes)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn remove(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) {
    let _ = nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
}

/// Ends the namespace of `record`: SIGKILL to its init through a pidfd, once its start
/// time matched; waits until the namespace is empty, then removes the record.
///
/// # Errors
/// The signal could not be sent, or the namespace did not end in time.
pub fn stop(record: &Record) -> Result<(), KeptError> {
    match sys::pidfd_open(record.pid, false) {
        Ok(pidfd) if record.is_live() => {
            sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL)?;
            if !exited_within(pidfd.as_fd(), STOP_WAIT) {
                return Err(KeptError::StillRunning { pid: record.pid });
            }
        }
        // Gone already, or its pid names another process: only the record is left.
        _ => {}
    }
    if let Some(dir) = open_dir(false)? {
        remove(dir.as_fd(), std::ffi::OsStr::new(&record.file_name()));
    }
    Ok(())
}

/// Waits until the process behind `pidfd` has exited (init exits only once every process
/// of its namespace is gone).
fn exited_within(pidfd: BorrowedFd<'_>, limit: Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    let ms = u32::try_from(limit.as_millis()).unwrap_or(u32::MAX);
    matches!(poll(&mut fds, PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)), Ok(n) if n > 0)
}

fn os_name(name: &std::ffi::CStr) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(name.to_bytes()).to_owned()
}
