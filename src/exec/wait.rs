//! sandgate's side of a running call: it waits for the command's end, forwards the
//! signals sent to sandgate, and enforces the time limit.
//!
//! It waits on a signalfd of the signals it takes (they are blocked), the channel on which
//! a PID namespace's init reports the command's end, and the time limit, in one `poll`:
//! init may report a command's end and stay (the call keeps what the command left), so
//! sandgate cannot just wait for its child to exit.
//!
//! The time limit: SIGTERM first, as sandgate forwards a `kill` (to the command only, which
//! may clean up), then after [`GRACE`] SIGKILL of everything. With a PID namespace that is
//! init's death, which the kernel turns into the death of every process in the namespace;
//! without one, the command and every process sandgate adopted from its tree (sandgate is
//! their subreaper) are killed until none is left. The call then ends with
//! [`Outcome::TimedOut`], also when the command ended on the SIGTERM.

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::SigSet;
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::init::Report;
use super::relay::Relay;
use super::{ExecError, Outcome};
use crate::process_table;
use crate::sys::{self, Reaped};

/// How long a command that ran out of time has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// What sandgate waits for.
pub(super) enum Target {
    /// pid 1 of the call's PID namespace, and sandgate's end of the channel on which it
    /// reports the command's end.
    Init { pid: libc::pid_t, report: OwnedFd },
    /// The command itself, what becomes of the processes it leaves, and what ends them
    /// all at once (`EndedWithTheCommand`).
    Command {
        pid: libc::pid_t,
        orphans: Orphans,
        ender: Option<super::ender::Ender>,
        /// sandgate's children from before the call ([`children_now`]).
        spared: HashSet<libc::pid_t>,
    },
}

/// What becomes of the processes a command without a PID namespace leaves behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Orphans {
    /// Nothing: they are not sandgate's to end.
    Left,
    /// sandgate adopts them (it is the subreaper of the command's tree) and ends them when
    /// the time limit comes...
    EndedAtTheLimit,
    /// ...or as soon as the command ends: a restricted call's processes end with it, and
    /// no PID namespace (its own or a parent sandbox's) ends them.
    EndedWithTheCommand,
}

/// How the wait ended.
pub(super) struct Ended {
    pub outcome: Outcome,
    /// The command's PID namespace outlives the call, with what it left running (its init
    /// is still sandgate's child).
    pub kept: bool,
}

/// Waits until the command has ended (and, unless the call keeps them, everything it
/// left in its PID namespace), forwarding every `waited` signal a process sent to sandgate,
/// copying what `relay` carries, and ending the call once `limit` has passed.
///
/// # Errors
/// The signals or the child cannot be waited for.
pub(super) fn until_ended(
    target: Target,
    waited: &SigSet,
    limit: Option<Duration>,
    relay: &mut Relay,
) -> Result<Ended, ExecError> {
    let signals = SignalFd::with_flags(waited, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    let (pid, mut channel, orphans, mut ender, spared) = match target {
        Target::Init { pid, report } => (pid, Some(report), Orphans::Left, None, HashSet::new()),
        Target::Command {
            pid,
            orphans,
            ender,
            spared,
        } => (pid, None, orphans, ender, spared),
    };
    let adopts_orphans = orphans != Orphans::Left;
    let mut clock = Clock::new(limit);
    let mut report: Option<Report> = None;
    let mut command_ended = None;
    loop {
        let ended = match adopts_orphans {
            true => reap_adopted(pid, &mut command_ended)?,
            false => sys::wait_nohang(pid)?,
        };
        if let Some(how) = ended {
            // Init's report is the command's end; init's own is only the namespace's. It
            // reports before it exits, but this loop may see the exit first: the report
            // then still waits in the channel.
            if let (None, Some(ch)) = (report, &channel) {
                report = Report::receive(ch.as_fd());
            }
            let how = report.map_or(how, |r| r.ended);
            if orphans == Orphans::EndedWithTheCommand
                || (adopts_orphans && clock.expired().is_some())
            {
                drop(ender.take());
                end_adopted(&signals, &spared);
            }
            let outcome = match clock.expired() {
                Some(limit) => Outcome::TimedOut(limit),
                None => outcome_of(how),
            };
            return Ok(Ended {
                outcome,
                kept: false,
            });
        }
        if let Some(r) = report.filter(|r| r.kept) {
            if clock.expired().is_none() {
                return Ok(Ended {
                    outcome: outcome_of(r.ended),
                    kept: true,
                });
            }
            // Out of time: the whole namespace ends, what the command left included.
            let _ = sys::kill(pid, libc::SIGKILL);
        }
        let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        if let Some(channel) = &channel {
            fds.push(PollFd::new(channel.as_fd(), PollFlags::POLLIN));
        }
        fds.extend(relay.waiting());
        match poll(&mut fds, clock.poll_timeout()) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let channel_ready = fds
            .get(1)
            .and_then(PollFd::revents)
            .is_some_and(|r| !r.is_empty());
        drop(fds);
        relay.pump();
        while let Ok(Some(info)) = signals.read_signal() {
            let signo = info.ssi_signo as libc::c_int;
            // si_code <= 0: sent by a process (kill, sigqueue, tgkill). SI_KERNEL:
            // generated by the terminal for the whole foreground group, the command
            // included.
            if signo != libc::SIGCHLD && info.ssi_code <= 0 {
                let _ = sys::kill(pid, signo);
            }
        }
        if channel_ready {
            if let Some(ch) = &channel {
                report = Report::receive(ch.as_fd());
            }
            // One report, or none ever: either way there is nothing more to read.
            channel = None;
        }
        if let Some(signal) = clock.due(Instant::now()) {
            let _ = sys::kill(pid, signal);
        }
    }
}

/// How the command's own end reads as an [`Outcome`].
fn outcome_of(how: sys::Ended) -> Outcome {
    match how {
        sys::Ended::Exited(status) => Outcome::Exited(u8::try_from(status).unwrap_or(u8::MAX)),
        sys::Ended::Signaled(signal) => Outcome::Signaled(signal),
    }
}

/// Reaps every adopted orphan that ended, and the command: its end, once it has ended.
fn reap_adopted(
    command: libc::pid_t,
    ended: &mut Option<sys::Ended>,
) -> Result<Option<sys::Ended>, ExecError> {
    loop {
        match sys::reap_any()? {
            Reaped::Child(pid, how) if pid == command => *ended = Some(how),
            Reaped::Child(..) => {}
            Reaped::NoneEnded | Reaped::NoChildren => return Ok(*ended),
        }
    }
}

/// The children sandgate has now: processes its caller started before it executed
/// sandgate (`sh -c 'job & exec sandgate …'`), which are no part of any call.
pub(super) fn children_now() -> HashSet<libc::pid_t> {
    let me = nix::unistd::getpid().as_raw();
    // The kernel's own list (sandgate is single-threaded here: its one task's children are
    // all of them); the whole process table where the kernel keeps no such list.
    match std::fs::read_to_string(format!("/proc/self/task/{me}/children")) {
        Ok(list) => list
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        Err(_) => process_table::table()
            .into_iter()
            .filter(|(_, entry)| entry.parent == me)
            .map(|(pid, _)| pid)
            .collect(),
    }
}

/// Kills every process sandgate adopted from the command's tree, round after round (one
/// killed hands its children to sandgate in turn), until none is left or five seconds
/// have passed; `spared` (see [`children_now`]) are neither killed nor waited for.
/// Whatever survives that is no longer served: sandgate hands no supervisor over for a
/// call that does not keep its processes.
fn end_adopted(signals: &SignalFd, spared: &HashSet<libc::pid_t>) {
    let me = nix::unistd::getpid().as_raw();
    let give_up = Instant::now() + Duration::from_secs(5);
    loop {
        loop {
            match sys::reap_any() {
                Ok(Reaped::Child(..)) => {}
                Ok(Reaped::NoneEnded) => break,
                Ok(Reaped::NoChildren) | Err(_) => return,
            }
        }
        // A zombie too: a thread group whose leader exited shows its leader's state,
        // and its other threads run on until the group is killed.
        let adopted: Vec<libc::pid_t> = process_table::table()
            .into_iter()
            .filter(|(pid, entry)| entry.parent == me && !spared.contains(pid))
            .map(|(pid, _)| pid)
            .collect();
        if adopted.is_empty() {
            return;
        }
        for pid in adopted {
            let _ = sys::kill(pid, libc::SIGKILL);
        }
        if Instant::now() >= give_up {
            return;
        }
        let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(10u16));
        while let Ok(Some(_)) = signals.read_signal() {}
    }
}

/// The time limit's course: running, then SIGTERM sent and the grace running, then
/// SIGKILL sent.
struct Clock {
    limit: Option<Duration>,
    term_at: Option<Instant>,
    kill_at: Option<Instant>,
    killed: bool,
}

impl Clock {
    fn new(limit: Option<Duration>) -> Clock {
        Clock {
            limit,
            term_at: limit.and_then(|l| Instant::now().checked_add(l)),
            kill_at: None,
            killed: false,
        }
    }

    /// The limit, once it has passed.
    fn expired(&self) -> Option<Duration> {
        self.limit.filter(|_| self.kill_at.is_some())
    }

    /// The signal due at `now`, if any.
    fn due(&mut self, now: Instant) -> Option<libc::c_int> {
        match (self.term_at, self.kill_at) {
            (Some(term), None) if now >= term => {
                self.kill_at = Some(now + GRACE);
                Some(libc::SIGTERM)
            }
            (_, Some(kill)) if !self.killed && now >= kill => {
                self.killed = true;
                Some(libc::SIGKILL)
            }
            _ => None,
        }
    }

    /// How long `poll` may wait before the next step is due.
    fn poll_timeout(&self) -> PollTimeout {
        let next = match (self.term_at, self.kill_at) {
            (Some(term), None) => term,
            (_, Some(kill)) if !self.killed => kill,
            _ => return PollTimeout::NONE,
        };
        let left = next.saturating_duration_since(Instant::now());
        // Rounded up: a wait that ends a little early would only spin.
        let ms = left.as_millis().saturating_add(1);
        PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_sends_term_then_kill_after_the_grace() {
        let mut clock = Clock::new(Some(Duration::from_secs(1)));
        let start = Instant::now();
        assert_eq!(clock.due(start), None);
        assert_eq!(clock.expired(), None);
        let term = start + Duration::from_secs(2);
        assert_eq!(clock.due(term), Some(libc::SIGTERM));
        assert_eq!(clock.expired(), Some(Duration::from_secs(1)));
        assert_eq!(clock.due(term + GRACE / 2), None);
        assert_eq!(clock.due(term + GRACE), Some(libc::SIGKILL));
        assert_eq!(clock.due(term + GRACE * 2), None);
        assert_eq!(Clock::new(None).due(term), None);
        assert_eq!(Clock::new(None).poll_timeout(), PollTimeout::NONE);
    }
}
