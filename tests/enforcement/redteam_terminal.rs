//! Red team, terminals: the host's other terminals, reached through `/dev` rather than
//! `/dev/pts` (which holds only the caller's).

use crate::support::*;

/// Opens each path read-only and non-blocking and reads once: `PATH=open` when the open
/// succeeded (EAGAIN on a terminal without input means it is attached and would deliver
/// what is typed there), `PATH=ERRNO` otherwise.
const OPEN_AND_READ: &str = r#"
import os, sys, errno
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        print(f"{path}={errno.errorcode[e.errno]}")
        continue
    try:
        os.read(fd, 64)
    except OSError:
        pass
    print(f"{path}=open")
"#;

/// Attack (as root, who owns them): read the machine's other terminals — the virtual
/// consoles (`/dev/tty0`, `/dev/tty1`, `/dev/console`), a serial console (`/dev/ttyS0`, where
/// a cloud VM's administrator logs in) and the console's screen memory (`/dev/vcs`,
/// `/dev/vcsa`, which hold the text shown on the active console). A read of a console
/// takes what is typed there (a login password); `vcs` shows what is on screen. The
/// README keeps the user's other terminals out of reach (`/dev/pts` holds only the
/// caller's own) and says nothing of the host session's terminals can be acted on. Should
/// fail: no other terminal of the host opens inside.
#[test]
fn redteam_the_consoles_and_serial_lines_cannot_be_read() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let devices: Vec<&str> = [
        "/dev/tty0",
        "/dev/tty1",
        "/dev/tty2",
        "/dev/console",
        "/dev/ttyS0",
        "/dev/vcs",
        "/dev/vcsa",
        "/dev/vcs1",
        "/dev/vcsu",
    ]
    .into_iter()
    .filter(|d| std::path::Path::new(d).exists())
    .collect();
    if devices.is_empty() {
        eprintln!("NOTE: no console or serial device on this machine");
        return;
    }
    let mut argv = vec!["python3", "-c", OPEN_AND_READ];
    argv.extend(&devices);
    // The control: whoever the host lets open a device must not open it inside.
    let control = env.run("full-access", &argv);
    assert_status(&control, 0);
    let opened_outside: Vec<String> = String::from_utf8_lossy(&control.stdout)
        .lines()
        .filter(|l| l.ends_with("=open"))
        .map(str::to_owned)
        .collect();
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let out = env.run(mode, &argv);
        assert_status(&out, 0);
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if line.ends_with("=open") {
                failures.push(format!("{mode}: {line}"));
            }
        }
    }
    if opened_outside.is_empty() {
        // As another user the host refuses them all: nothing to compare against.
        eprintln!("NOTE: no console device opens for this user outside either");
    }
    assert_none(failures);
}
