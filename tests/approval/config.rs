//! Presets and configuration layers.

use serde_json::Value;

use crate::support::endpoint::{Reply, TestEndpoint};
use crate::support::*;

fn presets_json(env: &TestEnv, flags: &[&str]) -> Value {
    // `presets` is a subcommand: it cannot follow the `--sandbox` TestEnv puts first.
    let mut cmd = env.command(sandgate());
    cmd.arg("presets").arg("--json").args(flags);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)))
}

#[test]
fn presets_map_to_their_pairs_and_derive_from_the_knobs() {
    let env = TestEnv::new();
    let table = presets_json(&env, &[]);
    let rows: Vec<(String, String, String)> = table["presets"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r["key"].to_string(),
                        r["mode"].to_string(),
                        r["approval"].to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let want = [
        ("read-only", "read-only", "on-request"),
        ("workspace-write", "workspace-write", "on-request"),
        ("full-access", "full-access", "never"),
        ("ci", "workspace-write", "never"),
        ("locked", "read-only", "never"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(k, m, a)| (format!("{k:?}"), format!("{m:?}"), format!("{a:?}")))
        .collect();
    assert_eq!(rows, want);
    for (flags, current) in [
        (vec![], "workspace-write"),
        (
            vec!["--sandbox", "workspace-write", "--approval", "never"],
            "ci",
        ),
        (
            vec!["--sandbox", "read-only", "--approval", "on-request"],
            "read-only",
        ),
        (
            vec!["--sandbox", "full-access", "--approval", "on-request"],
            "custom",
        ),
        (vec!["--preset", "auto"], "workspace-write"),
        (vec!["--preset", "locked"], "locked"),
    ] {
        assert_eq!(
            presets_json(&env, &flags)["current"]["preset"],
            current,
            "{flags:?}"
        );
    }
}

#[test]
fn custom_and_unknown_presets_are_refused_with_the_valid_keys() {
    let env = TestEnv::new();
    for key in ["custom", "yolo"] {
        let mut cmd = env.sandgate("workspace-write");
        cmd.args(["--preset", key, "--", "true"]);
        let out = output(&mut cmd);
        assert_status(&out, 64);
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("read-only, workspace-write, full-access, ci, locked"),
            "{}",
            show(&out)
        );
    }
}

#[test]
fn a_project_file_cannot_widen() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir(env.ws.join(".sandgate")).unwrap();
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"sandbox": "full-access", "max_mode": "full-access", "approval_endpoint": "http://127.0.0.1:9/"}"#,
    )
    .unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--", "touch"]).arg(env.outside.join("f"));
    let out = output(&mut cmd);
    assert_command_failed(&out);
    assert!(!env.outside.join("f").exists());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for key in ["`sandbox`", "`max_mode`", "`approval_endpoint`"] {
        assert!(
            stderr.contains(key),
            "no warning naming {key}: {}",
            show(&out)
        );
    }
    // A narrowing project file is honoured.
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"sandbox": "read-only"}"#,
    )
    .unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--", "touch"]).arg(env.ws.join("g"));
    assert_command_failed(&output(&mut cmd));
    assert!(!env.ws.join("g").exists());
}

#[test]
fn the_managed_ceiling_holds_against_flags_and_approved_requests() {
    let env = TestEnv::new();
    std::fs::write(
        env.root.join("managed.json"),
        r#"{"max_mode": "workspace-write"}"#,
    )
    .unwrap();
    let out = env.run("full-access", &["true"]);
    assert_status(&out, 78);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("max_mode=workspace-write"),
        "{}",
        show(&out)
    );

    let ep = TestEndpoint::http(|r, _| Reply::decision(r, "allowed-once"));
    let mut cmd = env.sandgate("workspace-write");
    cmd.args([
        "--sandbox-permissions",
        "full-access",
        "--justification",
        "x",
        "--approval-endpoint",
        &ep.url,
        "--",
        "touch",
    ])
    .arg(env.outside.join("f"));
    let out = output(&mut cmd);
    assert_status(&out, 77);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("max_mode=workspace-write"),
        "{}",
        show(&out)
    );
    assert!(!env.outside.join("f").exists());
}

#[test]
fn managed_allowed_presets_and_the_user_file() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.root.join("config")).unwrap();
    std::fs::write(
        env.root.join("config/config.json"),
        r#"{"preset": "locked"}"#,
    )
    .unwrap();
    assert_eq!(presets_json(&env, &[])["current"]["preset"], "locked");
    std::fs::write(
        env.root.join("managed.json"),
        r#"{"allowed_presets": ["ci"]}"#,
    )
    .unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--preset", "ci", "--", "true"]);
    assert_status(&output(&mut cmd), 0);
    let mut cmd = env.sandgate("read-only");
    cmd.args(["--", "true"]);
    let out = output(&mut cmd);
    assert_status(&out, 78);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not allowed by the managed configuration"),
        "{}",
        show(&out)
    );
}
