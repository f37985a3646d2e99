//! Drops every capability — bounding and ambient sets included — also when sandgate runs
//! as root, so neither the command nor anything it executes holds or regains one.

use std::io;

use caps::CapSet;

use crate::sys;

/// Drops all capabilities of the calling thread. Runs in the child.
///
/// The bounding set is dropped first, while CAP_SETPCAP (root, or the child's own user
/// namespace) still allows it. Without that capability — an unprivileged run whose mount
/// namespace was skipped — the bounding set cannot be changed, but then no capability is
/// held and no_new_privs stops every exec from gaining one.
pub fn drop_all(last_cap: u32) -> io::Result<()> {
    let privileged =
        caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false);
    if privileged {
        sys::drop_bounding_and_ambient(last_cap)?;
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(|e| io::Error::other(e.to_string()))?;
    }
    Ok(())
}
