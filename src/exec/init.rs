//! pid 1 of a restricted call's PID namespace: the child sandgate clones into the new
//! namespaces. It builds the sandbox, becomes as confined as the command (the same
//! landlock domain and seccomp filter, no capabilities), forks the command, and then only
//! waits:
//!
//! - it reaps every process that ends in the namespace (orphans are re-parented to it);
//! - it relays to the command the signals sandgate forwards to it — those sent with
//!   `kill` from outside the namespace, which the kernel numbers as sender 0. A process
//!   inside cannot pose as that sender, and the kernel itself discards SIGKILL and SIGSTOP
//!   sent to a namespace's pid 1 from inside it, so the command cannot end or stop init;
//! - when the command ends it reports how ([`Report`]) to sandgate through its channel,
//!   and exits: the kernel then kills every process left in the namespace. When the call
//!   keeps them, it stays and reaps until the namespace is empty instead, having first
//!   disarmed its parent-death signal, so that sandgate's own exit does not end them —
//!   or until the call's time limit, counted from the command's start, has passed: then
//!   it sends every process left SIGTERM, and exits two seconds later, which ends them.
//!
//! pid 1 is not the command because the kernel gives pid 1 two duties no program expects:
//! signals with their default action are ignored by it, and it inherits every orphan.
//!
//! The process was cloned from sandgate: it holds sandgate's memory, arguments and
//! environment (secret variables the command is not given among them). It makes itself
//! non-dumpable (so the command cannot read `/proc/1/environ` or `/proc/1/mem`) and
//! overwrites its arguments and environment, so `/proc/1/cmdline` reads `sandgate-init`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use std::time::{Duration, Instant};

use nix::sys::signal::SigSet;

use super::{execute, hand_to_sandgate, report_failure, Program};
use crate::sandbox::{Prepared, Step};
use crate::sys::{self, Ended, Reaped};

/// What init is called in the namespace's process list.
const TITLE: &std::ffi::CStr = c"sandgate-init";

/// The fds init is started with.
pub(super) struct Ends {
    /// Where a failed step is reported (see [`report_failure`]).
    pub err_w: OwnedFd,
    /// Init's end of the channel to sandgate: the sandbox's fds, then the [`Report`].
    pub channel: OwnedFd,
    /// sandgate's ends of the same pipe and channel, inherited with the clone: closed
    /// first, so that the channel hangs up when sandgate is gone.
    pub sandgates: [RawFd; 2],
}

/// How the command ended, as init tells sandgate: one message on the channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Report {
    pub ended: Ended,
    /// Processes the command left stay in the namespace, which outlives the call.
    pub kept: bool,
}

impl Report {
    const LEN: usize = 12;

    fn encode(self) -> [u8; Self::LEN] {
        let (kind, value) = match self.ended {
            Ended::Exited(code) => (1u32, code),
            Ended::Signaled(signal) => (2u32, signal),
        };
        let mut bytes = [0u8; Self::LEN];
        bytes[..4].copy_from_slice(&kind.to_ne_bytes());
        bytes[4..8].copy_from_slice(&value.to_ne_bytes());
        bytes[8..].copy_from_slice(&u32::from(self.kept).to_ne_bytes());
        bytes
    }

    /// Reads the report from sandgate's end of the channel: `None` when init closed it
    /// without one (it failed, or was killed).
    pub fn receive(channel: std::os::fd::BorrowedFd<'_>) -> Option<Report> {
        let mut bytes = [0u8; Self::LEN];
        let n = loop {
            match nix::sys::socket::recv(
                channel.as_raw_fd(),
                &mut bytes,
                nix::sys::socket::MsgFlags::MSG_DONTWAIT,
            ) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other.ok()?,
            }
        };
        if n != Self::LEN {
            return None;
        }
        let word = |at: usize| [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        let value = i32::from_ne_bytes(word(4));
        let ended = match u32::from_ne_bytes(word(0)) {
            1 => Ended::Exited(value),
            2 => Ended::Signaled(value),
            _ => return None,
        };
        Some(Report {
            ended,
            kept: u32::from_ne_bytes(word(8)) == 1,
        })
    }
}

/// Runs as pid 1 of the new namespaces; never returns. A failure before the command runs
/// is reported through `ends.err_w` (exit 125).
pub(super) fn run(
    sandbox: Prepared,
    program: &Program<'_>,
    ends: Ends,
    old_mask: &SigSet,
    keep: bool,
    time_limit: Option<Duration>,
) -> ! {
    let err_w = ends.err_w.as_fd();
    for fd in ends.sandgates {
        // Inherited numbers this process never uses.
        let _ = nix::unistd::close(fd);
    }
    if let Err(e) = sys::set_parent_death_signal(libc::SIGKILL) {
        report_failure(err_w, Step::ProcessBoundary, e);
    }
    if sandgate_gone(ends.channel.as_fd()) {
        // sandgate died before PDEATHSIG was armed.
        sys::exit_immediately(125);
    }
    // Every signal is taken with sigwaitinfo below; none may act on init meanwhile.
    if let Err(e) = SigSet::all().thread_block() {
        report_failure(err_w, Step::ProcessBoundary, e.into());
    }
    let area = sys::argument_area();
    let applied = match sandbox.apply() {
        Ok(applied) => applied,
        Err((step, err)) => report_failure(err_w, step, err),
    };
    // Only now: a non-dumpable process could not have written its own id maps.
    let hidden = nix::sys::prctl::set_dumpable(false)
        .and_then(|()| nix::sys::prctl::set_name(TITLE))
        .map_err(io::Error::from)
        .and_then(|()| area.map(|area| sys::overwrite_arguments(area, TITLE.to_bytes())));
    if let Err(e) = hidden {
        report_failure(err_w, Step::ProcessBoundary, e);
    }
    if let Err(e) = hand_to_sandgate(ends.channel.as_fd(), applied) {
        report_failure(err_w, Step::Supervisor, e);
    }
    let command = match sys::fork() {
        Ok(0) => {
            if let Err(e) = old_mask.thread_set_mask() {
                report_failure(err_w, Step::Exec, e.into());
            }
            sys::default_sigpipe();
            // No parent-death signal: the command dies with the namespace, when init does.
            execute(program, err_w, None)
        }
        Ok(pid) => pid,
        Err(e) => report_failure(err_w, Step::Exec, e),
    };
    let deadline = time_limit.map(|limit| Instant::now() + limit);
    // Nothing of sandgate's caller stays open here: not its terminal, not its pipes (a
    // `$(…)` around sandgate would wait for init's copy), not the error pipe.
    let channel = ends.channel;
    sys::holding_only(&[channel.as_raw_fd()], sys::Standard::Closed, move || {
        serve(command, channel, keep, deadline)
    })
}

/// How long kept processes have between SIGTERM at the time limit and their end.
const GRACE: Duration = Duration::from_secs(2);

/// Returns true when sandgate's end of the channel is closed.
fn sandgate_gone(channel: std::os::fd::BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(channel, PollFlags::POLLIN)];
    let _ = poll(&mut fds, PollTimeout::ZERO);
    fds[0]
        .revents()
        .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR))
}

/// Init's work once the command runs: reap, relay, report; see the module docs.
fn serve(command: libc::pid_t, channel: OwnedFd, keep: bool, deadline: Option<Instant>) -> ! {
    let all = SigSet::all();
    let mut ended: Option<Ended> = None;
    let mut reported = false;
    let mut deadline = deadline;
    let mut terminated = false;
    loop {
        let children_left = loop {
            match sys::reap_any() {
                Ok(Reaped::Child(pid, how)) => {
                    if pid == command {
                        ended = Some(how);
                    }
                }
                Ok(Reaped::NoneEnded) => break true,
                Ok(Reaped::NoChildren) | Err(_) => break false,
            }
        };
        if let Some(how) = ended {
            if !reported {
                let kept = keep && children_left;
                if kept {
                    // From here on sandgate may exit: the namespace is the call's no more.
                    let _ = sys::set_parent_death_signal(0);
                }
                let report = Report { ended: how, kept }.encode();
                let _ = nix::sys::socket::send(
                    channel.as_raw_fd(),
                    &report,
                    nix::sys::socket::MsgFlags::empty(),
                );
                reported = true;
                if !kept {
                    sys::exit_immediately(0);
                }
            }
            if !children_left {
                sys::exit_immediately(0);
            }
        }
        // While the command runs, sandgate keeps its time limit; once it has ended, what
        // the call kept is init's to end at that limit.
        if let (true, Some(at)) = (reported, deadline) {
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if terminated {
                    sys::exit_immediately(0);
                }
                // Every process in the namespace but init itself.
                let _ = sys::kill(-1, libc::SIGTERM);
                terminated = true;
                deadline = Some(Instant::now() + GRACE);
            } else {
                let _ = sys::sigtimedwait(&all, left);
            }
            continue;
        }
        let Ok(signal) = sys::sigwaitinfo(&all) else {
            continue;
        };
        let from_sandgate = signal.code == libc::SI_USER && signal.sender == 0;
        if ended.is_none() && signal.signo != libc::SIGCHLD && from_sandgate {
            let _ = sys::kill(command, signal.signo);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_as_sent_and_a_closed_channel_as_none() {
        use nix::sys::socket::{socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
        let pair = || {
            socketpair(
                AddressFamily::Unix,
                SockType::SeqPacket,
                None,
                SockFlag::SOCK_CLOEXEC,
            )
            .unwrap()
        };
        for report in [
            Report {
                ended: Ended::Exited(7),
                kept: false,
            },
            Report {
                ended: Ended::Signaled(libc::SIGRTMIN() + 3),
                kept: true,
            },
        ] {
            let (ours, theirs) = pair();
            nix::sys::socket::send(theirs.as_raw_fd(), &report.encode(), MsgFlags::empty())
                .unwrap();
            // Still there once the sender is gone, as when init reports and exits.
            drop(theirs);
            assert_eq!(Report::receive(ours.as_fd()), Some(report));
            assert_eq!(Report::receive(ours.as_fd()), None);
        }
    }
}
