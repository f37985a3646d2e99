//! Safe, one-syscall wrappers for what nix and the landlock crate do not cover. Every
//! `unsafe` block of the crate lives here, each with the invariant it relies on.
//!
//! Functions marked *async-signal-safe* may run in the forked child before `execve`: they
//! do not allocate and take only pre-built arguments.

#![allow(unsafe_code)]

use std::io;

mod confine;
mod fd;
mod fs;
mod mount;
mod notify;
mod process;
mod signal;

pub use confine::*;
pub use fd::*;
pub use fs::*;
pub use mount::*;
pub use notify::*;
pub use process::*;
pub use signal::*;

/// Turns a `-1`-on-error return into `io::Result`.
fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

#[cfg(test)]
mod tests;
