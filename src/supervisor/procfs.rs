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
//!
//! Next to each handle the supervisor keeps what it reads from the task's `status` for
//! the writes it performs ([`Facts`]): reading it costs more than the rest of a performed
//! create, and a task's filters only ever grow by its own hand, while its umask changes
//! only through `umask`, which the filter sends here ([`ProcDirs::umask_changed`]).

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

/// What the supervisor needs of a caller to act for it: the umask its creates get, and how
/// many seccomp filters it runs under (more than the sandboxed command's: it is inside a
/// sandbox of its own, nested in this one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    pub umask: u32,
    pub filters: u32,
}

impl Facts {
    /// Reads `Umask:` and `Seccomp_filters:` from a task's `status` text.
    fn parse(status: &str) -> Option<Facts> {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        Some(Facts {
            umask: u32::from_str_radix(field("Umask:")?, 8).ok()?,
            filters: field("Seccomp_filters:")?.parse().ok()?,
        })
    }
}

/// One task's directory and what was read from it.
struct Task {
    dir: Arc<OwnedFd>,
    facts: Option<Facts>,
}

/// The open `/proc/<tid>` directories, by tid.
#[derive(Default)]
pub struct ProcDirs(RefCell<HashMap<libc::pid_t, Task>>);

impl ProcDirs {
    /// Returns the directory of `tid`, and whether it was opened just now.
    ///
    /// # Errors
    /// The tid has no directory (the task is gone).
    pub fn get(&self, tid: libc::pid_t) -> Result<(Arc<OwnedFd>, bool), Errno> {
        if let Some(task) = self.0.borrow().get(&tid) {
            return Ok((task.dir.clone(), false));
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
        dirs.insert(
            tid,
            Task {
                dir: dir.clone(),
                facts: None,
            },
        );
        Ok((dir, true))
    }

    /// Returns the facts of `tid`: kept ones when its handle still reaches a live task
    /// (`alive`: a lookup through it already succeeded; else one more), else read afresh
    /// from its `status`.
    ///
    /// # Errors
    /// The task is gone, or its status cannot be read.
    pub fn facts(&self, tid: libc::pid_t, alive: bool) -> Result<Facts, Errno> {
        let kept = self.0.borrow().get(&tid).and_then(|t| t.facts);
        if let (Some(facts), true) = (kept, alive) {
            return Ok(facts);
        }
        if let Some(facts) = kept {
            let alive = self.with(tid, |dir| {
                nix::sys::stat::fstatat(dir, "status", nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            });
            // `with` replaced a handle of a task gone by a fresh one, without facts.
            if alive.is_ok() && self.0.borrow().get(&tid).is_some_and(|t| t.facts.is_some()) {
                return Ok(facts);
            }
        }
        let status = self.with(tid, |dir| {
            let fd = nix::fcntl::openat(
                dir,
                "status",
                OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            let mut buf = vec![0u8; 4096];
            let mut len = 0;
            while len < buf.len() {
                match nix::unistd::read(&fd, &mut buf[len..]) {
                    Ok(0) => break,
                    Ok(n) => len += n,
                    Err(Errno::EINTR) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
        })?;
        let facts = Facts::parse(&status).ok_or(Errno::EIO)?;
        if let Some(task) = self.0.borrow_mut().get_mut(&tid) {
            task.facts = Some(facts);
        }
        Ok(facts)
    }

    /// Notes that `tid` set its umask to `umask`. Any other task may share that setting
    /// (the threads of a process do), so what was read of them is read again when next
    /// needed.
    pub fn umask_changed(&self, tid: libc::pid_t, umask: u32) {
        for (t, task) in self.0.borrow_mut().iter_mut() {
            task.facts = match task.facts {
                Some(facts) if *t == tid => Some(Facts { umask, ..facts }),
                _ => None,
            };
        }
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
            .unwrap();
        let tid = child.id() as libc::pid_t;
        let cwd = |dir: BorrowedFd<'_>| readlinkat(dir, "cwd");
        assert!(dirs.with(tid, cwd).is_ok());
        let (cached, fresh) = dirs.get(tid).unwrap();
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
    fn facts_are_read_once_and_follow_the_umask() {
        let dirs = ProcDirs::default();
        let me = nix::unistd::gettid().as_raw();
        let first = dirs.facts(me, false).unwrap();
        assert_eq!(dirs.facts(me, false), Ok(first));
        dirs.umask_changed(me, 0o077);
        assert_eq!(dirs.facts(me, false).map(|f| f.umask), Ok(0o077));
        dirs.umask_changed(me + 1, 0o002);
        // Forgotten, and read again: the real umask.
        assert_eq!(dirs.facts(me, false), Ok(first));
        assert_eq!(
            Facts::parse("Name:\tx\nUmask:\t0027\nSeccomp_filters:\t2\n"),
            Some(Facts {
                umask: 0o027,
                filters: 2
            })
        );
    }

    #[test]
    fn the_cache_is_bounded() {
        let dirs = ProcDirs::default();
        let me = nix::unistd::getpid().as_raw();
        let (mine, fresh) = dirs.get(me).unwrap();
        assert!(fresh);
        assert!(dirs.get(me).is_ok_and(|(_, fresh)| !fresh));
        // Fill it with other callers' entries: the next caller starts it over.
        dirs.0.borrow_mut().clear();
        for n in 0..MAX_DIRS as libc::pid_t {
            let task = Task {
                dir: mine.clone(),
                facts: None,
            };
            dirs.0.borrow_mut().insert(n + 1_000_000, task);
        }
        assert!(dirs.get(me).is_ok_and(|(_, fresh)| fresh));
        assert_eq!(dirs.0.borrow().len(), 1);
    }
}
