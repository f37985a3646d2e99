//! Processes: limits, priorities, signals, leases, the terminal, sessions, and IPC
//! objects.

use super::*;

/// Performs `op`; `UnknownErrno` when it is none of this module's.
pub fn run(op: &str, args: &[String]) -> Res {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    match op {
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
        "outrun" => {
            // Leaves, and says `ok`: one process named by bytes that are no UTF-8, asleep
            // for four times SECS, and CHAINS chains of processes that each fork and exit
            // at once for SECS, each link appending a byte to FILE (opened here, before the
            // call ends).
            let (secs, chains): (u64, usize) = (num(&arg(0))?, num(&arg(1))?);
            let file = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(arg(2))
                .map_err(|_| Errno::EIO)?;
            let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
            // As daemons do: nothing of the caller's output held.
            let detach = || {
                for fd in 0..3 {
                    unsafe { libc::close(fd) };
                }
            };
            if unsafe { libc::fork() } == 0 {
                detach();
                unsafe { libc::prctl(libc::PR_SET_NAME, c"\xff\xfe-hidden".as_ptr()) };
                std::thread::sleep(std::time::Duration::from_secs(4 * secs));
                unsafe { libc::_exit(0) };
            }
            for _ in 0..chains {
                if unsafe { libc::fork() } == 0 {
                    detach();
                    while std::time::Instant::now() < until {
                        if unsafe { libc::fork() } != 0 {
                            unsafe { libc::_exit(0) };
                        }
                        let _ = std::io::Write::write(&mut &file, b"x");
                    }
                    unsafe { libc::_exit(0) };
                }
            }
            Ok(())
        }
        "mq-unlink" => {
            let name = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            raw(unsafe { libc::mq_unlink(name.as_ptr()) }.into())
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
        _ => Err(Errno::UnknownErrno),
    }
}
