//! Prints the man page, assembled by `man/page.rs` from the clap definitions and the
//! hand-written sections (`scripts/gen-man` commits it as `man/sandgate.1`;
//! `tests/man.rs` fails when the committed page is stale).

#[path = "../man/page.rs"]
mod page;

use std::io::Write;

fn main() -> std::io::Result<()> {
    std::io::stdout().write_all(&page::render()?)
}
