//! Sockets, other processes, namespaces and kernel interfaces: the calls that would reach
//! past the sandbox.

use super::*;

/// Performs `op`; `UnknownErrno` when it is none of this module's.
pub fn run(op: &str, args: &[String]) -> Res {
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
        _ => Err(Errno::UnknownErrno),
    }
}
