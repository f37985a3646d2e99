//! The call's cgroups: found by trying, made before the fork, joined by the child, removed
//! after the call.
//!
//! Where a controller can hold a call's cgroup, tried in this order for each of `pids` and
//! `memory`:
//! - **cgroup v2**, when the unified hierarchy offers the controller. As root, beneath a
//!   `sandgate` cgroup at the top of the hierarchy; otherwise beside sandgate's own cgroup
//!   (in its parent), which is writable where the system delegates a subtree to the user
//!   (systemd's `user@UID.service`). Never *inside* sandgate's own cgroup: a cgroup that
//!   holds processes may not pass controllers to children (the no-internal-process rule),
//!   and moving the caller's shell out of its cgroup is not sandgate's to do.
//! - **cgroup v1**, the controller's own hierarchy: beneath the cgroup sandgate is in.
//!
//! Nothing is read to decide whether a limit can hold: sandgate makes the cgroup and
//! writes the limit, and a refusal anywhere on the way is the answer, with its reason.
//!
//! **Placement.** A call's cgroup is `sandgate-PID-START` (sandgate's pid and start time).
//! sandgate opens each cgroup's join file before forking (`Version::join_file`); the child,
//! still single-threaded, writes itself into them as
//! the first thing it does (`Join::enter`, the first step of `sandbox::Prepared::apply`),
//! before it unshares, mounts or forks anything. So every process of the call — the
//! command, whatever it forks, and any process the child itself forks before the command —
//! starts inside, whatever the command does right after `execve`. (A parent writing the
//! child's pid would race with a command that forks at once, since nothing makes the child
//! wait for it.) The invariant this relies on: **the child forks nothing before it has
//! applied its sandbox**.
//!
//! **Removal.** After the call its cgroups are removed. One that still holds processes (a
//! command's background processes outlive it) is left; the next call that makes cgroups in
//! the same place removes every `sandgate-PID-START` whose sandgate has exited and that is
//! empty by then. A cgroup is never removed while its sandgate runs.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Kind;

/// The kernel's largest pid count (`PID_MAX_LIMIT` on 64-bit): `pids.max` takes no more.
const PID_MAX_LIMIT: u64 = 1 << 22;

/// What a call's cgroup is named after.
const PREFIX: &str = "sandgate-";

/// The cgroup interface a cgroup was made through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Version {
    #[serde(rename = "cgroup-v1")]
    V1,
    #[serde(rename = "cgroup-v2")]
    V2,
}

impl Version {
    /// The file a process writes `0` into to join a cgroup. On v1, `tasks`: it moves the
    /// writing thread alone, which the kernel does without the global lock that moving a
    /// whole process takes (`cgroup.procs` waits for an RCU grace period: 12 ms on a busy
    /// machine, at every call). The child is single-threaded when it joins, so its one
    /// thread is the process, and everything it starts later is born inside. v2 has no
    /// such file for a domain cgroup: `cgroup.procs`.
    fn join_file(self) -> &'static str {
        match self {
            Version::V1 => "tasks",
            Version::V2 => "cgroup.procs",
        }
    }
}

/// One cgroup of the call: on v2 it holds both controllers, on v1 one each.
#[derive(Debug)]
struct Made {
    version: Version,
    dir: PathBuf,
    kinds: Vec<Kind>,
}

/// Why a limit cannot hold here: each place tried, and what refused it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unheld {
    pub kind: Kind,
    pub why: String,
}

/// Where a limit holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Held {
    pub kind: Kind,
    pub version: Version,
    /// The call's cgroup.
    pub dir: PathBuf,
}

/// The cgroups of one call, removed when dropped.
#[derive(Debug, Default)]
pub struct CallCgroups {
    made: Vec<Made>,
}

/// What the child writes itself into: each cgroup's `tasks` (v1) or `cgroup.procs` (v2),
/// opened by sandgate.
#[derive(Debug)]
pub struct Join {
    files: Vec<OwnedFd>,
}

impl Join {
    /// Moves the calling process into the call's cgroups (`0` names the writer itself).
    /// Async-signal-safe: one `write` per fd, then the fds are closed, so nothing the
    /// child executes inherits them.
    ///
    /// # Errors
    /// The kernel refused the move.
    pub fn enter(self) -> io::Result<()> {
        for fd in &self.files {
            let n = nix::unistd::write(fd.as_fd(), b"0")?;
            if n != 1 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
        }
        Ok(())
    }
}

impl CallCgroups {
    /// Makes the call's cgroups with `limits` written, trying each place in turn. Returns
    /// the cgroups (possibly none) and, for each limit that cannot hold here, why.
    pub fn make(limits: &[(Kind, u64)]) -> (CallCgroups, Vec<Held>, Vec<Unheld>) {
        let name = match own_name() {
            Ok(name) => name,
            Err(e) => {
                let why = format!("cannot read sandgate's own start time: {e}");
                let unheld = limits
                    .iter()
                    .map(|(kind, _)| Unheld {
                        kind: *kind,
                        why: why.clone(),
                    })
                    .collect();
                return (CallCgroups::default(), vec![], unheld);
            }
        };
        let proc_cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let places = Places::parse(&proc_cgroup, &mountinfo);
        let root = nix::unistd::geteuid().is_root();
        places.make(limits, &name, root)
    }

    /// Opens what the child writes itself into; `None` when the call has no cgroup.
    ///
    /// # Errors
    /// A file that cannot be opened for writing.
    pub fn join(&self) -> io::Result<Option<Join>> {
        if self.made.is_empty() {
            return Ok(None);
        }
        let files = self
            .made
            .iter()
            .map(|m| {
                fs::OpenOptions::new()
                    .write(true)
                    .open(m.dir.join(m.version.join_file()))
                    .map(OwnedFd::from)
            })
            .collect::<io::Result<_>>()?;
        Ok(Some(Join { files }))
    }

    /// Each limit the kernel enforced during the call, and how often: processes it killed
    /// for memory, forks it refused for the pid limit.
    pub fn reached(&self) -> Vec<(Kind, u64)> {
        let mut out = Vec::new();
        for m in &self.made {
            for kind in &m.kinds {
                let count = match (kind, m.version) {
                    (Kind::LimitPids, _) => counter(&m.dir.join("pids.events"), "max"),
                    (Kind::LimitMemory, Version::V2) => {
                        counter(&m.dir.join("memory.events"), "oom_kill")
                    }
                    (Kind::LimitMemory, Version::V1) => {
                        counter(&m.dir.join("memory.oom_control"), "oom_kill")
                    }
                };
                if let Some(n) = count.filter(|n| *n > 0) {
                    out.push((*kind, n));
                }
            }
        }
        out
    }
}

impl Drop for CallCgroups {
    /// Removes the call's cgroups. One that still holds processes stays (the kernel refuses
    /// with `EBUSY`), for a later call's sweep.
    fn drop(&mut self) {
        for m in &self.made {
            let _ = fs::remove_dir(&m.dir);
        }
    }
}

/// Reads `key N` from a cgroup's flat-keyed file.
fn counter(file: &Path, key: &str) -> Option<u64> {
    fs::read_to_string(file).ok()?.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// `sandgate-PID-START`, from this process's pid and start time (clock ticks since boot):
/// together they name one process, never a later one that got the same pid.
fn own_name() -> io::Result<String> {
    let pid = std::process::id();
    let start = start_time(pid)?.ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    Ok(format!("{PREFIX}{pid}-{start}"))
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`), `None` when there is
/// no such process.
fn start_time(pid: u32) -> io::Result<Option<u64>> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(crate::process_table::entry(pid).map(|e| e.start))
}

/// Whether the sandgate that made cgroup `name` has exited.
fn owner_gone(name: &OsStr) -> bool {
    let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
        return false;
    };
    let Some((pid, start)) = rest.split_once('-') else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    match start_time(pid) {
        Ok(Some(now)) => now != start,
        Ok(None) => true,
        // Unknown: it may still run, so its cgroup stays.
        Err(_) => false,
    }
}

/// Removes the empty cgroups of calls whose sandgate has exited, beneath `parent`.
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.as_bytes().starts_with(PREFIX.as_bytes()) && owner_gone(&name) {
            // Refused (EBUSY) while processes remain in it: left for a later sweep.
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// The cgroup hierarchies this process is in, as `/proc/self/cgroup` and
/// `/proc/self/mountinfo` show them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Places {
    /// The unified hierarchy: the directory of sandgate's own cgroup, and the hierarchy's
    /// top as mounted here.
    v2: Option<(PathBuf, PathBuf)>,
    /// Each v1 controller's hierarchy: the controller, the directory of sandgate's own
    /// cgroup in it.
    v1: Vec<(String, PathBuf)>,
}

impl Places {
    fn parse(proc_cgroup: &str, mountinfo: &str) -> Places {
        let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
        let mut places = Places::default();
        for line in proc_cgroup.lines() {
            let mut fields = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if controllers.is_empty() {
                if let Some(m) = mounts.iter().find(|m| m.fstype == "cgroup2") {
                    if let Some(dir) = m.dir_of(path) {
                        places.v2 = Some((dir, m.point.clone()));
                    }
                }
                continue;
            }
            for controller in controllers.split(',') {
                let mount = mounts.iter().find(|m| {
                    m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == controller)
                });
                if let Some(dir) = mount.and_then(|m| m.dir_of(path)) {
                    places.v1.push((controller.to_owned(), dir));
                }
            }
        }
        places
    }

    /// Makes the call's cgroup `name` for each limit, v2 first.
    fn make(
        &self,
        limits: &[(Kind, u64)],
        name: &str,
        root: bool,
    ) -> (CallCgroups, Vec<Held>, Vec<Unheld>) {
        let mut cgroups = CallCgroups::default();
        let mut held = Vec::new();
        let mut tried: Vec<(Kind, Vec<String>)> =
            limits.iter().map(|(k, _)| (*k, vec![])).collect();
        let mut note = |kind: Kind, why: String| {
            if let Some((_, whys)) = tried.iter_mut().find(|(k, _)| *k == kind) {
                whys.push(why);
            }
        };
        let mut left: Vec<(Kind, u64)> = limits.to_vec();
        match &self.v2 {
            Some((own, top)) => {
                let parent = if root {
                    Some(top.join("sandgate"))
                } else {
                    own.parent()
                        .filter(|p| p.starts_with(top))
                        .map(Path::to_path_buf)
                };
                match parent {
                    Some(parent) => {
                        let (made, refused) = make_v2(&parent, top, name, &left);
                        for (kind, why) in refused {
                            note(kind, format!("cgroup v2 ({}): {why}", parent.display()));
                        }
                        if let Some(made) = made {
                            left.retain(|(k, _)| !made.kinds.contains(k));
                            held.extend(made.kinds.iter().map(|k| Held {
                                kind: *k,
                                version: Version::V2,
                                dir: made.dir.clone(),
                            }));
                            cgroups.made.push(made);
                        }
                    }
                    None => {
                        for (kind, _) in &left {
                            note(
                                *kind,
                                format!(
                                    "cgroup v2 ({}): sandgate's own cgroup is the top of the hierarchy, and only root may make cgroups there",
                                    top.display()
                                ),
                            );
                        }
                    }
                }
            }
            None => {
                for (kind, _) in &left {
                    note(
                        *kind,
                        "cgroup v2: this process is in no unified hierarchy".into(),
                    );
                }
            }
        }
        for (kind, value) in left.clone() {
            let controller = kind.controller();
            let Some((_, dir)) = self.v1.iter().find(|(c, _)| c == controller) else {
                note(
                    kind,
                    format!("cgroup v1: no {controller} hierarchy is mounted"),
                );
                continue;
            };
            match make_v1(dir, name, kind, value) {
                Ok(made) => {
                    left.retain(|(k, _)| *k != kind);
                    held.push(Held {
                        kind,
                        version: Version::V1,
                        dir: made.dir.clone(),
                    });
                    cgroups.made.push(made);
                }
                Err(why) => note(kind, format!("cgroup v1 ({}): {why}", dir.display())),
            }
        }
        let unheld = tried
            .into_iter()
            .filter(|(k, _)| left.iter().any(|(l, _)| l == k))
            .map(|(kind, whys)| Unheld {
                kind,
                why: whys.join("; "),
            })
            .collect();
        (cgroups, held, unheld)
    }
}

/// Says what failed where, for a message.
fn failed(what: &str, path: &Path, e: &io::Error) -> String {
    format!("cannot {what} {}: {e}", path.display())
}

/// Makes `parent/name` on the unified hierarchy with the controllers of `limits` that it
/// can enable, and writes their limits. Returns the cgroup (none when no controller could
/// be enabled) and why each other controller was refused.
fn make_v2(
    parent: &Path,
    top: &Path,
    name: &str,
    limits: &[(Kind, u64)],
) -> (Option<Made>, Vec<(Kind, String)>) {
    let mut refused = Vec::new();
    // The top's controllers are all the hierarchy has: one bound to a v1 hierarchy is not
    // among them, and then nothing is made here.
    let controllers = words(&top.join("cgroup.controllers"));
    let (offered, absent): (Vec<_>, Vec<_>) = limits.iter().partition(|(kind, _)| {
        controllers
            .as_ref()
            .is_ok_and(|o| o.iter().any(|c| c == kind.controller()))
    });
    for (kind, _) in absent {
        let why = match &controllers {
            Ok(_) => format!(
                "the {} controller is not in this hierarchy (a cgroup v1 hierarchy has it, or the kernel lacks it)",
                kind.controller()
            ),
            Err(why) => why.clone(),
        };
        refused.push((kind, why));
    }
    if offered.is_empty() {
        return (None, refused);
    }
    if let Err(e) = fs::create_dir(parent) {
        if e.kind() != io::ErrorKind::AlreadyExists {
            let why = failed("create", parent, &e);
            refused.extend(offered.iter().map(|(k, _)| (*k, why.clone())));
            return (None, refused);
        }
    }
    let mut enabled: Vec<(Kind, u64)> = Vec::new();
    for (kind, value) in offered {
        match enable_v2(parent, top, kind.controller()) {
            Ok(()) => enabled.push((kind, value)),
            Err(why) => refused.push((kind, why)),
        }
    }
    if enabled.is_empty() {
        return (None, refused);
    }
    sweep(parent);
    let dir = parent.join(name);
    if let Err(e) = fs::create_dir(&dir) {
        let why = failed("create", &dir, &e);
        refused.extend(enabled.iter().map(|(k, _)| (*k, why.clone())));
        return (None, refused);
    }
    let made = Made {
        version: Version::V2,
        dir,
        kinds: enabled.iter().map(|(k, _)| *k).collect(),
    };
    for (kind, value) in &enabled {
        let written = match kind {
            Kind::LimitPids => write(
                &made.dir,
                "pids.max",
                &value.min(&PID_MAX_LIMIT).to_string(),
            ),
            Kind::LimitMemory => {
                write(&made.dir, "memory.max", &value.to_string()).and_then(|()| {
                    // Memory only, never swap: where swap is accounted the call may use
                    // none, so that it is bound instead of swapping past its limit.
                    if made.dir.join("memory.swap.max").exists() {
                        write(&made.dir, "memory.swap.max", "0")
                    } else {
                        Ok(())
                    }
                })
            }
        };
        if let Err(why) = written {
            refused.extend(enabled.iter().map(|(k, _)| (*k, why.clone())));
            // Dropped, and so removed: a limit half written holds nothing.
            drop(CallCgroups { made: vec![made] });
            return (None, refused);
        }
    }
    (Some(made), refused)
}

/// The words of a cgroup's space-separated list file.
fn words(file: &Path) -> Result<Vec<String>, String> {
    fs::read_to_string(file)
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .map_err(|e| failed("read", file, &e))
}

/// Makes `controller` available to the children of `parent`, enabling it on the way down
/// from the top where needed.
fn enable_v2(parent: &Path, top: &Path, controller: &str) -> Result<(), String> {
    let has = |file: &Path| words(file).map(|w| w.iter().any(|c| c == controller));
    if has(&parent.join("cgroup.subtree_control"))? {
        return Ok(());
    }
    if !has(&parent.join("cgroup.controllers"))? {
        // Not passed down to `parent`: enable it in the ancestors first (only the part of
        // the path sandgate made or may write; the top's own controllers are its own).
        match parent.parent().filter(|p| p.starts_with(top)) {
            Some(grandparent) if parent != top => enable_v2(grandparent, top, controller)?,
            _ => {
                return Err(format!(
                    "the {controller} controller is not available there (it is bound to a cgroup v1 hierarchy, or not passed down)"
                ))
            }
        }
    }
    let file = parent.join("cgroup.subtree_control");
    fs::write(&file, format!("+{controller}")).map_err(|e| failed("write", &file, &e))
}

/// Makes `dir/name` on the v1 hierarchy of `kind`'s controller and writes the limit.
fn make_v1(dir: &Path, name: &str, kind: Kind, value: u64) -> Result<Made, String> {
    sweep(dir);
    let made = Made {
        version: Version::V1,
        dir: dir.join(name),
        kinds: vec![kind],
    };
    fs::create_dir(&made.dir).map_err(|e| failed("create", &made.dir, &e))?;
    let written = match kind {
        Kind::LimitPids => write(&made.dir, "pids.max", &value.min(PID_MAX_LIMIT).to_string()),
        Kind::LimitMemory => {
            write(&made.dir, "memory.limit_in_bytes", &value.to_string()).and_then(|()| {
                // Memory and swap together, where swap is accounted: without it the call
                // would swap past its limit instead of being bound.
                if made.dir.join("memory.memsw.limit_in_bytes").exists() {
                    write(&made.dir, "memory.memsw.limit_in_bytes", &value.to_string())
                } else {
                    Ok(())
                }
            })
        }
    };
    match written {
        Ok(()) => Ok(made),
        Err(why) => {
            drop(CallCgroups { made: vec![made] });
            Err(why)
        }
    }
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), String> {
    let path = dir.join(file);
    fs::write(&path, value).map_err(|e| failed(&format!("write {value} to"), &path, &e))
}

/// One line of `/proc/self/mountinfo`, the fields used here.
#[derive(Debug)]
struct Mount {
    /// The directory of the filesystem mounted here (`/` for a hierarchy's top; deeper
    /// for a cgroup namespace's or a container's view).
    root: PathBuf,
    point: PathBuf,
    fstype: String,
    super_options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (left, right) = line.split_once(" - ")?;
        let mut left = left.split(' ');
        let root = unescape(left.nth(3)?);
        let point = unescape(left.next()?);
        let mut right = right.split(' ');
        let fstype = right.next()?.to_owned();
        let super_options = right.nth(1).unwrap_or_default().to_owned();
        Some(Mount {
            root,
            point,
            fstype,
            super_options,
        })
    }

    /// Where the cgroup `path` (as `/proc/self/cgroup` names it) is reached through this
    /// mount, if it lies in what the mount shows.
    fn dir_of(&self, path: &str) -> Option<PathBuf> {
        let below = Path::new(path).strip_prefix(&self.root).ok()?;
        Some(match below.as_os_str().is_empty() {
            true => self.point.clone(),
            false => self.point.join(below),
        })
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .map(|d| d.iter().fold(0u32, |n, b| n * 8 + u32::from(b - b'0')));
        match octal.and_then(|n| u8::try_from(n).ok()) {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// What `doctor` says of the cgroup limits here: made for real, joined by a throwaway
/// child, removed.
#[derive(Debug, Serialize)]
pub struct Probe {
    pub held: Vec<Held>,
    pub unheld: Vec<Unheld>,
}

/// Tries to make, join and remove a cgroup for each cgroup limit (forks: sandgate must be
/// single-threaded).
pub fn probe() -> Probe {
    // Values no process of the probe comes near.
    let limits = [(Kind::LimitPids, 1 << 16), (Kind::LimitMemory, 1 << 40)];
    let (cgroups, mut held, mut unheld) = CallCgroups::make(&limits);
    let joined = cgroups.join().and_then(|join| match join {
        Some(join) => try_join(join),
        None => Ok(()),
    });
    if let Err(e) = joined {
        let why = format!("the kernel refused to move a process into it: {e}");
        unheld.extend(held.drain(..).map(|h| Unheld {
            kind: h.kind,
            why: why.clone(),
        }));
    }
    drop(cgroups);
    unheld.sort_by_key(|u| u.kind);
    Probe { held, unheld }
}

/// Joins in a throwaway child, which exits at once.
fn try_join(join: Join) -> io::Result<()> {
    use nix::sys::wait::{waitpid, WaitStatus};
    match crate::sys::fork()? {
        0 => crate::sys::exit_immediately(match join.enter() {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
        }),
        pid => {
            drop(join);
            match waitpid(nix::unistd::Pid::from_raw(pid), None)? {
                WaitStatus::Exited(_, 0) => Ok(()),
                WaitStatus::Exited(_, errno) => Err(io::Error::from_raw_os_error(errno)),
                _ => Err(io::Error::from_raw_os_error(libc::EIO)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn a_hybrid_machine_has_its_controllers_in_v1_and_a_unified_hierarchy_beside() {
        let places = Places::parse(
            "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/42\n0::/\n",
            MOUNTINFO,
        );
        assert_eq!(
            places.v2,
            Some((
                PathBuf::from("/sys/fs/cgroup/unified"),
                PathBuf::from("/sys/fs/cgroup/unified")
            ))
        );
        assert_eq!(
            places.v1,
            vec![
                (
                    "name=systemd".to_owned(),
                    PathBuf::from("/sys/fs/cgroup/systemd")
                ),
                ("pids".to_owned(), PathBuf::from("/sys/fs/cgroup/pids")),
                (
                    "memory".to_owned(),
                    PathBuf::from("/sys/fs/cgroup/memory/process_api/42")
                ),
            ]
        );
    }

    #[test]
    fn a_container_sees_its_cgroup_beneath_the_mounts_root() {
        let mountinfo = "50 40 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n\
                         51 40 0:31 /my\\040dir /mnt/x rw - cgroup cgroup rw,pids\n";
        let places = Places::parse("0::/docker/abc/app\n3:pids:/my dir/sub\n", mountinfo);
        assert_eq!(
            places.v2,
            Some((
                PathBuf::from("/sys/fs/cgroup/app"),
                PathBuf::from("/sys/fs/cgroup")
            ))
        );
        assert_eq!(
            places.v1,
            vec![("pids".to_owned(), PathBuf::from("/mnt/x/sub"))]
        );
        // A cgroup outside what the mount shows cannot be reached through it.
        assert_eq!(Places::parse("0::/elsewhere\n", mountinfo).v2, None);
    }

    /// A v2 hierarchy laid out as plain directories: the files the kernel would make are
    /// written by the test, and what sandgate writes can be read back.
    fn fake_v2(top: &Path, controllers: &str) -> io::Result<()> {
        fs::write(top.join("cgroup.controllers"), controllers)?;
        fs::write(top.join("cgroup.subtree_control"), "")?;
        Ok(())
    }

    #[test]
    fn on_v2_root_makes_a_sandgate_subtree_and_passes_the_controllers_down(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let top = dir.path();
        fake_v2(top, "cpu memory pids")?;
        let places = Places {
            v2: Some((top.join("user.slice/session-1.scope"), top.to_path_buf())),
            v1: vec![],
        };
        // The `sandgate` cgroup as the kernel would make it, its controllers passed down.
        fs::create_dir(top.join("sandgate"))?;
        fake_v2(&top.join("sandgate"), "memory pids")?;
        let limits = [(Kind::LimitPids, 50), (Kind::LimitMemory, 64 << 20)];
        let (cgroups, held, unheld) = places.make(&limits, "sandgate-1-2", true);
        assert_eq!(unheld, vec![]);
        assert_eq!(held.len(), 2);
        assert!(held.iter().all(|h| h.version == Version::V2));
        let call = top.join("sandgate/sandgate-1-2");
        assert_eq!(fs::read_to_string(call.join("pids.max"))?, "50");
        assert_eq!(fs::read_to_string(call.join("memory.max"))?, "67108864");
        // Fake cgroups are directories with files: the drop cannot remove this one.
        std::mem::forget(cgroups);
        Ok(())
    }

    #[test]
    fn a_controller_v2_does_not_offer_is_named_with_why_and_v1_is_tried(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let top = dir.path().join("unified");
        fs::create_dir(&top)?;
        fake_v2(&top, "hugetlb")?;
        let pids = dir.path().join("pids");
        let places = Places {
            v2: Some((top.clone(), top.clone())),
            v1: vec![("pids".into(), pids.clone())],
        };
        let (_, held, unheld) = places.make(&[(Kind::LimitPids, 50)], "sandgate-1-2", true);
        assert_eq!(held, vec![]);
        assert_eq!(unheld.len(), 1);
        let why = &unheld[0].why;
        assert!(
            why.contains("cgroup v2") && why.contains("not in this hierarchy"),
            "{why}"
        );
        assert!(
            why.contains("cgroup v1") && why.contains("cannot create"),
            "{why}"
        );
        // Nothing was made where the controller is not offered.
        assert!(!top.join("sandgate").exists());
        Ok(())
    }

    #[test]
    fn unprivileged_on_v2_the_cgroup_goes_beside_sandgates_own() {
        let places = Places {
            v2: Some((
                PathBuf::from("/sys/fs/cgroup"),
                PathBuf::from("/sys/fs/cgroup"),
            )),
            v1: vec![],
        };
        let (_, _, unheld) = places.make(&[(Kind::LimitMemory, 1)], "sandgate-1-2", false);
        assert!(
            unheld[0].why.contains("only root may make cgroups there"),
            "{unheld:?}"
        );
    }

    #[test]
    fn counters_and_owners_are_read_as_the_kernel_writes_them() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("memory.oom_control");
        fs::write(&file, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")?;
        assert_eq!(counter(&file, "oom_kill"), Some(3));
        assert_eq!(counter(&file, "max"), None);
        let me = own_name()?;
        assert!(!owner_gone(OsStr::new(&me)), "{me}");
        assert!(owner_gone(OsStr::new(&format!("{me}1"))));
        assert!(!owner_gone(OsStr::new("sandgate")), "not a call's cgroup");
        assert_eq!(unescape(r"/a\040b\\c"), PathBuf::from(r"/a b\\c"));
        Ok(())
    }
}
