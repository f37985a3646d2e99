//! The policy front: presets, configuration layers, strict-widening escalation,
//! the three answerers and the audit pair — against real endpoints the tests start on
//! 127.0.0.1 and on a unix socket, real approver programs and a real pty.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod approval {
    mod audit;
    mod config;
    mod endpoint;
    mod escalation;
    mod program;
    mod server;
    mod server_attacks;
    mod single_threaded;
    mod terminal;
}
