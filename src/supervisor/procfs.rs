//! The callers' `/proc/<tid>` directories, kept open between notifications.
//!
//! Every observed call with a relative path looks at the caller's cwd or dirfd through
//! `/proc/<tid>/…`. Walking there from `/` for each call (`proc`, then the tid, then the
//! link) costs more than the rest of the supervisor's work on it; a handle of the tid's
//! directory makes it one lookup.
//!
//! A handle is tied to the task it was opened for, not to its number: once that task is
//! gone every lookup beneath the handle fails, so a recycled tid can never be answered
//! from another task's view. A failed lookup through a cached handle is retried once
//! through a freshly opened one ([`ProcDirs::with`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;

/// How many callers' directories stay open: a build's busiest processes, not all of
/// them. Past that the cache starts over.
const MAX_DIRS: usize = 64;

/// The open `/proc/<tid>` directories, by tid.
#[derive(Default)]
pub struct ProcDirs(RefCell<HashMap<libc::pid_t, Arc<OwnedFd>>>);

impl ProcDirs {
    /// Returns the directory of `tid`, and whether it was opened just now.
    ///
    /// # Errors
    /// The tid has no directory (the task is gone).
    pub fn get(&self, tid: libc::pid_t) -> Result<(Arc<OwnedFd>, bool), Errno> {
        if let Some(dir) = self.0.borrow().get(&tid) {
            return Ok((dir.clone(), false));
        }
        let dir = Arc::new(open(
            format!("/proc/{tid}").as_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?);
        let mut dirs = self.0.borrow_mut();
        if dirs.len() >= MAX_DIRS {
            dirs.clear();
        }
        dirs.insert(tid, dir.clone());
        Ok((dir, true))
    }

    /// Runs `f` on the directory of `tid`. When it fails on a cached directory, that one
    /// may belong to a task that is gone: `f` runs once more on a fresh one.
    ///
    /// # Errors
    /// The task is gone, or `f`'s error.
    pub fn with<T>(
        &self,
        tid: libc::pid_t,
        f: impl Fn(BorrowedFd<'_>) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let (dir, fresh) = self.get(tid)?;
        match f(dir.as_fd()) {
            Err(_) if !fresh => {
                self.0.borrow_mut().remove(&tid);
                let (dir, _) = self.get(tid)?;
                f(dir.as_fd())
            }
            done => done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::fcntl::{openat, readlinkat};

    #[test]
    fn a_handle_of_a_task_that_is_gone_is_not_used_for_its_number() {
        let dirs = ProcDirs::default();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let tid = child.id() as libc::pid_t;
        let cwd = |dir: BorrowedFd<'_>| readlinkat(dir, "cwd");
        assert!(dirs.with(tid, cwd).is_ok());
        let (cached, fresh) = dirs.get(tid).unwrap_or_else(|e| panic!("{e}"));
        assert!(!fresh);
        let _ = child.kill();
        let _ = child.wait();
        // The task is reaped: the handle still opened for it finds nothing beneath it...
        assert!(openat(
            cached.as_fd(),
            "cwd",
            OFlag::O_PATH | OFlag::O_CLOEXEC,
            Mode::empty()
        )
        .is_err());
        // ...and a lookup by its number fails instead of answering from a stale view.
        assert!(dirs.with(tid, cwd).is_err());
        assert!(dirs.0.borrow().get(&tid).is_none());
    }

    #[test]
    fn the_cache_is_bounded() {
        let dirs = ProcDirs::default();
        let me = nix::unistd::getpid().as_raw();
        let (mine, fresh) = dirs.get(me).unwrap_or_else(|e| panic!("{e}"));
        assert!(fresh);
        assert!(dirs.get(me).is_ok_and(|(_, fresh)| !fresh));
        // Fill it with other callers' entries: the next caller starts it over.
        dirs.0.borrow_mut().clear();
        for n in 0..MAX_DIRS as libc::pid_t {
            dirs.0.borrow_mut().insert(n + 1_000_000, mine.clone());
        }
        assert!(dirs.get(me).is_ok_and(|(_, fresh)| fresh));
        assert_eq!(dirs.0.borrow().len(), 1);
    }
}
