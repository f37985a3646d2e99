//! Nested sandgate (issue #2, acceptance 7): a sandgate inside a sandbox runs at the same
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
    // told to degrade, runs inside the outer sandbox anyway.
    let unhinted = format!("env -u SANDGATE_PARENT_MODE -u SANDGATE_PARENT_WORKSPACE {inner}");
    let out = env.sh("read-only", &unhinted);
    assert!(!target.exists(), "{}", show(&out));
    let degraded = unhinted.replace(
        "--sandbox full-access",
        "--sandbox full-access --allow-degraded",
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
