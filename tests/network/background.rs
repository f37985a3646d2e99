//! The proxy lives as long as the sandbox: a process the command leaves in the background
//! (the call keeps it) still reaches an allowed host after sandgate returned, and once it
//! ends no sandgate process (proxy, supervisor, init) and no mount of the call is left on
//! the host.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::network::call::*;
use crate::support::registry::StandIn;
use crate::support::*;

/// The processes whose command line or environment mentions `needle`, as `(pid, argv)`.
/// sandgate's proxy and supervisor are forks of the call: they keep its command line
/// (which names the workspace) and its environment (which names the test's directories).
fn processes_mentioning(needle: &str) -> Vec<(u32, Vec<String>)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot list /proc");
    };
    let mentions = |raw: &[u8]| {
        raw.split(|b| *b == 0)
            .any(|a| String::from_utf8_lossy(a).contains(needle))
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let argv: Vec<String> = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            (pid != me && (mentions(&cmdline) || mentions(&environ))).then_some((pid, argv))
        })
        .collect()
}

/// Whether `argv` is a sandgate process (the call itself, or a process it forked: the
/// proxy and the supervisor keep its command line).
fn is_sandgate(argv: &[String]) -> bool {
    argv.first()
        .is_some_and(|a| Path::new(a).file_name().is_some_and(|n| n == "sandgate"))
}

/// Waits up to `limit` for `done`, polling.
fn wait_for(limit: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

#[test]
fn the_proxy_serves_background_processes_and_ends_with_them() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let upstream = StandIn::plain(Ipv4Addr::LOCALHOST);
    let ws = env.ws.to_string_lossy().into_owned();
    // The background job waits for the test's go-ahead (at most 30 s), so it fetches
    // only after sandgate returned, whatever the machine's speed.
    let script = format!(
        "cd '{ws}' || exit 1; ( i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
         curl -sS --max-time 20 -o late.body '{}'; echo $? > late.tmp; mv late.tmp late.rc ) \
         </dev/null >/dev/null 2>&1 & exit 0",
        upstream.url("/t/late")
    );
    // The call's output goes to files, not pipes: it has returned when sandgate has exited,
    // whatever else holds its output open.
    let (stdout, stderr) = (env.root.join("call.out"), env.root.join("call.err"));
    let create = |path: &Path| std::fs::File::create(path).unwrap();
    let mut flags = allow(&[&upstream.authority()], true);
    flags.push("--keep-background".into());
    let mut cmd = command(&env, &flags, &denial_log(&env), &["/bin/sh", "-c", &script]);
    let status = cmd
        .stdout(create(&stdout))
        .stderr(create(&stderr))
        .status()
        .unwrap_or_else(|e| panic!("cannot run sandgate: {e}"));
    assert!(
        status.success(),
        "{status:?}: {}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    assert!(
        !env.ws.join("late.rc").exists(),
        "the job ran before the call returned"
    );

    // sandgate returned; its proxy (and supervisor) serve on for the job.
    let root = env.root.to_string_lossy().into_owned();
    let left = processes_mentioning(&root);
    assert!(
        left.iter().any(|(_, argv)| is_sandgate(argv)),
        "no sandgate process left to serve the background job: {left:?}"
    );
    std::fs::write(env.ws.join("go"), "").unwrap();
    assert!(
        wait_for(Duration::from_secs(40), || env.ws.join("late.rc").exists()),
        "the background job never finished"
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("late.rc"))
            .unwrap_or_default()
            .trim(),
        "0",
        "the background curl failed"
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("late.body")).unwrap_or_default(),
        "served /t/late"
    );
    upstream.assert_served(&["/t/late"]);

    // The job has ended: the proxy and the supervisor end with it.
    assert!(
        wait_for(Duration::from_secs(10), || processes_mentioning(&root)
            .is_empty()),
        "left behind: {:?}",
        processes_mentioning(&root)
    );
    // No mount of the call (a cache overlay, the workspace's private temp) on the host.
    let private_tmp = private_tmp_of(&env);
    let leaf = private_tmp
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_else(|e| panic!("mountinfo: {e}"));
    let leaked: Vec<&str> = mountinfo
        .lines()
        .filter(|l| l.contains(&root) || (!leaf.is_empty() && l.contains(&leaf)))
        .collect();
    assert!(leaked.is_empty(), "mounts left on the host: {leaked:?}");
}
