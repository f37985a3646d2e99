//! The calls the supervisor performs, read from a notification's registers into values of
//! its own: what each asks for, and where its paths and buffers lie in the caller's memory
//! (copied once, when the call is decided, never read again).

use crate::syscalls::{OPEN_WRITES, SYS_REMOVEXATTRAT, SYS_SETXATTRAT};

/// A path argument: relative to `dirfd` (or the caller's cwd, `AT_FDCWD`) when relative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathArg {
    pub dirfd: i32,
    pub ptr: u64,
}

/// What a mode or attribute change acts on, or where a link comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A path; its last symlink followed when `follow`. With `empty_ok`
    /// (`AT_EMPTY_PATH`) an empty path names what `dirfd` refers to (for a link: an
    /// `O_TMPFILE` file given a name, typically).
    Path {
        at: PathArg,
        follow: bool,
        empty_ok: bool,
    },
    /// A file descriptor of the caller's.
    Fd(i32),
}

/// A call the supervisor performs, with its own copy of every argument in registers.
/// (`Chown`, `Truncate`, `RemoveXattr` and times on a descriptor only without a mount
/// namespace, where the supervisor decides what landlock does not govern.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Open {
        at: PathArg,
        flags: i32,
        mode: u32,
    },
    Mkdir {
        at: PathArg,
        mode: u32,
    },
    Mknod {
        at: PathArg,
        mode: u32,
        dev: u64,
    },
    Symlink {
        target: u64,
        at: PathArg,
    },
    Link {
        from: Target,
        to: PathArg,
    },
    Rename {
        from: PathArg,
        to: PathArg,
        flags: u32,
    },
    /// Performed at a guarded git directory's read-only top level (see `git`), and in the
    /// writable areas where the supervisor decides.
    Unlink {
        at: PathArg,
        dir: bool,
    },
    Chmod {
        target: Target,
        mode: u32,
    },
    /// Times set by a path, or on a descriptor (`utimensat` with a NULL path): performed in
    /// a guarded git directory's read-only part, where the sandbox's view refuses them
    /// (git's local clone sets them on what it copies into a new submodule's git
    /// directory), and where the supervisor decides. `times` points at two `timespec`s,
    /// or is NULL (now).
    Utimes {
        target: Target,
        times: u64,
    },
    /// `owner` and `group` as the call gives them (`-1`: unchanged).
    Chown {
        target: Target,
        owner: u32,
        group: u32,
    },
    /// `truncate(path, length)`: by a path, followed.
    Truncate {
        target: Target,
        length: i64,
    },
    RemoveXattr {
        target: Target,
        name: u64,
    },
    /// An `inotify_add_watch` on the caller's inotify instance `inotify`.
    Watch {
        inotify: i32,
        at: PathArg,
        mask: u32,
    },
    /// The attribute's value lies at `value`, `size` bytes (for `setxattrat`, `args`
    /// points at its `struct xattr_args` instead).
    SetXattr {
        target: Target,
        name: u64,
        value: Value,
        flags: i32,
    },
}

/// Where an attribute's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    At {
        ptr: u64,
        size: u64,
    },
    /// `setxattrat`'s `struct xattr_args` (value, size, flags) and its declared size.
    Args {
        ptr: u64,
        size: u64,
    },
}

/// The bit that makes an open an `O_TMPFILE` one (its value's other bit is `O_DIRECTORY`).
pub const TMPFILE: i32 = libc::O_TMPFILE & !libc::O_DIRECTORY;

impl Op {
    /// Decodes call `nr` with `args`; `None` for a call or a form the supervisor does not
    /// perform (a read-only or `O_PATH` open, the legacy calls on times).
    pub fn decode(nr: i64, args: &[u64; 6]) -> Option<Op> {
        let a = |n: usize| args[n];
        let fd = |n: usize| a(n) as i32;
        let at = |dirfd: i32, ptr: u64| PathArg { dirfd, ptr };
        let cwd = libc::AT_FDCWD;
        let open = |at: PathArg, flags: i32, mode: u64| {
            let writes = flags & (OPEN_WRITES | TMPFILE) != 0;
            (writes && flags & libc::O_PATH == 0).then_some(Op::Open {
                at,
                flags,
                mode: mode as u32,
            })
        };
        let path_target = |dirfd, ptr, flags: u64| Target::Path {
            at: at(dirfd, ptr),
            follow: flags & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
            empty_ok: flags & libc::AT_EMPTY_PATH as u64 != 0,
        };
        let follow = |ptr| Target::Path {
            at: at(cwd, ptr),
            follow: true,
            empty_ok: false,
        };
        let nofollow = |ptr| Target::Path {
            at: at(cwd, ptr),
            follow: false,
            empty_ok: false,
        };
        let setxattr = |target, name, value, size, flags: u64| Op::SetXattr {
            target,
            name,
            value: Value::At { ptr: value, size },
            flags: flags as i32,
        };
        #[cfg(target_arch = "x86_64")]
        {
            let legacy = match nr {
                libc::SYS_open => open(at(cwd, a(0)), a(1) as i32, a(2)),
                libc::SYS_creat => open(
                    at(cwd, a(0)),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                    a(1),
                ),
                libc::SYS_mkdir => Some(Op::Mkdir {
                    at: at(cwd, a(0)),
                    mode: a(1) as u32,
                }),
                libc::SYS_mknod => Some(Op::Mknod {
                    at: at(cwd, a(0)),
                    mode: a(1) as u32,
                    dev: a(2),
                }),
                libc::SYS_unlink | libc::SYS_rmdir => Some(Op::Unlink {
                    at: at(cwd, a(0)),
                    dir: nr == libc::SYS_rmdir,
                }),
                libc::SYS_rename => Some(Op::Rename {
                    from: at(cwd, a(0)),
                    to: at(cwd, a(1)),
                    flags: 0,
                }),
                libc::SYS_link => Some(Op::Link {
                    from: Target::Path {
                        at: at(cwd, a(0)),
                        follow: false,
                        empty_ok: false,
                    },
                    to: at(cwd, a(1)),
                }),
                libc::SYS_symlink => Some(Op::Symlink {
                    target: a(0),
                    at: at(cwd, a(1)),
                }),
                libc::SYS_chmod => Some(Op::Chmod {
                    target: follow(a(0)),
                    mode: a(1) as u32,
                }),
                libc::SYS_chown | libc::SYS_lchown => Some(Op::Chown {
                    target: match nr {
                        libc::SYS_chown => follow(a(0)),
                        _ => nofollow(a(0)),
                    },
                    owner: a(1) as u32,
                    group: a(2) as u32,
                }),
                _ => None,
            };
            if legacy.is_some() {
                return legacy;
            }
        }
        match nr {
            libc::SYS_openat => open(at(fd(0), a(1)), a(2) as i32, a(3)),
            libc::SYS_utimensat => Some(Op::Utimes {
                // Without a path it acts on the caller's own file.
                target: match a(1) {
                    0 => Target::Fd(fd(0)),
                    _ => path_target(fd(0), a(1), a(3)),
                },
                times: a(2),
            }),
            libc::SYS_fchownat => Some(Op::Chown {
                target: path_target(fd(0), a(1), a(4)),
                owner: a(2) as u32,
                group: a(3) as u32,
            }),
            libc::SYS_fchown => Some(Op::Chown {
                target: Target::Fd(fd(0)),
                owner: a(1) as u32,
                group: a(2) as u32,
            }),
            libc::SYS_truncate => Some(Op::Truncate {
                target: follow(a(0)),
                length: a(1) as i64,
            }),
            libc::SYS_removexattr => Some(Op::RemoveXattr {
                target: follow(a(0)),
                name: a(1),
            }),
            libc::SYS_lremovexattr => Some(Op::RemoveXattr {
                target: nofollow(a(0)),
                name: a(1),
            }),
            libc::SYS_fremovexattr => Some(Op::RemoveXattr {
                target: Target::Fd(fd(0)),
                name: a(1),
            }),
            SYS_REMOVEXATTRAT => Some(Op::RemoveXattr {
                target: path_target(fd(0), a(1), a(2)),
                name: a(3),
            }),
            libc::SYS_mkdirat => Some(Op::Mkdir {
                at: at(fd(0), a(1)),
                mode: a(2) as u32,
            }),
            libc::SYS_mknodat => Some(Op::Mknod {
                at: at(fd(0), a(1)),
                mode: a(2) as u32,
                dev: a(3),
            }),
            libc::SYS_unlinkat => Some(Op::Unlink {
                at: at(fd(0), a(1)),
                dir: a(2) & libc::AT_REMOVEDIR as u64 != 0,
            }),
            libc::SYS_renameat => Some(Op::Rename {
                from: at(fd(0), a(1)),
                to: at(fd(2), a(3)),
                flags: 0,
            }),
            libc::SYS_renameat2 => Some(Op::Rename {
                from: at(fd(0), a(1)),
                to: at(fd(2), a(3)),
                flags: a(4) as u32,
            }),
            libc::SYS_linkat => {
                let flags = a(4);
                let empty_ok = flags & libc::AT_EMPTY_PATH as u64 != 0;
                let from = if empty_ok && a(1) == 0 {
                    // A NULL path with AT_EMPTY_PATH: the kernel reads it as empty.
                    Target::Fd(fd(0))
                } else {
                    Target::Path {
                        at: at(fd(0), a(1)),
                        follow: flags & libc::AT_SYMLINK_FOLLOW as u64 != 0,
                        empty_ok,
                    }
                };
                Some(Op::Link {
                    from,
                    to: at(fd(2), a(3)),
                })
            }
            libc::SYS_symlinkat => Some(Op::Symlink {
                target: a(0),
                at: at(fd(1), a(2)),
            }),
            libc::SYS_inotify_add_watch => Some(Op::Watch {
                inotify: fd(0),
                at: at(cwd, a(1)),
                mask: a(2) as u32,
            }),
            libc::SYS_fchmod => Some(Op::Chmod {
                target: Target::Fd(fd(0)),
                mode: a(1) as u32,
            }),
            libc::SYS_fchmodat => Some(Op::Chmod {
                target: path_target(fd(0), a(1), 0),
                mode: a(2) as u32,
            }),
            libc::SYS_fchmodat2 => Some(Op::Chmod {
                target: path_target(fd(0), a(1), a(3)),
                mode: a(2) as u32,
            }),
            libc::SYS_setxattr => Some(setxattr(follow(a(0)), a(1), a(2), a(3), a(4))),
            libc::SYS_lsetxattr => Some(setxattr(nofollow(a(0)), a(1), a(2), a(3), a(4))),
            libc::SYS_fsetxattr => Some(setxattr(Target::Fd(fd(0)), a(1), a(2), a(3), a(4))),
            SYS_SETXATTRAT => Some(Op::SetXattr {
                target: path_target(fd(0), a(1), a(2)),
                name: a(3),
                value: Value::Args {
                    ptr: a(4),
                    size: a(5),
                },
                flags: 0,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paths an op acts on, in the order of its arguments.
    fn paths_of(op: &Op) -> Vec<PathArg> {
        let target = |t: &Target| match t {
            Target::Path { at, .. } => Some(*at),
            Target::Fd(_) => None,
        };
        match op {
            Op::Open { at, .. }
            | Op::Mkdir { at, .. }
            | Op::Mknod { at, .. }
            | Op::Symlink { at, .. }
            | Op::Unlink { at, .. }
            | Op::Watch { at, .. } => vec![*at],
            Op::Rename { from, to, .. } => vec![*from, *to],
            Op::Link { from, to } => target(from).into_iter().chain([*to]).collect(),
            Op::Chmod { target: t, .. }
            | Op::Utimes { target: t, .. }
            | Op::Chown { target: t, .. }
            | Op::Truncate { target: t, .. }
            | Op::RemoveXattr { target: t, .. }
            | Op::SetXattr { target: t, .. } => target(t).into_iter().collect(),
        }
    }

    /// Every call of the table the supervisor performs is decoded, and its paths are where
    /// the table (and so the observer) finds them: a row without its decoding, or a
    /// decoding that reads another argument, fails here.
    #[test]
    fn every_performed_call_of_the_table_is_decoded_where_the_table_says() {
        use crate::syscalls::{self, testing::acting, Need, Rule};
        for row in syscalls::all() {
            let Rule::Path(call) = row.rule else { continue };
            let args = acting(row);
            let decoded = Op::decode(row.nr, &args);
            let Some(op) = decoded else {
                assert_eq!(call.need, Need::Observed, "{} is not decoded", row.name);
                continue;
            };
            let found: Vec<PathArg> = call
                .paths(&args)
                .iter()
                .map(|p| PathArg {
                    dirfd: p.dirfd,
                    ptr: p.ptr,
                })
                .collect();
            assert_eq!(paths_of(&op), found, "{}", row.name);
        }
    }

    #[test]
    fn only_writing_opens_are_performed() {
        let open = |flags: i32| Op::decode(libc::SYS_openat, &[3, 9, flags as u64, 0o644, 0, 0]);
        assert_eq!(open(libc::O_RDONLY | libc::O_CLOEXEC), None);
        assert_eq!(open(libc::O_PATH | libc::O_CREAT), None);
        for flags in [
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_CREAT,
            libc::O_TRUNC,
            libc::O_TMPFILE | libc::O_RDWR,
        ] {
            assert!(matches!(open(flags), Some(Op::Open { .. })), "{flags:#o}");
        }
    }

    #[test]
    fn links_by_descriptor_and_attribute_calls_are_told_apart() {
        let empty = libc::AT_EMPTY_PATH as u64;
        assert_eq!(
            Op::decode(libc::SYS_linkat, &[5, 0, 3, 7, empty, 0]),
            Some(Op::Link {
                from: Target::Fd(5),
                to: PathArg { dirfd: 3, ptr: 7 }
            })
        );
        let follow = libc::AT_SYMLINK_FOLLOW as u64;
        assert!(matches!(
            Op::decode(libc::SYS_linkat, &[5, 9, 3, 7, follow, 0]),
            Some(Op::Link {
                from: Target::Path { follow: true, .. },
                ..
            })
        ));
        assert!(matches!(
            Op::decode(
                libc::SYS_fchmodat2,
                &[3, 9, 0o755, libc::AT_SYMLINK_NOFOLLOW as u64, 0, 0]
            ),
            Some(Op::Chmod {
                target: Target::Path { follow: false, .. },
                mode: 0o755
            })
        ));
        assert!(matches!(
            Op::decode(libc::SYS_fsetxattr, &[4, 1, 2, 3, 0, 0]),
            Some(Op::SetXattr {
                target: Target::Fd(4),
                ..
            })
        ));
        assert!(matches!(
            Op::decode(libc::SYS_truncate, &[9, 5, 0, 0, 0, 0]),
            Some(Op::Truncate { length: 5, .. })
        ));
        // A watch: the caller's inotify fd, a path from its cwd, the mask.
        assert_eq!(
            Op::decode(libc::SYS_inotify_add_watch, &[5, 9, 0x100, 0, 0, 0]),
            Some(Op::Watch {
                inotify: 5,
                at: PathArg {
                    dirfd: libc::AT_FDCWD,
                    ptr: 9
                },
                mask: 0x100
            })
        );
        // Times by a path (not followed with AT_SYMLINK_NOFOLLOW), or on the caller's own
        // file (a NULL path).
        let nofollow = libc::AT_SYMLINK_NOFOLLOW as u64;
        assert_eq!(
            Op::decode(libc::SYS_utimensat, &[3, 9, 0, nofollow, 0, 0]),
            Some(Op::Utimes {
                target: Target::Path {
                    at: PathArg { dirfd: 3, ptr: 9 },
                    follow: false,
                    empty_ok: false
                },
                times: 0
            })
        );
        assert_eq!(
            Op::decode(libc::SYS_utimensat, &[3, 0, 7, 0, 0, 0]),
            Some(Op::Utimes {
                target: Target::Fd(3),
                times: 7
            })
        );
    }
}
