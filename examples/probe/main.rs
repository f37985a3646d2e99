//! Test helper: performs one operation an attacker would try from inside the sandbox and
//! prints `ok` or `err:ERRNO` (e.g. `err:EPERM`). The integration tests run it under
//! sandgate and compare the outcome with a control run under `full-access`, so every
//! refusal they assert is one the sandbox made, not one the host would have made anyway.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    bind, connect, listen, sendmsg, sendto, socket, socketpair, AddressFamily, Backlog, MsgFlags,
    SockFlag, SockProtocol, SockType, SockaddrIn, UnixAddr,
};

type Res = Result<(), Errno>;

fn sock(family: AddressFamily, kind: SockType) -> Result<OwnedFd, Errno> {
    socket(family, kind, SockFlag::SOCK_CLOEXEC, None)
}

fn raw(ret: libc::c_long) -> Res {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

fn errno_of(e: std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

fn num<T: std::str::FromStr>(s: &str) -> Result<T, Errno> {
    s.parse().map_err(|_| Errno::EINVAL)
}

/// The other side of a race: a thread that runs a step over and over until stopped,
/// counting the steps that did what they tried.
struct Racer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    handle: std::thread::JoinHandle<()>,
}

impl Racer {
    fn start(mut step: impl FnMut() -> bool + Send + 'static) -> Racer {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let done = std::sync::Arc::new(AtomicUsize::new(0));
        let handle = {
            let (stop, done) = (stop.clone(), done.clone());
            std::thread::spawn(move || {
                while !stop.load(Relaxed) {
                    if step() {
                        done.fetch_add(1, Relaxed);
                    }
                }
            })
        };
        Racer { stop, done, handle }
    }

    /// Keeps rewriting the `T` at `ptr` (memory leaked for the purpose) with `a`, then
    /// `b`, and so on.
    fn flip<T: Copy + Send + 'static>(ptr: usize, a: T, b: T) -> Racer {
        let mut flip = false;
        Racer::start(move || {
            let src = if flip { a } else { b };
            unsafe { std::ptr::write_volatile(ptr as *mut T, src) };
            flip = !flip;
            true
        })
    }

    /// Keeps exchanging the names `a` and `b`.
    fn exchange(a: &'static std::ffi::CStr, b: &'static std::ffi::CStr) -> Racer {
        Racer::start(move || exchange(a, b) == 0)
    }

    fn done(&self) -> usize {
        self.done.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until the race is really on: `n` steps done.
    fn running(&self, n: usize) {
        while self.done() < n {
            std::thread::yield_now();
        }
    }

    /// Stops the thread; returns how many steps it did.
    fn finish(self) -> usize {
        let Racer { stop, done, handle } = self;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = handle.join();
        done.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// `renameat2(a, b, RENAME_EXCHANGE)` from the cwd.
fn exchange(a: &std::ffi::CStr, b: &std::ffi::CStr) -> libc::c_long {
    unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    }
}

mod files;
mod processes;
mod races;
mod sockets_and_kernel;

/// Performs `op` with the module that knows it.
fn run(op: &str, args: &[String]) -> Res {
    let modules: [fn(&str, &[String]) -> Res; 4] = [
        sockets_and_kernel::run,
        files::run,
        processes::run,
        races::run,
    ];
    for run in modules {
        match run(op, args) {
            Err(Errno::UnknownErrno) => {}
            done => return done,
        }
    }
    eprintln!("probe: unknown operation {op}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(op) = args.first() else {
        eprintln!("usage: probe OPERATION [ARGS...]");
        std::process::exit(2)
    };
    match run(op, &args[1..]) {
        Ok(()) => println!("ok"),
        Err(e) => println!("err:{e:?}"),
    }
}
