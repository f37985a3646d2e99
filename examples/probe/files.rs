//! Files and names: writes, creates, renames, links, modes and the connects that race a
//! name.

use super::*;

/// Performs `op`; `UnknownErrno` when it is none of this module's.
pub fn run(op: &str, args: &[String]) -> Res {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    match op {
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
        _ => Err(Errno::UnknownErrno),
    }
}
