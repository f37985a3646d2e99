//! sandgate: run one command under a kernel-enforced sandbox profile.
//!
//! The pipeline, one module per stage:
//! `cli` → `policy` → `sandbox` → `exec` (+ `supervisor`) → `denial`.
//! `main.rs` only calls [`app::main`].

pub mod app;
pub mod approval;
pub mod approvals;
pub mod audit;
pub mod cli;
pub mod confinement;
pub mod denial;
pub mod doctor;
pub mod error;
pub mod exec;
pub mod kept;
pub mod limits;
pub mod logfile;
pub mod network;
pub mod no_symlinks;
pub mod output;
pub mod policy;
pub mod private_temp;
pub mod process_table;
pub mod sandbox;
pub mod secret_scan;
pub mod shell;
pub mod supervisor;
mod sys;
pub mod syscalls;
pub mod terminal;

#[cfg(test)]
mod layout_tests;
