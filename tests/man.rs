//! The committed man page is what the clap definitions generate today.

#[test]
fn committed_man_page_is_current() -> std::io::Result<()> {
    let command = <sandgate::cli::Cli as clap::CommandFactory>::command();
    let mut generated = Vec::new();
    clap_mangen::Man::new(command).render(&mut generated)?;
    let committed = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/man/sandgate.1"))?;
    assert!(
        generated == committed,
        "man/sandgate.1 is stale: run scripts/gen-man"
    );
    Ok(())
}

#[test]
fn completions_are_produced_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .args(["completions", shell])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "{shell}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("sandbox"),
            "{shell}"
        );
    }
}

#[test]
fn the_man_page_renders() {
    let page = concat!(env!("CARGO_MANIFEST_DIR"), "/man/sandgate.1");
    let out = std::process::Command::new("man")
        .args(["-l", "-P", "cat", page])
        .env("MANWIDTH", "100")
        .output()
        .unwrap_or_else(|e| panic!("man (package man-db) is needed: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for section in [
        "NAME",
        "SYNOPSIS",
        "OPTIONS",
        "--sandbox-permissions",
        "--approval-endpoint",
    ] {
        assert!(
            text.contains(section),
            "rendered page lacks {section}:\n{text}"
        );
    }
}
