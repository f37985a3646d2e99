//! Red team A: a home chosen as the workspace (`--workspace ~`). The README promises that
//! "what a host program runs later — a `.pth` in `~/.local/lib/python3.*/site-packages`,
//! `~/.cargo/bin`, pyenv's shims, a shell's rc file — lies in one of" the sealed places
//! (the home's dot-entries, the `$PATH` directories in it, no new entry in the home). The
//! rule goes by where *those* lie; what they pull in from elsewhere in the home does not
//! obey it. Each test plants from inside, then runs the host program as the user would.
//!
//! An attack that gets through is a failing test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

/// A home with a Python virtual environment at `~/venv` whose `bin` is on `$PATH` (as
/// `python3 -m venv ~/venv` and an activation in `.bashrc` make it), and a shell rc file
/// that sources a script from a non-dot directory (what `conda init` and the Google Cloud
/// SDK's installer write: `~/miniconda3/etc/profile.d/conda.sh`,
/// `~/google-cloud-sdk/path.bash.inc`).
fn home(env: &TestEnv) -> PathBuf {
    let home = env.root.join("home");
    std::fs::create_dir_all(home.join("miniconda3/etc/profile.d")).unwrap();
    let out = output(
        Command::new("/usr/bin/python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(home.join("venv")),
    );
    assert_status(&out, 0);
    std::fs::write(
        home.join("miniconda3/etc/profile.d/conda.sh"),
        "export CONDA_SHLVL=0\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".bashrc"),
        ". \"$HOME/miniconda3/etc/profile.d/conda.sh\"\n",
    )
    .unwrap();
    home
}

fn path_with(home: &Path) -> String {
    format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        home.join("venv/bin").display()
    )
}

/// Runs `script` under workspace-write with `home` as the workspace.
fn in_home(env: &TestEnv, home: &Path, script: &str) -> Output {
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.current_dir(home)
        .env("HOME", home)
        .env("PATH", path_with(home))
        .arg("--workspace")
        .arg(home)
        .args(["--", "/bin/sh", "-c", script]);
    output(&mut cmd)
}

/// The venv's site-packages directory.
fn site_packages(home: &Path) -> PathBuf {
    let lib = home.join("venv/lib");
    let version = std::fs::read_dir(&lib)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python"))
        })
        .unwrap_or_else(|| panic!("no python directory in {}", lib.display()));
    version.join("site-packages")
}

/// Attack: a `.pth` file in the site-packages of a virtual environment kept in the home
/// (`~/venv`, or conda's `~/miniconda3`, its default place). Only `~/venv/bin`, the
/// `$PATH` directory, is sealed; `~/venv/lib/python3.*/site-packages` is an ordinary
/// writable entry of the home. Every later `python3` the user runs from that environment
/// executes the `.pth` line.
///
/// It should fail because the README says a `.pth` that a host `python3` runs cannot be
/// planted when the home is the workspace.
#[test]
fn redteam_home_workspace_plants_a_pth_in_a_virtual_environment() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = home(&env);
    let site = site_packages(&home);
    let mark = env.outside.join("pth-ran");
    let pth = format!("import os; os.system(\"touch '{}'\")\n", mark.display());
    let out = in_home(
        &env,
        &home,
        &format!(
            "printf %s '{}' > '{}'",
            pth.replace('\'', r"'\''"),
            site.join("zz-redteam.pth").display()
        ),
    );
    let _ = output(
        Command::new(home.join("venv/bin/python3"))
            .env_clear()
            .env("HOME", &home)
            .env("PATH", path_with(&home))
            .args(["-c", "pass"]),
    );
    assert!(
        !mark.exists(),
        "the host's python3 from ~/venv ran a .pth the sandbox planted\n{}",
        show(&out)
    );
}

/// Attack: a script the shell's rc file sources from a non-dot directory of the home
/// (`conda init` makes `.bashrc` run `~/miniconda3/...`). `.bashrc` itself is sealed; the
/// file it pulls in is not. The user's next interactive shell runs the appended line.
///
/// It should fail because the README says a home chosen as the workspace keeps what the
/// host runs (a shell's rc file) read-only.
#[test]
fn redteam_home_workspace_appends_to_a_script_the_rc_file_sources() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = home(&env);
    let mark = env.outside.join("rc-ran");
    let out = in_home(
        &env,
        &home,
        &format!(
            "echo \"touch '{}'\" >> miniconda3/etc/profile.d/conda.sh",
            mark.display()
        ),
    );
    let _ = output(
        Command::new("bash")
            .env_clear()
            .env("HOME", &home)
            .env("PATH", path_with(&home))
            .args(["-i", "-c", "true"])
            .stdin(std::process::Stdio::null()),
    );
    assert!(
        !mark.exists(),
        "the host's next interactive bash ran a line the sandbox appended to a file .bashrc sources\n{}",
        show(&out)
    );
}
