//! Arguments that exercise a row, for the tests of every consumer of the table.

use super::{Args, Dirfd, Rule, SetsMode, Syscall, When};

/// The address given to the path in argument `n`: non-NULL, and distinct per argument.
pub fn path_ptr(n: u8) -> u64 {
    0x7f00_0000_1000 + u64::from(n) * 0x100
}

/// The dirfd given in argument `n`: distinct per argument.
pub fn dirfd(n: u8) -> u64 {
    10 + u64::from(n)
}

/// Arguments with which `row` is what its rule is about: refused for a deny-list row, sent
/// to the supervisor for a path call (a write open, a mode with an execute bit, a path).
pub fn acting(row: &Syscall) -> [u64; 6] {
    let mut args = [0u64; 6];
    match row.rule {
        Rule::Denied { args: rule, .. } => match rule {
            Args::Any | Args::WhileTerminal | Args::WithoutNamespaces => {}
            Args::OtherPid(n) => args[usize::from(n)] = 1234,
            Args::OtherThan { .. } => args[0] = 99,
            Args::Socket | Args::SocketOrTcp => args[0] = libc::AF_PACKET as u64,
            Args::Clone => args[0] = libc::CLONE_NEWUSER as u64,
            Args::Ioctl => args[1] = super::requests::TIOCSTI,
            Args::Prctl => args[0] = super::requests::PR_SCHED_CORE,
            Args::Fcntl => args[1] = libc::F_SETLEASE as u64,
        },
        Rule::Path(call) => {
            for slot in call.paths {
                args[usize::from(slot.path)] = path_ptr(slot.path);
                if let Dirfd::Arg(n) = slot.dirfd {
                    args[usize::from(n)] = dirfd(n);
                }
            }
            match call.when {
                When::Always | When::WithPath { .. } => {}
                When::WriteOpen { flags } => {
                    args[flags as usize] = (libc::O_WRONLY | libc::O_CREAT) as u64;
                }
                When::ModeChange { mode, .. } => args[mode as usize] = 0o755,
            }
            if let Some(SetsMode { mode, .. }) = call.sets_mode {
                args[mode as usize] = 0o755;
            }
        }
        Rule::Unreadable | Rule::Connect | Rule::Bind | Rule::Umask => {}
    }
    args
}

/// [`acting`] with a setuid bit in the mode `row` sets, when it sets one.
pub fn setting_set_id(row: &Syscall) -> Option<[u64; 6]> {
    let Rule::Path(call) = row.rule else {
        return None;
    };
    let mode = call.sets_mode?.mode;
    let mut args = acting(row);
    args[mode as usize] = u64::from(libc::S_ISUID) | 0o755;
    Some(args)
}
