//! Prints the man page generated from the clap definitions (`scripts/gen-man` commits it
//! as `man/sandgate.1`; `tests/man.rs` fails when the committed page is stale).

fn main() -> std::io::Result<()> {
    let command = <sandgate::cli::Cli as clap::CommandFactory>::command();
    clap_mangen::Man::new(command).render(&mut std::io::stdout())
}
