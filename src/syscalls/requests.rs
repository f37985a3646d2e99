//! The argument values the deny list refuses: terminal requests, `prctl` options, `fcntl`
//! commands and `clone` flags.

pub const TIOCSTI: u64 = 0x5412;
pub const TIOCLINUX: u64 = 0x541C;
pub const TIOCEXCL: u64 = 0x540C;
pub const TIOCSCTTY: u64 = 0x540E;
pub const TIOCSPGRP: u64 = 0x5410;
pub const TIOCCONS: u64 = 0x541D;
pub const TIOCSETD: u64 = 0x5423;
pub const TIOCVHANGUP: u64 = 0x5437;
pub const TIOCNOTTY: u64 = 0x5422;
pub const TIOCSLCKTRMIOS: u64 = 0x5457;
pub const TCXONC: u64 = 0x540A;
pub const TIOCSWINSZ: u64 = 0x5414;

/// Namespace-creating `clone` flags. (`CLONE_NEWTIME` is not among them: in `clone` that
/// bit belongs to the exit signal; `unshare` and `clone3` are refused whole.)
pub const CLONE_NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// `PR_SCHED_CORE` (linux/prctl.h).
pub const PR_SCHED_CORE: u64 = 62;
/// `prctl` options refused: see the deny list (`table.rs`).
pub const PRCTL_OPTIONS: [u64; 1] = [PR_SCHED_CORE];

/// `fcntl` commands refused:
/// - `F_SETLEASE`. A read lease on a file the command owns (as root: every root-owned
///   file, `/etc/hostname`) makes a host process's next open of it for writing wait for
///   the lease-break time (45 s), or fail non-blocking; held by a process kept after the
///   call, for as long as it runs. Leases are for file servers (Samba, NFS), not for what
///   runs in a sandbox.
/// - `F_NOTIFY` (dnotify, inotify's predecessor): on any directory the command may read,
///   a signal for each file host processes access, create or change there. Watches go
///   through the supervisor as `inotify` instead (see `supervisor::watch`).
pub const FCNTL_COMMANDS: [u64; 2] = [libc::F_SETLEASE as u64, libc::F_NOTIFY as u64];

/// Terminal requests refused, because they take over or redirect a terminal — the user's,
/// which a sandboxed process shares (or, for a background process left by an earlier call,
/// still holds):
/// - `TIOCSTI` pushes input into it; `TIOCLINUX` pastes the console selection (the same);
/// - `TIOCSPGRP` (`tcsetpgrp`) makes the caller's group the foreground: with `SIGTTOU`
///   ignored, a background process takes the user's next typed line;
/// - `TIOCSCTTY` makes a terminal the caller's controlling one: a session leader takes a
///   terminal whose session has ended (or, with `CAP_SYS_ADMIN`, steals it);
/// - `TIOCCONS` redirects console output to the terminal;
/// - `TIOCSETD` swaps its line discipline (what sits between the device and every reader);
/// - `TIOCVHANGUP` hangs up every other holder; `TIOCSLCKTRMIOS` locks its modes against
///   them; `TIOCEXCL` makes every later open of the device fail, for the user too, until
///   it is closed;
/// - `TCXONC` (`tcflow`) suspends the terminal's output (`TCOOFF`), or has it send a stop
///   character (`TCIOFF`): left so, the user's terminal shows nothing more after sandgate
///   returns, and the process that did it may be gone;
/// - `TIOCSWINSZ` sets its window size: left changed, the user's shell, editor and pager
///   lay themselves out for a wrong screen until the window is next resized — and sandgate
///   cannot put it back, since a resize by the user during the call looks the same;
/// - `TIOCNOTTY` gives up the controlling terminal, like `setsid` (refused in the deny list):
///   job control guards only a process's controlling terminal, so a background process
///   that gave it up reads the user's typed lines from the fd it still holds.
///
/// The cost: nothing in the sandbox can make a terminal controlling or set a foreground
/// group, so an interactive shell inside runs without job control (`bash -i` says so once
/// and goes on). Ptys of its own would be refused the same (the filter cannot tell them
/// from the user's terminal), but the sandbox cannot open `/dev/ptmx` anyway: landlock
/// gives it no write access there. `full-access` has them.
///
/// Left allowed, deliberately: `TCSETS*` (every interactive program sets raw mode; a
/// background process can do it only with `SIGTTOU` ignored, and the modes never send
/// input elsewhere), `TIOCSIG` (on a pty master, which the sandbox holds only for its own
/// ptys), `TCFLSH` (flush: password prompts flush, and it moves input to no
/// other reader). The modes a command leaves changed are put back by sandgate when the
/// command ends (`terminal`).
///
/// Joining another process group (`setpgid(pid, PGID)`) is refused in the deny list: the
/// filter cannot tell the user's shell's group from a sandboxed one, and a shell inside
/// has no job control to need it anyway.
///
/// With `setsid` refused, no sandboxed process is a session leader, so none can take a
/// controlling terminal by opening one either. (`setsid` and `TIOCNOTTY` are refused only
/// while a terminal is reachable at all: see `sandbox::seccomp::Terminal`.)
pub const TERMINAL_IOCTLS: [u64; 11] = [
    TIOCSTI,
    TIOCLINUX,
    TIOCSPGRP,
    TIOCSCTTY,
    TIOCCONS,
    TIOCSETD,
    TIOCVHANGUP,
    TIOCSLCKTRMIOS,
    TIOCEXCL,
    TCXONC,
    TIOCSWINSZ,
];

/// Inode flags and attributes set by `ioctl` (`chattr`'s `FS_IOC_SETFLAGS`, its 32-bit
/// form, `FS_IOC_FSSETXATTR`, `FS_IOC_SETVERSION` and ext4's `EXT4_IOC_SETVERSION`, each
/// with its 32-bit form, enabling fs-verity, and setting an encryption policy): landlock
/// does not govern them, and without a read-only mount view nothing else would refuse them
/// on a file outside the writable roots. No restricted command needs them.
pub const FILE_ATTRIBUTE_IOCTLS: [u64; 9] = [
    0x4008_6602,
    0x4004_6602,
    0x401c_5820,
    0x4008_7602,
    0x4004_7602,
    0x4008_6604,
    0x4004_6604,
    0x4080_6685,
    0x800c_6613,
];

/// Terminal requests refused while a terminal is reachable: giving up the controlling
/// terminal (see `setsid` in the deny list (`table.rs`)).
pub const SESSION_IOCTLS: [u64; 1] = [TIOCNOTTY];

/// Whole request ranges refused, as (mask, value): the Linux virtual console's `KD*`
/// (0x4Bxx: keymaps and function-key strings — typing for the user, like `TIOCSTI` — and
/// keyboard and display modes) and `VT_*` (0x56xx: switching consoles, taking over console
/// switching). Only the holder of a console can use them; a console user runs sandgate on
/// one. Both are old-style numbers with no direction or size bits, so the mask is exact.
pub const TERMINAL_IOCTL_RANGES: [(u64, u64); 2] = [(0xffff_ff00, 0x4b00), (0xffff_ff00, 0x5600)];

/// The marker `op` of a refused `ioctl` request: `tiocsti` for input injection,
/// `attributes` for an inode's flags, else `terminal`.
pub fn ioctl_op(request: u64) -> &'static str {
    let request = request & 0xffff_ffff;
    if request == TIOCSTI || request == TIOCLINUX {
        "tiocsti"
    } else if FILE_ATTRIBUTE_IOCTLS.contains(&request) {
        "attributes"
    } else {
        "terminal"
    }
}

/// `IOPRIO_WHO_PROCESS` (linux/ioprio.h; libc has no constant).
pub const IOPRIO_WHO_PROCESS: u64 = 1;
