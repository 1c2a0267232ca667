//! Looking at the processes a zklock test started: alive or not, their pids, their stderr;
//! killed when a test fails.

use std::process::Child;

use super::PATIENCE;
use crate::common::eventually;

/// All a child wrote to its piped stderr (it has exited).
pub fn stderr_of(child: &mut Child) -> String {
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    stderr
}

/// Whether process `pid` still runs (a zombie, dead but not yet reaped, does not count).
pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses: `pid (comm) S ...`.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Waits (bounded) for a script to write a pid into `file`, and reads it.
pub fn read_pid(file: &std::path::Path) -> i32 {
    let mut pid = None;
    eventually(PATIENCE, "the script writes a pid", || {
        pid = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        pid.is_some()
    });
    pid.unwrap()
}

/// SIGKILLs the processes it names when dropped: a test that fails leaves nothing running.
pub struct KillOnDrop(pub Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                // SAFETY: kill(2) on a process this test started (directly or through zklock).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}
