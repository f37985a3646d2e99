use std::os::fd::AsRawFd;

use super::*;

#[test]
fn a_proc_fd_path_is_written_in_place() {
    let mut buf = [0u8; 32];
    assert_eq!(proc_fd_path(7, &mut buf), Some(c"/proc/self/fd/7"));
    assert_eq!(
        proc_fd_path(i32::MAX, &mut buf),
        Some(c"/proc/self/fd/2147483647")
    );
}

#[test]
fn fork_is_refused_while_another_thread_runs() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || rx.recv());
    match fork() {
        Ok(0) => exit_immediately(0),
        Ok(pid) => {
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
            panic!("forked while {} threads ran", thread_count().unwrap_or(0));
        }
        Err(e) => assert!(e.to_string().contains("threads"), "{e}"),
    }
    drop(tx);
    let _ = other.join();
}

#[test]
fn the_thread_count_sees_a_running_thread() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || rx.recv());
    let during = thread_count().unwrap();
    drop(tx);
    let _ = other.join();
    assert!(during >= 2, "{during}");
}

#[test]
fn closed_fds_are_not_terminals() {
    let (read_end, _write_end) = nix::unistd::pipe().unwrap();
    assert!(!is_terminal(read_end.as_raw_fd()));
    assert_eq!(terminal_name(read_end.as_raw_fd()), None);
    // A number nothing has open.
    let closed = 1 << 20;
    assert!(!is_terminal(closed));
    assert_eq!(terminal_name(closed), None);
    assert!(!is_terminal(-1));
    assert_eq!(terminal_name(-1), None);
}
