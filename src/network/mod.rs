//! Network access for sandboxes that list allowed hosts: the address ranges (and the
//! machine's own addresses) that stay closed, and the proxy that is the sandbox's only way
//! out. Which hosts are allowed is policy (`policy::host_rules`).

pub mod address;
pub mod interfaces;
pub mod process;
pub mod proxy;

/// Where the proxy listens inside every sandbox that has allowed hosts (the sandbox's own
/// network namespace, so the port is always free).
pub const PROXY_PORT: u16 = 3128;
