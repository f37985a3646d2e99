//! The network suite: allowed hosts through sandgate's proxy, checked by running the real
//! binary against servers the tests start on this machine's loopback (stand-in registries
//! and plain upstreams, see `support::registry`). CI runs it as root and as an unprivileged
//! uid.
//!
//! Every refusal has its control: the same request with the host allowed succeeds, and the
//! upstream records what reached it, so a refusal is the proxy's doing and a success went
//! through it.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod network {
    mod attacks;
    mod background;
    mod call;
    mod fixtures;
    mod private_names;
    mod proxy;
    mod registries;
}
