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

fn run(op: &str, args: &[String]) -> Res {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    match op {
        "tcp-connect" => {
            let addr: std::net::SocketAddrV4 = arg(0).parse().map_err(|_| Errno::EINVAL)?;
            let s = sock(AddressFamily::Inet, SockType::Stream)?;
            connect(s.as_raw_fd(), &SockaddrIn::from(addr))
        }
        "tcp-bind" => {
            let s = sock(AddressFamily::Inet, SockType::Stream)?;
            bind(s.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0))
        }
        "udp-send" => {
            let addr: std::net::SocketAddrV4 = arg(0).parse().map_err(|_| Errno::EINVAL)?;
            let s = sock(AddressFamily::Inet, SockType::Datagram)?;
            sendto(
                s.as_raw_fd(),
                b"x",
                &SockaddrIn::from(addr),
                MsgFlags::empty(),
            )
            .map(drop)
        }
        "raw-socket" => sock(AddressFamily::Inet, SockType::Raw).map(drop),
        "packet-socket" => sock(AddressFamily::Packet, SockType::Raw).map(drop),
        "netlink-socket" => socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::empty(),
            SockProtocol::NetlinkRoute,
        )
        .map(drop),
        "inet6-socket" => sock(AddressFamily::Inet6, SockType::Stream).map(drop),
        "unix-connect" => {
            let s = sock(AddressFamily::Unix, SockType::Stream)?;
            connect(s.as_raw_fd(), &UnixAddr::new(arg(0).as_str())?)
        }
        "unix-connect-abstract" => {
            let s = sock(AddressFamily::Unix, SockType::Stream)?;
            connect(s.as_raw_fd(), &UnixAddr::new_abstract(arg(0).as_bytes())?)
        }
        "unix-dgram-sendto" => {
            let s = sock(AddressFamily::Unix, SockType::Datagram)?;
            sendto(
                s.as_raw_fd(),
                b"x",
                &UnixAddr::new(arg(0).as_str())?,
                MsgFlags::empty(),
            )
            .map(drop)
        }
        "unix-dgram-sendmsg" => {
            let s = sock(AddressFamily::Unix, SockType::Datagram)?;
            let iov = [std::io::IoSlice::new(b"x")];
            let addr = UnixAddr::new(arg(0).as_str())?;
            sendmsg(s.as_raw_fd(), &iov, &[], MsgFlags::empty(), Some(&addr)).map(drop)
        }
        "socketpair-dgram-sendto" => {
            let (a, _b) = socketpair(
                AddressFamily::Unix,
                SockType::Datagram,
                None,
                SockFlag::empty(),
            )?;
            sendto(
                a.as_raw_fd(),
                b"x",
                &UnixAddr::new(arg(0).as_str())?,
                MsgFlags::empty(),
            )
            .map(drop)
        }
        "socketpair-stream" => {
            let (a, b) = socketpair(
                AddressFamily::Unix,
                SockType::Stream,
                None,
                SockFlag::empty(),
            )?;
            nix::unistd::write(&a, b"ping")?;
            let mut buf = [0u8; 4];
            nix::unistd::read(&b, &mut buf)?;
            if &buf == b"ping" {
                Ok(())
            } else {
                Err(Errno::EIO)
            }
        }
        "unix-listen-connect" => {
            // Bind a listener at PATH, connect to it by PATH (relative or not), accept.
            let l = sock(AddressFamily::Unix, SockType::Stream)?;
            bind(l.as_raw_fd(), &UnixAddr::new(arg(0).as_str())?)?;
            listen(&l, Backlog::new(1)?)?;
            let c = sock(AddressFamily::Unix, SockType::Stream)?;
            connect(c.as_raw_fd(), &UnixAddr::new(arg(1).as_str())?)?;
            nix::sys::socket::accept(&l).map(drop)
        }
        "ptrace-attach" => {
            let pid: i32 = arg(0).parse().map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) })?;
            // Wait for the attach stop before detaching, or the tracee stays stopped.
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(pid),
                Some(nix::sys::wait::WaitPidFlag::__WALL),
            );
            raw(unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) })
        }
        "ptrace-parent" => run("ptrace-attach", &[nix::unistd::getppid().to_string()]),
        "kill" => {
            let pid: i32 = arg(0).parse().map_err(|_| Errno::EINVAL)?;
            let sig: i32 = arg(1).parse().map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::kill(pid, sig) }.into())
        }
        "kill-parent" => run("kill", &[nix::unistd::getppid().to_string(), "0".into()]),
        "process-vm-read-parent" => {
            let mut buf = [0u8; 8];
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: 8,
            };
            let remote = libc::iovec {
                iov_base: 0x400000 as *mut libc::c_void,
                iov_len: 8,
            };
            let ppid = nix::unistd::getppid().as_raw();
            let ret = unsafe { libc::process_vm_readv(ppid, &local, 1, &remote, 1, 0) };
            // EFAULT means the call was allowed (the address just isn't mapped).
            match raw(ret as libc::c_long) {
                Err(Errno::EFAULT) => Ok(()),
                other => other,
            }
        }
        "io-uring" => {
            let mut params = [0u8; 120];
            raw(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr()) })
        }
        "unshare-user" => raw(unsafe { libc::unshare(libc::CLONE_NEWUSER) }.into()),
        "unshare-mount" => raw(unsafe { libc::unshare(libc::CLONE_NEWNS) }.into()),
        "clone-newuser" => {
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_clone,
                    (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
                    0,
                    0,
                    0,
                    0,
                )
            };
            if ret == 0 {
                unsafe { libc::_exit(0) };
            }
            if ret > 0 {
                let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(ret as i32), None);
            }
            raw(ret)
        }
        "clone3" => {
            let ret = unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) };
            raw(ret)
        }
        "mount" => {
            let target = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe {
                libc::mount(
                    c"none".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            }
            .into())
        }
        "bpf" => {
            // BPF_MAP_CREATE of a 1-entry array map.
            let mut attr = [0u32; 30];
            attr[0] = 2; // BPF_MAP_TYPE_ARRAY
            attr[1] = 4;
            attr[2] = 4;
            attr[3] = 1;
            raw(unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    0,
                    attr.as_ptr(),
                    std::mem::size_of_val(&attr),
                )
            })
        }
        "keyctl" => {
            // KEYCTL_GET_KEYRING_ID (0) of the session keyring (-3), creating it if needed.
            raw(unsafe { libc::syscall(libc::SYS_keyctl, 0, -3i32, 1) })
        }
        // userfaultfd(UFFD_USER_MODE_ONLY | O_CLOEXEC): allowed to every user by default.
        "userfaultfd" => raw(unsafe { libc::syscall(libc::SYS_userfaultfd, 1 | libc::O_CLOEXEC) }),
        // The same through /dev/userfaultfd's USERFAULTFD_IOC_NEW, without the system call.
        "userfaultfd-dev" => {
            let dev = std::fs::File::open("/dev/userfaultfd")
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
            raw(unsafe { libc::ioctl(dev.as_raw_fd(), 0xAA00, libc::O_CLOEXEC) }.into())
        }
        "perf-event-open" => {
            let mut attr = [0u8; 128];
            attr[4..8].copy_from_slice(&128u32.to_ne_bytes());
            raw(unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0) })
        }
        "tiocsti" => {
            let c = b'#';
            raw(unsafe { libc::ioctl(0, libc::TIOCSTI, &c) }.into())
        }
        "x32-getpid" => raw(unsafe { libc::syscall(39 | 0x4000_0000) }),
        "mknod" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::mknod(path.as_ptr(), libc::S_IFIFO | 0o644, 0) }.into())
        }
        // One filesystem syscall each, so a test can expect exactly one marker.
        "write" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) }.into())
        }
        "create" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                    0o644,
                )
            }
            .into())
        }
        "remove" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::unlink(path.as_ptr()) }.into())
        }
        "rename" => {
            let (a, b) = (
                CString::new(arg(0)).map_err(|_| Errno::EINVAL)?,
                CString::new(arg(1)).map_err(|_| Errno::EINVAL)?,
            );
            raw(unsafe { libc::rename(a.as_ptr(), b.as_ptr()) }.into())
        }
        "link" => {
            let (a, b) = (
                CString::new(arg(0)).map_err(|_| Errno::EINVAL)?,
                CString::new(arg(1)).map_err(|_| Errno::EINVAL)?,
            );
            raw(unsafe { libc::link(a.as_ptr(), b.as_ptr()) }.into())
        }
        "chmod" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::chmod(path.as_ptr(), 0o600) }.into())
        }
        "chown" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::chown(path.as_ptr(), libc::geteuid(), libc::getegid()) }.into())
        }
        "utime" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::utime(path.as_ptr(), std::ptr::null()) }.into())
        }
        // removexattrat(2) (Linux 6.13), which the libc crate does not name yet.
        "removexattrat" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe {
                libc::syscall(
                    466,
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    0,
                    c"user.sandgate".as_ptr(),
                )
            })
        }
        "truncate" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::truncate(path.as_ptr(), 0) }.into())
        }
        "mkdir" => {
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::mkdir(path.as_ptr(), 0o755) }.into())
        }
        "threads-write" => {
            // N threads × M refused writes of distinct files under DIR.
            let (dir, threads, each): (String, usize, usize) = (
                arg(0),
                arg(1).parse().unwrap_or(1),
                arg(2).parse().unwrap_or(1),
            );
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let dir = dir.clone();
                    std::thread::spawn(move || {
                        for i in 0..each {
                            let _ = std::fs::write(format!("{dir}/t{t}-{i}"), b"x");
                        }
                    })
                })
                .collect();
            for h in handles {
                let _ = h.join();
            }
            Ok(())
        }
        "connect-race" => {
            // Connect N times through one sockaddr buffer that another thread keeps
            // rewriting between INSIDE and OUTSIDE (the TOCTOU a supervisor that answered
            // CONTINUE would lose). Prints how many connects succeeded.
            let (inside, outside, n): (String, String, usize) =
                (arg(0), arg(1), arg(2).parse().unwrap_or(100));
            let make = |p: &str| {
                let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
                addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
                for (d, b) in addr.sun_path.iter_mut().zip(p.bytes()) {
                    *d = b as libc::c_char;
                }
                addr
            };
            let (a, b) = (make(&inside), make(&outside));
            let shared: &'static mut libc::sockaddr_un = Box::leak(Box::new(a));
            let ptr = shared as *mut libc::sockaddr_un as usize;
            let flipper = Racer::flip(ptr, a, b);
            flipper.running(10_000);
            let mut ok = 0;
            for _ in 0..n {
                let s = sock(AddressFamily::Unix, SockType::Stream)?;
                let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
                if unsafe { libc::connect(s.as_raw_fd(), ptr as *const libc::sockaddr, len) } == 0 {
                    ok += 1;
                }
            }
            flipper.finish();
            println!("connected {ok}");
            Ok(())
        }
        "connect-symlink-race" => {
            // Connect N times through LINK while another thread keeps re-pointing it between
            // INSIDE and OUTSIDE.
            let (link, inside, outside, n): (String, String, String, usize) =
                (arg(0), arg(1), arg(2), arg(3).parse().unwrap_or(100));
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flipper = {
                let (stop, link) = (stop.clone(), link.clone());
                std::thread::spawn(move || {
                    let tmp = format!("{link}.tmp");
                    let mut flip = false;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let _ = std::fs::remove_file(&tmp);
                        let _ =
                            std::os::unix::fs::symlink(if flip { &inside } else { &outside }, &tmp);
                        let _ = std::fs::rename(&tmp, &link);
                        flip = !flip;
                    }
                })
            };
            let mut ok = 0;
            for _ in 0..n {
                let s = sock(AddressFamily::Unix, SockType::Stream)?;
                if let Ok(addr) = UnixAddr::new(link.as_str()) {
                    if connect(s.as_raw_fd(), &addr).is_ok() {
                        ok += 1;
                    }
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = flipper.join();
            println!("connected {ok}");
            Ok(())
        }
        // Process control: each names another process (or the caller by 0).
        "prlimit-nofile" => {
            let (pid, n): (i32, u64) = (num(&arg(0))?, num(&arg(1))?);
            let limit = libc::rlimit64 {
                rlim_cur: n,
                rlim_max: n,
            };
            raw(unsafe {
                libc::syscall(
                    libc::SYS_prlimit64,
                    pid,
                    libc::RLIMIT_NOFILE,
                    &limit,
                    std::ptr::null_mut::<libc::rlimit64>(),
                )
            })
        }
        "setpriority" => {
            let (which, who, prio): (i32, i32, i32) = (num(&arg(0))?, num(&arg(1))?, num(&arg(2))?);
            raw(unsafe { libc::syscall(libc::SYS_setpriority, which, who, prio) })
        }
        "sched-setaffinity" => {
            let (pid, cpu): (i32, usize) = (num(&arg(0))?, num(&arg(1))?);
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            unsafe { libc::CPU_SET(cpu, &mut set) };
            raw(unsafe { libc::sched_setaffinity(pid, std::mem::size_of_val(&set), &set) }.into())
        }
        "ioprio-set" => {
            // IOPRIO_CLASS_BE (2) at level 7.
            let (which, who): (i32, i32) = (num(&arg(0))?, num(&arg(1))?);
            raw(unsafe { libc::syscall(libc::SYS_ioprio_set, which, who, (2 << 13) | 7) })
        }
        "own-limits-and-priorities" => {
            // The same calls on the caller itself, by 0, must keep working.
            let mut limit = libc::rlimit64 {
                rlim_cur: 0,
                rlim_max: 0,
            };
            raw(unsafe {
                libc::syscall(
                    libc::SYS_prlimit64,
                    0,
                    libc::RLIMIT_NOFILE,
                    std::ptr::null::<libc::rlimit64>(),
                    &mut limit,
                )
            })?;
            limit.rlim_cur = limit.rlim_cur.min(64);
            raw(unsafe {
                libc::syscall(
                    libc::SYS_prlimit64,
                    0,
                    libc::RLIMIT_NOFILE,
                    &limit,
                    std::ptr::null_mut::<libc::rlimit64>(),
                )
            })?;
            raw(unsafe { libc::syscall(libc::SYS_setpriority, libc::PRIO_PROCESS, 0, 5) })?;
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of_val(&set);
            raw(unsafe { libc::sched_getaffinity(0, size, &mut set) }.into())?;
            raw(unsafe { libc::sched_setaffinity(0, size, &set) }.into())?;
            raw(unsafe { libc::syscall(libc::SYS_ioprio_set, 1, 0, (2 << 13) | 7) })?;
            let param = libc::sched_param { sched_priority: 0 };
            raw(unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) }.into())
        }
        // Signals by every call that sends one: landlock's signal scope must cover each.
        "tkill" => {
            let (pid, sig): (i32, i32) = (num(&arg(0))?, num(&arg(1))?);
            raw(unsafe { libc::syscall(libc::SYS_tkill, pid, sig) })
        }
        "tgkill" => {
            let (pid, sig): (i32, i32) = (num(&arg(0))?, num(&arg(1))?);
            raw(unsafe { libc::syscall(libc::SYS_tgkill, pid, pid, sig) })
        }
        "sigqueue" => {
            let (pid, sig): (i32, i32) = (num(&arg(0))?, num(&arg(1))?);
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            info.si_signo = sig;
            info.si_code = libc::SI_QUEUE;
            raw(unsafe { libc::syscall(libc::SYS_rt_sigqueueinfo, pid, sig, &info) })
        }
        "tgsigqueue" => {
            let (pid, sig): (i32, i32) = (num(&arg(0))?, num(&arg(1))?);
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            info.si_signo = sig;
            info.si_code = libc::SI_QUEUE;
            raw(unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, pid, sig, &info) })
        }
        "pidfd-signal" => {
            let (pid, sig): (i32, i32) = (num(&arg(0))?, num(&arg(1))?);
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            raw(fd)?;
            raw(unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd as i32,
                    sig,
                    std::ptr::null::<u8>(),
                    0,
                )
            })
        }
        // A signal through a pidfd the caller handed in (a `/proc/PID` directory fd counts
        // as one): a PID namespace hides the process's number, not the process.
        "pidfd-signal-fd" => {
            let (fd, sig): (i32, i32) = (num(&arg(0))?, num(&arg(1))?);
            raw(unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd,
                    sig,
                    std::ptr::null::<u8>(),
                    0,
                )
            })
        }
        "read-lease-hold" => {
            // A read lease on FILE (SIGIO ignored, so a lease break does not end the holder),
            // then `held` on stdout and a wait of SECONDS: a host open for writing waits
            // for the lease (or fails with EWOULDBLOCK when non-blocking) meanwhile.
            let file = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let secs: u64 = num(&arg(1))?;
            unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
            let fd = unsafe { libc::open(file.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            raw(fd.into())?;
            raw(unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) }.into())?;
            println!("held");
            std::thread::sleep(std::time::Duration::from_secs(secs));
            Ok(())
        }
        "sigio" => {
            // SIGIO to PID through F_SETOWN on an O_ASYNC pipe (its default action kills).
            let pid: i32 = num(&arg(0))?;
            let (r, w) = nix::unistd::pipe()?;
            raw(unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETOWN, pid) }.into())?;
            raw(unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_ASYNC) }.into())?;
            nix::unistd::write(&w, b"x").map(drop)
        }
        // Terminal requests on /dev/null: the kernel says ENOTTY, a filter EPERM before it
        // looks at the fd.
        "ioctl-null" => {
            let request = u64::from_str_radix(arg(0).trim_start_matches("0x"), 16)
                .map_err(|_| Errno::EINVAL)?;
            let null = std::fs::File::open("/dev/null").map_err(|_| Errno::EIO)?;
            let mut buf = [0u8; 256];
            raw(unsafe { libc::ioctl(null.as_raw_fd(), request as _, buf.as_mut_ptr()) }.into())
        }
        "tcsetpgrp-later" => {
            // A process left in the background: its own group, SIGTTOU ignored, then after
            // DELAY ms it tries to make its group the terminal's foreground.
            let delay: u64 = num(&arg(0))?;
            let tty = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/tty")
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)))?;
            unsafe { libc::signal(libc::SIGTTOU, libc::SIG_IGN) };
            nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))?;
            std::thread::sleep(std::time::Duration::from_millis(delay));
            let pgrp = nix::unistd::getpgrp();
            let result = nix::unistd::tcsetpgrp(&tty, pgrp);
            println!(
                "tcsetpgrp {pgrp} {}",
                result.map_or_else(|e| format!("err:{e:?}"), |()| "ok".into())
            );
            result
        }
        "tiocsctty-steal" => {
            // Become a session leader, then take the terminal on stdin (force, as root can).
            nix::unistd::setsid()?;
            raw(unsafe { libc::ioctl(0, libc::TIOCSCTTY, 1) }.into())
        }
        "euid" => {
            println!("{}", nix::unistd::geteuid());
            Ok(())
        }
        "setpgid" => {
            // Join the existing process group PGID.
            let pgid: i32 = arg(0).parse().map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::setpgid(0, pgid) }.into())
        }
        "detach-and-read" => {
            // Give up the controlling terminal (setsid, else TIOCNOTTY), then read the
            // terminal on stdin for MILLIS: job control no longer stops the reads.
            unsafe { libc::signal(libc::SIGTTIN, libc::SIG_IGN) };
            let setsid = nix::unistd::setsid().map(drop);
            let notty = raw(unsafe { libc::ioctl(0, libc::TIOCNOTTY) }.into());
            let shown = |r: &Res| r.map_or_else(|e| format!("err:{e:?}"), |()| "ok".into());
            println!("setsid {} notty {}", shown(&setsid), shown(&notty));
            let until = std::time::Instant::now()
                + std::time::Duration::from_millis(arg(0).parse().unwrap_or(2000));
            let mut buf = [0u8; 256];
            while std::time::Instant::now() < until {
                match nix::unistd::read(std::io::stdin(), &mut buf) {
                    Ok(n) if n > 0 => println!("stolen:{}", String::from_utf8_lossy(&buf[..n])),
                    _ => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
            setsid.and(notty)
        }
        "exchange-loop" => {
            // Swap A and B (a directory and a symlink, say) back and forth for MILLIS,
            // as a process left by an earlier call racing sandgate's checks would.
            let (a, b) = (
                CString::new(arg(0)).map_err(|_| Errno::EINVAL)?,
                CString::new(arg(1)).map_err(|_| Errno::EINVAL)?,
            );
            let until = std::time::Instant::now()
                + std::time::Duration::from_millis(arg(2).parse().unwrap_or(1000));
            while std::time::Instant::now() < until {
                raw(exchange(&a, &b))?;
            }
            Ok(())
        }
        "exchange-many" => {
            // In DIR, N directories dI and N symlinks lI -> TARGET, each pair swapped back
            // and forth (errors ignored) for MILLIS, a new file added each round: a
            // directory tree that a remover walking it by name finds changing under it.
            let (dir, target) = (arg(0), arg(2));
            let n: usize = num(&arg(1))?;
            std::fs::create_dir_all(&dir).map_err(|_| Errno::EIO)?;
            let pair = |i: usize| -> Result<(CString, CString), Errno> {
                let d = CString::new(format!("{dir}/d{i}")).map_err(|_| Errno::EINVAL)?;
                let l = CString::new(format!("{dir}/l{i}")).map_err(|_| Errno::EINVAL)?;
                Ok((d, l))
            };
            let pairs = (0..n).map(pair).collect::<Result<Vec<_>, _>>()?;
            for (d, l) in &pairs {
                let _ = nix::unistd::mkdir(
                    d.as_c_str(),
                    nix::sys::stat::Mode::from_bits_truncate(0o755),
                );
                let _ = std::os::unix::fs::symlink(&target, l.to_string_lossy().as_ref());
            }
            let until = std::time::Instant::now()
                + std::time::Duration::from_millis(arg(3).parse().unwrap_or(1000));
            let mut round = 0u64;
            while std::time::Instant::now() < until {
                for (d, l) in &pairs {
                    let _ = raw(unsafe {
                        libc::syscall(
                            libc::SYS_renameat2,
                            libc::AT_FDCWD,
                            d.as_ptr(),
                            libc::AT_FDCWD,
                            l.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    });
                }
                round += 1;
                let _ = std::fs::write(format!("{dir}/f{}", round % 64), "");
            }
            Ok(())
        }
        "mq-create" => {
            // Create the POSIX message queue NAME ("/name") holding one message.
            let name = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let q = unsafe {
                libc::mq_open(
                    name.as_ptr(),
                    libc::O_CREAT | libc::O_RDWR,
                    0o644,
                    std::ptr::null_mut::<libc::mq_attr>(),
                )
            };
            if q == -1 {
                return Err(Errno::last());
            }
            raw(unsafe { libc::mq_send(q, c"host-secret".as_ptr(), 11, 0) }.into())
        }
        "unix-bind-abstract" => {
            // Bind NAME in the abstract namespace, say so, and hold it for MILLIS.
            let l = sock(AddressFamily::Unix, SockType::Stream)?;
            bind(l.as_raw_fd(), &UnixAddr::new_abstract(arg(0).as_bytes())?)?;
            listen(&l, Backlog::new(1)?)?;
            println!("bound");
            std::thread::sleep(std::time::Duration::from_millis(
                arg(1).parse().unwrap_or(500),
            ));
            Ok(())
        }
        "sysv-shm-write" => {
            let id: i32 = arg(0).parse().map_err(|_| Errno::EINVAL)?;
            let at = unsafe { libc::shmat(id, std::ptr::null(), 0) };
            if at as isize == -1 {
                return Err(Errno::last());
            }
            unsafe { *at.cast::<u8>() = b'X' };
            raw(unsafe { libc::shmdt(at) }.into())
        }
        "sysv-shm-remove" => {
            let id: i32 = arg(0).parse().map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) }.into())
        }
        "symlink" => {
            let (a, b) = (
                CString::new(arg(0)).map_err(|_| Errno::EINVAL)?,
                CString::new(arg(1)).map_err(|_| Errno::EINVAL)?,
            );
            raw(unsafe { libc::symlink(a.as_ptr(), b.as_ptr()) }.into())
        }
        "git-race" => {
            // N rounds of creating, renaming and linking git-metadata names through `d`
            // (which another thread keeps exchanging with `dl`, a symlink to `.git`) and
            // through path buffers a third thread keeps flipping between `ok/NAME` and
            // `.git/NAME`. After each round, counts the names that exist in the real `.git`.
            const NAMES: [&str; 4] = ["commondir", "gitdir", "info/attributes", "hooks/pre-commit"];
            let n: usize = arg(0).parse().unwrap_or(2000);
            let fill = |p: String| {
                let mut buf = [0u8; 64];
                buf[..p.len()].copy_from_slice(p.as_bytes());
                buf
            };
            let benign: Vec<[u8; 64]> = NAMES.iter().map(|m| fill(format!("ok/{m}"))).collect();
            let evil: Vec<[u8; 64]> = NAMES.iter().map(|m| fill(format!(".git/{m}"))).collect();
            let shared: &'static mut [[u8; 64]; 4] = Box::leak(Box::new([[0u8; 64]; 4]));
            shared.copy_from_slice(&benign);
            let ptr = shared.as_mut_ptr() as usize;
            let (evil, benign): ([[u8; 64]; 4], [[u8; 64]; 4]) = (
                std::array::from_fn(|k| evil[k]),
                std::array::from_fn(|k| benign[k]),
            );
            let swapper = Racer::exchange(c"d", c"dl");
            let flipper = Racer::flip(ptr, evil, benign);
            // Start only once both threads are really racing.
            swapper.running(100);
            flipper.running(10_000);
            let (mut landed, mut breaches) = (0usize, 0usize);
            let mut count = |ret: libc::c_int| {
                if ret >= 0 {
                    landed += 1;
                }
                ret
            };
            for _ in 0..n {
                for (k, name) in NAMES.iter().enumerate() {
                    let via_d = CString::new(format!("d/{name}")).map_err(|_| Errno::EINVAL)?;
                    let via_buf = unsafe { (ptr as *const [u8; 64]).add(k) }.cast::<libc::c_char>();
                    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC;
                    for path in [via_d.as_ptr(), via_buf] {
                        let fd = count(unsafe { libc::open(path, flags, 0o755) });
                        if fd >= 0 {
                            unsafe { libc::close(fd) };
                        }
                        let _ = std::fs::write("r", "#!/bin/sh\n");
                        count(unsafe { libc::rename(c"r".as_ptr(), path) });
                        count(unsafe { libc::link(c"src".as_ptr(), path) });
                        count(unsafe { libc::symlink(c"src".as_ptr(), path) });
                    }
                }
                for name in NAMES {
                    if std::fs::symlink_metadata(format!(".git/{name}")).is_ok() {
                        breaches += 1;
                    }
                }
            }
            println!(
                "swaps {} flips {} landed {landed} breaches {breaches}",
                swapper.finish(),
                flipper.finish()
            );
            Ok(())
        }
        // Forks children that wait on a pipe until the kernel refuses one or MAX are
        // running; prints how many, then lets them all exit and reaps them.
        "fork-until-refused" => {
            let max: usize = num(&arg(0))?;
            let (r, w) = nix::unistd::pipe()?;
            let mut children = Vec::new();
            let mut refused = Ok(());
            while children.len() < max {
                match unsafe { nix::unistd::fork() } {
                    Ok(nix::unistd::ForkResult::Child) => {
                        drop(w);
                        let mut buf = [0u8; 1];
                        let _ = nix::unistd::read(&r, &mut buf);
                        unsafe { libc::_exit(0) }
                    }
                    Ok(nix::unistd::ForkResult::Parent { child }) => children.push(child),
                    Err(e) => {
                        refused = Err(e);
                        break;
                    }
                }
            }
            println!("forked {}", children.len());
            drop(w);
            for child in children {
                let _ = nix::sys::wait::waitpid(child, None);
            }
            refused
        }
        // Writes to a new file at PATH until the filesystem refuses; prints how much.
        "fill" => {
            use std::io::Write;
            let mut file = std::fs::File::create(arg(0)).map_err(errno_of)?;
            let chunk = vec![b'x'; 64 << 10];
            let mut written = 0usize;
            let refused = loop {
                match file.write(&chunk) {
                    Ok(n) => written += n,
                    Err(e) => break errno_of(e),
                }
            };
            println!("wrote {written}");
            Err(refused)
        }
        // Creates up to N empty files in DIR until the filesystem refuses; prints how many.
        "create-files" => {
            let max: usize = num(&arg(1))?;
            let mut made = 0;
            let mut refused = Ok(());
            while made < max {
                match std::fs::File::create(format!("{}/f{made}", arg(0))) {
                    Ok(_) => made += 1,
                    Err(e) => {
                        refused = Err(errno_of(e));
                        break;
                    }
                }
            }
            println!("created {made}");
            refused
        }
        // Allocates MIB mebibytes and writes every page of them.
        "touch-memory" => {
            let mib: usize = num(&arg(0))?;
            let mut chunks: Vec<Vec<u8>> = Vec::new();
            for _ in 0..mib {
                let mut chunk = vec![0u8; 1 << 20];
                for page in chunk.chunks_mut(4096) {
                    page[0] = 1;
                }
                chunks.push(chunk);
            }
            println!("touched {}", chunks.len());
            Ok(())
        }
        "flip-open" | "flip-rename" => {
            // N rounds, while another thread flips one path buffer between DIR/cfg and
            // DIR/config, of writing attacker configuration through it: opened with
            // O_CREAT|O_WRONLY|O_TRUNC and written ("flip-open"), or written to DIR/src and
            // renamed onto it ("flip-rename"). Prints how many calls succeeded.
            const EVIL: &[u8] = b"[core]\n\tfsmonitor = \"touch /tmp/sandgate-pwned\"\n";
            let (dir, n): (String, usize) = (arg(0), arg(1).parse().unwrap_or(1000));
            let fill = |p: String| {
                let mut buf = [0u8; 256];
                let len = p.len().min(255);
                buf[..len].copy_from_slice(&p.as_bytes()[..len]);
                buf
            };
            let (benign, evil) = (fill(format!("{dir}/cfg")), fill(format!("{dir}/config")));
            let shared: &'static mut [u8; 256] = Box::leak(Box::new(benign));
            let ptr = shared.as_mut_ptr() as usize;
            let flipper = Racer::flip(ptr, evil, benign);
            flipper.running(10_000);
            let src = CString::new(format!("{dir}/src")).map_err(|_| Errno::EINVAL)?;
            let mut done = 0usize;
            for _ in 0..n {
                let path = ptr as *const libc::c_char;
                if op == "flip-open" {
                    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
                    let fd = unsafe { libc::open(path, flags, 0o644) };
                    if fd >= 0 {
                        done += 1;
                        unsafe { libc::write(fd, EVIL.as_ptr().cast(), EVIL.len()) };
                        unsafe { libc::close(fd) };
                    }
                } else {
                    let _ = std::fs::write(src.to_string_lossy().as_ref(), EVIL);
                    if unsafe { libc::rename(src.as_ptr(), path) } == 0 {
                        done += 1;
                    }
                }
            }
            println!("flips {} done {done}", flipper.finish());
            Ok(())
        }
        "swap-race" => {
            // N rounds, while another thread keeps exchanging `d` (a directory) with `dl` (a
            // symlink to `g`), of planting through `d`: an executable `d/hooks/x` created,
            // `d/hooks/y` made executable, attacker configuration renamed onto `d/config`.
            let n: usize = arg(0).parse().unwrap_or(1000);
            let swapper = Racer::exchange(c"d", c"dl");
            swapper.running(50);
            let mut done = 0usize;
            for _ in 0..n {
                let fd = unsafe {
                    libc::open(
                        c"d/hooks/x".as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                        0o755,
                    )
                };
                if fd >= 0 {
                    unsafe { libc::close(fd) };
                }
                if unsafe { libc::chmod(c"d/hooks/y".as_ptr(), 0o755) } == 0 {
                    done += 1;
                }
                let _ = std::fs::write("src", "[core]\n\tpager = touch /tmp/sandgate-pwned\n");
                if unsafe { libc::rename(c"src".as_ptr(), c"d/config".as_ptr()) } == 0 {
                    done += 1;
                }
            }
            println!("swaps {} done {done}", swapper.finish());
            Ok(())
        }
        "tmpfile-link" => {
            // An O_TMPFILE file (mode MODE) made in DIR and given the name NAME, through
            // linkat(AT_EMPTY_PATH) ("empty") or its /proc/self/fd link ("proc").
            let dir = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let name = CString::new(arg(1)).map_err(|_| Errno::EINVAL)?;
            let mode = u32::from_str_radix(&arg(3), 8).unwrap_or(0o644);
            let fd = unsafe { libc::open(dir.as_ptr(), libc::O_TMPFILE | libc::O_RDWR, mode) };
            if fd < 0 {
                return Err(Errno::last());
            }
            unsafe { libc::write(fd, c"#!/bin/sh\n".as_ptr().cast(), 10) };
            let ret = if arg(2) == "proc" {
                let via = CString::new(format!("/proc/self/fd/{fd}")).map_err(|_| Errno::EINVAL)?;
                unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        via.as_ptr(),
                        libc::AT_FDCWD,
                        name.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                }
            } else {
                unsafe {
                    libc::linkat(
                        fd,
                        c"".as_ptr(),
                        libc::AT_FDCWD,
                        name.as_ptr(),
                        libc::AT_EMPTY_PATH,
                    )
                }
            };
            raw(ret.into())
        }
        "reopen" => {
            // PATH opened for reading, then its /proc/self/fd link opened for writing.
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            raw(fd.into())?;
            let via = CString::new(format!("/proc/self/fd/{fd}")).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::open(via.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) }.into())
        }
        "chmod-to" => {
            // chmod(PATH, MODE), MODE in octal.
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let mode = u32::from_str_radix(&arg(1), 8).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::chmod(path.as_ptr(), mode) }.into())
        }
        "fchmod-to" => {
            // PATH opened for reading, then fchmod(fd, MODE).
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let mode = u32::from_str_radix(&arg(1), 8).map_err(|_| Errno::EINVAL)?;
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            raw(fd.into())?;
            raw(unsafe { libc::fchmod(fd, mode) }.into())
        }
        "acl-exec" => {
            // A POSIX access ACL on PATH that grants its owner execute (user::rwx,
            // group::r--, other::r--), as setfacl writes it.
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let mut acl = 2u32.to_le_bytes().to_vec();
            for (tag, perm) in [(0x01u16, 7u16), (0x04, 4), (0x20, 4)] {
                acl.extend_from_slice(&tag.to_le_bytes());
                acl.extend_from_slice(&perm.to_le_bytes());
                acl.extend_from_slice(&u32::MAX.to_le_bytes());
            }
            let name = c"system.posix_acl_access";
            raw(unsafe {
                libc::setxattr(
                    path.as_ptr(),
                    name.as_ptr(),
                    acl.as_ptr().cast(),
                    acl.len(),
                    0,
                )
            }
            .into())
        }
        "creat-race" => {
            // Red team: PATH opened with O_WRONLY|O_CREAT and mode 0755 over and over, for
            // at most N tries or SECS seconds, while another thread keeps making PATH a
            // directory and removing it. The supervisor decides on what it saw (a
            // directory: "opening it fails with EISDIR, let the kernel say so") and then
            // opens with the caller's O_CREAT and mode: if the directory went in between,
            // a fresh file with the caller's mode lands, execute bits included. A regular
            // file made with execute bits is a win: PAYLOAD is written into it and
            // "landed" printed; a file made without them is removed and tried again.
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let n: usize = arg(1).parse().unwrap_or(100_000);
            let secs: u64 = arg(2).parse().unwrap_or(5);
            let payload = arg(3).replace("\\n", "\n");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
            let racer = {
                let path = path.clone();
                Racer::start(move || {
                    let made = unsafe { libc::mkdir(path.as_ptr(), 0o755) } == 0;
                    unsafe { libc::rmdir(path.as_ptr()) };
                    made
                })
            };
            racer.running(10);
            let mut landed = false;
            for _ in 0..n {
                if std::time::Instant::now() > deadline {
                    break;
                }
                let fd = unsafe {
                    libc::open(
                        path.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                        0o755,
                    )
                };
                if fd < 0 {
                    continue;
                }
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                unsafe { libc::fstat(fd, &mut st) };
                let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
                if regular && st.st_mode & 0o111 != 0 {
                    unsafe { libc::write(fd, payload.as_ptr().cast(), payload.len()) };
                    unsafe { libc::close(fd) };
                    landed = true;
                    break;
                }
                unsafe { libc::close(fd) };
                if regular {
                    unsafe { libc::unlink(path.as_ptr()) };
                }
            }
            let steps = racer.finish();
            println!(
                "{} after {steps} racer steps",
                if landed { "landed" } else { "held" }
            );
            Ok(())
        }
        "exchange-until" => {
            // Red team: renameat2(A, B, RENAME_EXCHANGE) over and over until the file STOP
            // exists or SECS seconds passed; prints how many exchanges succeeded.
            let a = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let b = CString::new(arg(1)).map_err(|_| Errno::EINVAL)?;
            let stop = arg(2);
            let secs: u64 = arg(3).parse().unwrap_or(10);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
            let (mut tries, mut done) = (0usize, 0usize);
            while std::time::Instant::now() < deadline {
                for _ in 0..64 {
                    tries += 1;
                    if exchange(&a, &b) == 0 {
                        done += 1;
                    }
                }
                if std::path::Path::new(&stop).exists() {
                    break;
                }
            }
            println!("exchanges {done} of {tries}");
            Ok(())
        }
        "rename-until" => {
            // Red team: rename(FROM, TO) over and over, for at most N tries or SECS
            // seconds, until TO holds NEEDLE; prints "landed" or "held".
            let from = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let to = CString::new(arg(1)).map_err(|_| Errno::EINVAL)?;
            let n: usize = arg(2).parse().unwrap_or(100_000);
            let secs: u64 = arg(3).parse().unwrap_or(5);
            let needle = arg(4);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
            let mut landed = false;
            for _ in 0..n {
                if std::time::Instant::now() > deadline {
                    break;
                }
                unsafe { libc::rename(from.as_ptr(), to.as_ptr()) };
                if std::fs::read(arg(1))
                    .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
                {
                    landed = true;
                    break;
                }
            }
            println!("{}", if landed { "landed" } else { "held" });
            Ok(())
        }
        "create-mode" => {
            // PATH created (O_EXCL) with MODE under umask UMASK (octal); prints its mode.
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let mode = u32::from_str_radix(&arg(1), 8).map_err(|_| Errno::EINVAL)?;
            let umask = u32::from_str_radix(&arg(2), 8).map_err(|_| Errno::EINVAL)?;
            unsafe { libc::umask(umask) };
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
            raw(unsafe { libc::open(path.as_ptr(), flags, mode) }.into())?;
            let meta = std::fs::metadata(arg(0)).map_err(|_| Errno::EIO)?;
            use std::os::unix::fs::MetadataExt;
            println!("mode {:o} gid {}", meta.mode() & 0o7777, meta.gid());
            Ok(())
        }
        other => {
            eprintln!("probe: unknown operation {other}");
            std::process::exit(2)
        }
    }
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
