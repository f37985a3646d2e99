//! The first bytes of a shell-mode script, read without taking them from the shell: a
//! directive there asks for a wider mode, as the first line of a `-c` string does.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{tee, OFlag, SpliceFFlags};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, MsgFlags};
use nix::sys::stat::{fstat, Mode, SFlag};
use nix::unistd::{lseek, pipe2, Whence};

use crate::sys;

/// Enough for a `#!` line and a directive with the longest justification.
const HEAD: usize = 4096;

/// How long a script on stdin may take to deliver its head; after that, what has come
/// is the head (a writer that slow is not sending a directive first).
const WAIT: Duration = Duration::from_secs(5);

/// The head of the script file `name`, as the shell will find it from the cwd. Only a
/// regular file is read: from a pipe (`/dev/stdin`, a process substitution's `/dev/fd/N`,
/// a FIFO) reading would take the bytes the shell must run, and opening a FIFO could wait
/// for a writer; there the shell alone reads, and no directive is honoured. Nor is a file
/// under the shared temps read: the sandbox has its own `/tmp` and `/dev/shm`, so the
/// shell would run another file than the one read here.
pub(super) fn of_file(name: &Path) -> Option<Vec<u8>> {
    // Looked at through an O_PATH handle, which opens nothing (a device planted under the
    // name — a watchdog, a tape — has no open to react to), and read through that same
    // inode only once it is known to be a regular file outside the shared temps.
    let handle = nix::fcntl::open(name, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()).ok()?;
    if !SFlag::from_bits_truncate(fstat(handle.as_fd()).ok()?.st_mode).contains(SFlag::S_IFREG) {
        return None;
    }
    let at = std::fs::read_link(format!("/proc/self/fd/{}", handle.as_raw_fd())).ok()?;
    if crate::policy::roots::SHARED_TEMPS
        .iter()
        .any(|temp| at.starts_with(temp))
    {
        return None;
    }
    let file = nix::fcntl::open(
        format!("/proc/self/fd/{}", handle.as_raw_fd()).as_str(),
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut head = Vec::with_capacity(HEAD);
    std::fs::File::from(file)
        .take(HEAD as u64)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

/// The file bash would run for the script operand `name` when it is a compiled program,
/// which bash refuses ("cannot execute binary file"): `sandgate ls` meant `sandgate -- ls`.
/// bash looks for the script from the cwd and then, for a name without a slash, on PATH.
/// As [`of_file`], nothing under the shared temps is judged.
pub(super) fn program_named(name: &Path) -> Option<PathBuf> {
    let found = if name.exists() {
        name.to_path_buf()
    } else if !name.as_os_str().as_bytes().contains(&b'/') {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())?
    } else {
        return None;
    };
    of_file(&found)?.starts_with(b"\x7fELF").then_some(found)
}

/// The head of the script on stdin, left in place for the shell: read at the current
/// offset of a file, duplicated with `tee` from a pipe, peeked from a socket. `None` for a
/// terminal or a closed stdin.
pub(super) fn of_stdin() -> Option<Vec<u8>> {
    let stdin = sys::dup_if_open(0)?;
    let kind = SFlag::from_bits_truncate(fstat(stdin.as_fd()).ok()?.st_mode);
    if kind.contains(SFlag::S_IFSOCK) {
        peek_socket(&stdin)
    } else if kind.contains(SFlag::S_IFIFO) {
        peek_pipe(&stdin)
    } else if kind.contains(SFlag::S_IFREG) {
        let at = lseek(&stdin, 0, Whence::SeekCur).ok()?;
        let mut head = vec![0u8; HEAD];
        let n = nix::sys::uio::pread(&stdin, &mut head, at).ok()?;
        head.truncate(n);
        Some(head)
    } else {
        None
    }
}

/// Returns true once `head` holds all a directive could need: the first line, and the
/// second after a `#!` line — or less, when what came shows there is none. A shell fed a
/// line at a time (an agent's persistent session) is never kept waiting for more.
fn complete(head: &[u8]) -> bool {
    if head.len() >= HEAD || head.first().is_some_and(|b| *b != b'#') {
        return true;
    }
    let mut lines = head.split(|b| *b == b'\n');
    match (lines.next(), lines.next(), lines.next()) {
        (Some(first), Some(_), _) if !first.starts_with(b"#!") => true,
        (Some(_), Some(_), Some(_)) => true,
        _ => false,
    }
}

/// Duplicates what the pipe holds (without consuming it) until the head is settled.
fn peek_pipe(stdin: &OwnedFd) -> Option<Vec<u8>> {
    let (copy_r, copy_w) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).ok()?;
    settled(
        || writer_gone(stdin),
        || match tee(stdin, &copy_w, HEAD, SpliceFFlags::SPLICE_F_NONBLOCK) {
            Ok(n) => {
                let mut head = vec![0u8; n];
                let got = nix::unistd::read(&copy_r, &mut head).ok()?;
                head.truncate(got);
                Some(head)
            }
            Err(Errno::EAGAIN | Errno::EINTR) => Some(Vec::new()),
            Err(_) => None,
        },
    )
}

/// Peeks at a socket on stdin the same way.
fn peek_socket(stdin: &OwnedFd) -> Option<Vec<u8>> {
    let mut head = vec![0u8; HEAD];
    settled(
        || writer_gone(stdin),
        || {
            let n = match recv(
                stdin.as_raw_fd(),
                &mut head,
                MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(n) => n,
                Err(Errno::EAGAIN | Errno::EINTR) => 0,
                Err(_) => return None,
            };
            Some(head[..n].to_vec())
        },
    )
}

/// Looks at what has arrived (`look`) until the head is complete, the writer is gone, or
/// [`WAIT`] is over. Whether the writer is gone is asked before each look: one gone by
/// then has sent all it will, while one that writes and hangs up just after a look would
/// leave a head taken for final without its bytes.
fn settled(
    mut gone: impl FnMut() -> bool,
    mut look: impl FnMut() -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    let deadline = Instant::now() + WAIT;
    loop {
        let gone = gone();
        let head = look()?;
        if complete(&head) || Instant::now() >= deadline || gone {
            return Some(head);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Returns true when nothing more can come: the other end hung up.
fn writer_gone(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok()
        && fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLHUP))
}

#[cfg(test)]
mod tests {
    use super::{complete, settled};

    /// A writer that sends the whole script and hangs up right after a look found nothing:
    /// the next look sees the script, rather than the empty head being taken for final.
    #[test]
    fn a_writer_that_hangs_up_right_after_a_look_leaves_its_head() {
        let script = b"# sandgate: sandbox_permissions=full-access justification=\"x\"\ntrue\n";
        let sent = std::cell::Cell::new(false);
        let head = settled(
            || sent.get(),
            || {
                let seen = if sent.get() {
                    script.to_vec()
                } else {
                    Vec::new()
                };
                sent.set(true);
                Some(seen)
            },
        );
        assert_eq!(head.as_deref(), Some(&script[..]));
    }

    #[test]
    fn the_head_is_complete_as_soon_as_no_directive_can_follow() {
        assert!(!complete(b""));
        assert!(complete(b"e"), "not a comment: no directive");
        assert!(!complete(b"# sandgate: sandbox_per"));
        assert!(complete(b"# sandgate: x\n"));
        assert!(!complete(b"#!/bin/sh\n"));
        assert!(!complete(b"#!/bin/sh\n# sandgate: x"));
        assert!(complete(b"#!/bin/sh\n# sandgate: x\n"));
        assert!(complete(&[b'#'; super::HEAD]));
    }
}
