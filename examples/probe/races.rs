//! Races and resources: names swapped while the supervisor looks, and what fills memory,
//! disk or the process table.

use super::*;

/// Performs `op`; `UnknownErrno` when it is none of this module's.
pub fn run(op: &str, args: &[String]) -> Res {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    match op {
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
        "leader-exits" => {
            // A child whose main thread exits while another thread of it runs on: after
            // MILLIS that thread creates FILE. Prints `started` at once.
            let (millis, file) = (num::<u64>(&arg(0))?, arg(1));
            match unsafe { libc::fork() } {
                -1 => Err(Errno::last()),
                0 => {
                    std::thread::spawn(move || {
                        std::thread::sleep(std::time::Duration::from_millis(millis));
                        let _ = std::fs::write(&file, "survived\n");
                        unsafe { libc::_exit(0) };
                    });
                    unsafe { libc::pthread_exit(std::ptr::null_mut()) }
                }
                _ => {
                    println!("started");
                    Ok(())
                }
            }
        }
        "opath-link" => {
            // SRC opened O_PATH (which landlock does not check), then given the name DST
            // through linkat(AT_EMPTY_PATH); what DST then reads is printed after `ok`.
            let src = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let dst = CString::new(arg(1)).map_err(|_| Errno::EINVAL)?;
            let fd = unsafe { libc::open(src.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
            raw(fd.into())?;
            raw(unsafe {
                libc::linkat(
                    fd,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    dst.as_ptr(),
                    libc::AT_EMPTY_PATH,
                )
            }
            .into())?;
            let read = std::fs::read_to_string(arg(1)).unwrap_or_default();
            println!("{}", read.trim());
            Ok(())
        }
        "setflags" => {
            // FS_IOC_SETFLAGS: PATH's inode flags with FS_NODUMP_FL added (chattr +d).
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            raw(fd.into())?;
            let mut flags: libc::c_long = 0;
            raw(unsafe { libc::ioctl(fd, 0x8008_6601, &mut flags) }.into())?;
            flags |= 0x40;
            raw(unsafe { libc::ioctl(fd, 0x4008_6602, &flags) }.into())
        }
        "bind-at" => {
            // A unix socket bound at PATH.
            let s = sock(AddressFamily::Unix, SockType::Stream)?;
            bind(s.as_raw_fd(), &UnixAddr::new(arg(0).as_str())?)
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
        "meta-race" => {
            // N rounds, while another thread keeps exchanging `f` (a file of the
            // workspace) with `fl` (a symlink to a file outside), of changing what `f`
            // names: mode, owner, times, an attribute removed, truncation. Prints how many
            // succeeded; the test looks at the outside file.
            let n: usize = arg(0).parse().unwrap_or(1000);
            let swapper = Racer::exchange(c"f", c"fl");
            swapper.running(50);
            let mut done = 0usize;
            for _ in 0..n {
                let p = c"f".as_ptr();
                let rets = unsafe {
                    [
                        libc::chmod(p, 0o600),
                        libc::chown(p, libc::geteuid(), libc::getegid()),
                        libc::utimensat(libc::AT_FDCWD, p, std::ptr::null(), 0),
                        libc::removexattr(p, c"user.sandgate".as_ptr()),
                        libc::truncate(p, 0),
                    ]
                };
                done += rets.iter().filter(|r| **r == 0).count();
            }
            println!("swaps {} done {done}", swapper.finish());
            Ok(())
        }
        "fd-meta" => {
            // PATH opened for reading, then its owner, times and an attribute changed
            // through that descriptor: fchown, futimens, fremovexattr, fchmod.
            let path = CString::new(arg(0)).map_err(|_| Errno::EINVAL)?;
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            raw(fd.into())?;
            raw(unsafe { libc::fchown(fd, libc::geteuid(), libc::getegid()) }.into())?;
            raw(unsafe { libc::futimens(fd, std::ptr::null()) }.into())?;
            match unsafe { libc::fremovexattr(fd, c"user.sandgate".as_ptr()) } {
                0 => {}
                _ if Errno::last() == Errno::ENODATA => {}
                _ => return Err(Errno::last()),
            }
            raw(unsafe { libc::fchmod(fd, 0o600) }.into())
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
        _ => Err(Errno::UnknownErrno),
    }
}
