//! The host's process table, read from `/proc`: who is whose parent, and what each runs.
//! Used to end a process tree without a PID namespace (`exec::wait`), and to show what a kept
//! namespace holds (`kept`).

use std::collections::HashMap;

/// One process as `/proc/PID/stat` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub parent: libc::pid_t,
    /// Field 22, in clock ticks since boot: with the pid, names one process for good (a pid
    /// is reused, the pair never is).
    pub start: u64,
    /// Ended, not yet reaped.
    pub zombie: bool,
}

/// Reads `/proc/PID/stat` of `pid`; `None` once the process is gone.
pub fn entry(pid: libc::pid_t) -> Option<Entry> {
    parse_stat(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
}

/// Parses a `stat` line as bytes: the name (field 2) is whatever the process set it to
/// (`PR_SET_NAME`), not necessarily UTF-8, and a process whose name could hide it from
/// this table would hide it from everything that ends a call's processes.
fn parse_stat(stat: &[u8]) -> Option<Entry> {
    // The name may hold spaces and parentheses: fields count from its last ')'.
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Entry {
        zombie: *fields.first()? == "Z",
        parent: fields.get(1)?.parse().ok()?,
        start: fields.get(22 - 3)?.parse().ok()?,
    })
}

/// Every process's entry, by pid.
pub fn table() -> HashMap<libc::pid_t, Entry> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(|pid| Some((pid, entry(pid)?)))
        .collect()
}

/// The processes descended from `root` (not `root` itself), parents before children.
pub fn descendants(table: &HashMap<libc::pid_t, Entry>, root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        let mut children: Vec<libc::pid_t> = table
            .iter()
            .filter(|(pid, e)| e.parent == parent && **pid != parent)
            .map(|(pid, _)| *pid)
            .collect();
        children.sort_unstable();
        found.extend(children);
        next += 1;
    }
    found.remove(0);
    found
}

/// What `pid` runs, its arguments joined by spaces (`[name]` when it has none, as `ps`
/// shows a kernel thread or a zombie); `None` once it is gone.
pub fn command_line(pid: libc::pid_t) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    if !words.is_empty() {
        return Some(words.join(" "));
    }
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(format!("[{}]", name.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_from_the_end_of_the_name() {
        let stat = b"42 (a) b (c)) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        let entry = Some(Entry {
            parent: 7,
            start: 987654,
            zombie: false,
        });
        assert_eq!(parse_stat(stat), entry);
        assert_eq!(parse_stat(b"42 (x) Z 1").map(|e| e.zombie), None);
        // A name that is no UTF-8 at all hides nothing.
        let odd = b"42 (\xff\xfe) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        assert_eq!(parse_stat(odd), entry);
    }

    #[test]
    fn descendants_come_parents_first() {
        let e = |parent| Entry {
            parent,
            start: 0,
            zombie: false,
        };
        let table = HashMap::from([
            (10, e(1)),
            (11, e(10)),
            (12, e(11)),
            (13, e(10)),
            (20, e(1)),
        ]);
        assert_eq!(descendants(&table, 10), vec![11, 13, 12]);
        assert_eq!(descendants(&table, 20), Vec::<libc::pid_t>::new());
    }
}
