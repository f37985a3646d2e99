//! Red team, resource bounds and what the sandbox can see of the host's processes through
//! other file systems than `/proc`.

use crate::support::*;

/// Fills `/tmp` with files carrying 64 KB `user.*` extended attributes, then prints the
/// bytes stored in attributes and in data.
const XATTR_FILL: &str = r#"
import os
stored = 0
value = b"x" * 65000
for i in range(5000):
    path = f"/tmp/f{i}"
    try:
        open(path, "w").close()
    except OSError:
        break
    for k in range(64):
        try:
            os.setxattr(path, f"user.k{k}", value)
        except OSError:
            break
        stored += len(value)
print(stored)
"#;

/// Attack: the tmpfs size bound counts file data; extended attributes live in kernel
/// memory beside it. A command that stores 64 KB `user.*` attributes on file after file in
/// `read-only`'s `/tmp` would hold memory past `--tmpfs-size` (and, in a kept namespace,
/// after the call). Should fail: what the attributes store stays within the bound (tmpfs
/// charges them to its inode space, which the bound sizes).
#[test]
fn redteam_extended_attributes_do_not_grow_a_tmpfs_past_its_bound() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mut cmd = env.sandgate("read-only");
    cmd.args(["--tmpfs-size", "4M", "--", "python3", "-c", XATTR_FILL]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    let stored: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    assert!(
        stored <= 4 * 1024 * 1024,
        "{stored} bytes of attributes in a 4M /tmp"
    );
}

/// Attack: list the host's processes without `/proc`, through the cgroup file systems the
/// sandbox sees under `/sys/fs/cgroup` (`cgroup.procs` and `tasks` of each v1 hierarchy's
/// root, the unified root's `cgroup.procs`). Should fail: every pid listed there is one of
/// the call's own (pids outside its namespace read as 0 or are left out).
#[test]
fn redteam_cgroup_files_list_no_host_process() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // Without a PID namespace host pids are in sight anyway, in /proc as in the cgroup
    // files (a known limit of the landlock backend); what holds there is that no cgroup
    // file takes a pid from the sandbox.
    if landlock_backend() {
        for mode in ["read-only", "workspace-write"] {
            let out = env.sh(mode, "echo $$ > /sys/fs/cgroup/cgroup.procs");
            assert_command_failed(&out);
        }
        return;
    }
    let script = "for f in $(find /sys/fs/cgroup -maxdepth 2 \\( -name cgroup.procs -o -name tasks \\) 2>/dev/null); do cat \"$f\" 2>/dev/null; done; echo ---; ls /proc | grep -E '^[0-9]+$'";
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let out = env.sh(mode, script);
        assert_status(&out, 0);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (listed, own) = text.split_once("---").unwrap_or((&text, ""));
        let own: Vec<&str> = own.split_whitespace().collect();
        for pid in listed.split_whitespace() {
            // A pid that ended between the two listings is the call's own, gone.
            if pid != "0" && !own.contains(&pid) && pid.parse::<u32>().is_ok_and(|p| p > 64) {
                failures.push(format!("{mode}: pid {pid} listed in a cgroup file"));
            }
        }
    }
    assert_none(failures);
}
