//! Nested sandgate: a sandgate inside a sandbox runs at the same
//! or a narrower mode and never ends up wider than its parent.

use crate::support::*;

#[test]
fn asking_for_full_access_inside_read_only_still_cannot_write() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sg = sandgate_inside().to_string_lossy().into_owned();
    let target = env.outside.join("f");
    let t = target.to_string_lossy();
    let inner =
        format!("'{sg}' --sandbox full-access -- /bin/sh -c 'echo x > {t}; echo x > ws-file'");
    let out = env.sh("read-only", &inner);
    assert_command_failed(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("full-access narrowed to read-only"),
        "{}",
        show(&out)
    );
    assert!(!target.exists());
    assert!(!env.ws.join("ws-file").exists());
    // Removing the hint does not help: the inner sandgate then cannot build its own
    // namespace (the outer filter refuses unshare) and refuses to run at all, or, when
    // told to use the landlock backend, runs inside the outer sandbox anyway.
    let unhinted = format!("env -u SANDGATE_PARENT_MODE -u SANDGATE_PARENT_WORKSPACE {inner}");
    let out = env.sh("read-only", &unhinted);
    assert!(!target.exists(), "{}", show(&out));
    let degraded = unhinted.replace(
        "--sandbox full-access",
        "--sandbox full-access --backend landlock",
    );
    env.sh("read-only", &degraded);
    assert!(!target.exists());
    assert!(!env.ws.join("ws-file").exists());
}

#[test]
fn a_nested_call_in_the_same_mode_and_workspace_keeps_working() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sg = sandgate_inside().to_string_lossy().into_owned();
    let out = env.sh(
        "workspace-write",
        &format!("'{sg}' --sandbox workspace-write -- /bin/sh -c 'echo in > inner && cat inner'"),
    );
    assert_status(&out, 0);
    assert_eq!(out.stdout, b"in\n");
    let out = env.sh(
        "workspace-write",
        &format!("'{sg}' --sandbox read-only -- /bin/sh -c 'echo x > ro-inner'"),
    );
    assert!(!env.ws.join("ro-inner").exists(), "{}", show(&out));
}

#[test]
fn a_nested_call_that_names_no_workspace_keeps_its_parents_inside_an_outer_repository() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // The workspace the outer call is given lies inside a repository: derived from the
    // current directory, the nested call's workspace would be that repository.
    init_repository(&env.root);
    let sub = env.ws.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let sg = sandgate_inside().to_string_lossy().into_owned();
    for cwd in [&env.ws, &sub] {
        let out = env.sh(
            "workspace-write",
            &format!(
                "cd '{}' && '{sg}' -- /bin/sh -c 'echo in > inner && cat inner'",
                cwd.display()
            ),
        );
        assert_status(&out, 0);
        assert_eq!(out.stdout, b"in\n", "{}", show(&out));
        assert!(cwd.join("inner").exists());
    }
    // The nested call is still its parent's: the repository around it stays out of reach.
    let out = env.sh(
        "workspace-write",
        &format!(
            "'{sg}' -- /bin/sh -c 'echo x > {}'",
            env.outside.join("f").display()
        ),
    );
    assert_command_failed(&out);
    assert!(!env.outside.join("f").exists());
}

#[test]
fn nested_widening_is_refused_before_the_audit_log_and_the_outer_sandgate_stays_quiet() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // The audit log exists and has a record, so "unchanged" means something.
    let mut cmd = env.sandgate("workspace-write");
    cmd.args([
        "--approval",
        "never",
        "--sandbox-permissions",
        "full-access",
    ])
    .args(["--justification", "seed", "--", "true"]);
    assert_status(&output(&mut cmd), 77);
    let before = std::fs::read(env.audit_log()).unwrap();
    assert!(!before.is_empty());

    // An approver that would grant, and leaves a trace if it is ever asked.
    let asked = env.ws.join("approver-was-asked");
    let approver = format!(
        r#"touch '{}'; id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'); printf '{{"id":"%s","decision":"allowed-once"}}' "$id""#,
        asked.display()
    );
    let inner_log = env.ws.join("inner-audit.jsonl");
    let sg = sandgate_inside().to_string_lossy().into_owned();
    let inner = |prefix: &str| {
        let mut cmd = env.sandgate("workspace-write");
        cmd.arg("--").args(["/bin/sh", "-c", r#"exec "$@""#, "sh"]);
        cmd.args(prefix.split_whitespace());
        cmd.args([&sg, "--sandbox-permissions", "full-access"])
            .args([
                "--justification",
                "x",
                "--approver",
                &approver,
                "--",
                "true",
            ]);
        output(&mut cmd)
    };
    // As the sandbox left it; without its hint; and pointing the audit log somewhere the
    // sandbox can write.
    for prefix in [
        "",
        "env -u SANDGATE_PARENT_MODE -u SANDGATE_PARENT_WORKSPACE",
        &format!("env SANDGATE_AUDIT_LOG={}", inner_log.display()),
    ] {
        let out = inner(prefix);
        assert_status(&out, 77);
        let markers = stderr_markers(&out);
        // The inner sandgate's own refusal, and nothing from the outer supervisor.
        assert_eq!(markers.len(), 1, "{prefix:?}: {}", show(&out));
        assert_eq!(markers[0]["kind"], "nested_widening", "{}", show(&out));
        assert!(!asked.exists(), "{prefix:?}: the approver was asked");
        assert!(!inner_log.exists(), "{prefix:?}: {}", show(&out));
        assert_eq!(
            std::fs::read(env.audit_log()).unwrap_or_default(),
            before,
            "{prefix:?}"
        );
    }

    // A nested call that asks for nothing does not touch the audit log either.
    let out = env.run("workspace-write", &[sg.as_str(), "--", "true"]);
    assert_status(&out, 0);
    assert!(stderr_markers(&out).is_empty(), "{}", show(&out));

    // Control: the same request from the host is asked and granted.
    let mut cmd = env.sandgate("workspace-write");
    cmd.args([
        "--sandbox-permissions",
        "full-access",
        "--justification",
        "x",
    ])
    .args(["--approver", &approver, "--", "true"]);
    assert_status(&output(&mut cmd), 0);
    assert!(asked.exists());
}

#[test]
fn a_nested_call_confined_like_its_parent_adds_no_layer_and_obeys_the_seal_rules() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sg = sandgate_inside().to_string_lossy().into_owned();
    let filters = "sed -n 's/^Seccomp_filters:[[:space:]]*//p' /proc/self/status";
    let out = env.sh(
        "workspace-write",
        &format!(
            "{filters} > outer; '{sg}' --sandbox workspace-write -- /bin/sh -c \"{filters} > inner; \
             printf '[core]\\n\\tpager = x\\n' > cfg; mv cfg config; echo \\$? > refused\""
        ),
    );
    assert_status(&out, 0);
    let read = |name: &str| std::fs::read_to_string(env.ws.join(name)).unwrap_or_default();
    // The same filters: the nested sandgate stacked none, so the outer supervisor performs
    // its writes — and applies its rules to them.
    assert_eq!(read("outer"), read("inner"), "{}", show(&out));
    assert!(!read("outer").is_empty());
    assert_ne!(read("refused").trim(), "0", "{}", show(&out));
    assert!(!env.ws.join("config").exists());
}

#[test]
fn a_nested_call_narrower_than_its_parent_gets_no_write_performed() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let extra = env.root.join("extra");
    std::fs::create_dir(&extra).unwrap();
    let sg = sandgate_inside().to_string_lossy().into_owned();
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--writable-root").arg(&extra).args([
        "--",
        "/bin/sh",
        "-c",
        &format!(
            "echo outer > '{x}/outer' && '{sg}' --sandbox workspace-write -- /bin/sh -c \
             'echo x > {x}/inner; echo x > inner-ws; true'",
            x = extra.display()
        ),
    ]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert!(extra.join("outer").exists(), "{}", show(&out));
    // The nested call's own landlock domain refuses the root it does not name, and the
    // outer supervisor performs nothing for a caller in a sandbox of its own: its writes
    // fail closed, in the workspace too.
    assert!(!extra.join("inner").exists(), "{}", show(&out));
    assert!(!env.ws.join("inner-ws").exists(), "{}", show(&out));
}
