//! The enforcement suite: every enforcement claim of the README checked against the real kernel by
//! running the real binary. CI runs it twice, as root and as an unprivileged uid.
//!
//! Refusals are checked against a control: the same operation under `full-access` must
//! succeed, so a refusal is the sandbox's doing and not the host's.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod enforcement {
    mod containers;
    mod degraded;
    mod exit_status;
    mod filesystem;
    mod git;
    mod git_gate;
    mod git_gate_workflows;
    mod git_integrity;
    mod home;
    mod home_workspace;
    mod host_session;
    mod landlock_backend;
    mod limits;
    mod nested;
    mod network;
    mod ownership;
    mod pid_namespace;
    mod process;
    mod redteam_config;
    mod redteam_git;
    mod redteam_home;
    mod redteam_limits;
    mod redteam_network;
    mod redteam_process;
    mod redteam_round3;
    mod redteam_round4;
    mod redteam_round4_paths;
    mod redteam_round5;
    mod redteam_round6;
    mod redteam_round6_scan;
    mod redteam_round7;
    mod redteam_round7_relay;
    mod redteam_round9;
    mod redteam_secrets;
    mod redteam_stdio;
    mod redteam_terminal;
    mod secrets;
    mod stall;
    mod terminal;
    mod writes;
}
