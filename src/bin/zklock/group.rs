//! The command's process group: what zklock signals, and what dies with zklock.
//!
//! Rules this file keeps (issue: a command, or a helper it started, outliving zklock's lock):
//! - the command runs as the leader of a process group of its own, and every signal zklock
//!   sends it (a lost lock, the end of `--grace`, a forwarded Ctrl-C or SIGTERM) goes to the
//!   whole group, `kill(-pgid)`, so `sh -c 'worker & wait'` loses its worker too;
//! - the leader is not reaped while zklock may still signal the group: an unreaped leader keeps
//!   the group id from being reused (exits are seen with `waitid(WNOWAIT)`);
//! - on Linux the command dies with zklock, `kill -9` included: the leader has a parent-death
//!   signal (SIGKILL), and a guardian process forked by zklock kills the whole group when zklock
//!   dies. Both follow the *thread* that created them, so both are created on the main thread,
//!   which lives as long as zklock.
//!
//! Outside zklock's reach: a process that leaves the group on purpose (`setsid`, `setpgid`, a
//! double-forking daemon), and on other Unixes the death of zklock itself (no parent-death
//! signal there).

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};

/// Spawns `cmd` as the leader of a new process group; on Linux it gets SIGKILL if zklock dies.
/// Call on the main thread (the parent-death signal follows the spawning thread).
pub(crate) fn spawn(cmd: &mut Command) -> io::Result<Child> {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (prctl, getppid, raise); it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // zklock died between the fork and the prctl: nobody would send it any more.
                if libc::getppid() != parent {
                    libc::raise(libc::SIGKILL);
                }
                Ok(())
            });
        }
    }
    cmd.spawn()
}

/// Sends `signo` to every process in the group led by `pgid`, whose leader the caller has not
/// reaped yet (so the id still names that group).
pub(crate) fn signal(pgid: libc::pid_t, signo: libc::c_int) {
    // SAFETY: kill(2) on a process group whose unreaped leader is our child.
    if unsafe { libc::kill(-pgid, signo) } != 0 {
        log::debug!(
            "signal {signo} to the command's group {pgid}: {}",
            io::Error::last_os_error()
        );
    }
}

/// Whether our child `pid` has exited, without reaping it (the group id stays reserved).
pub(crate) fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: a zeroed siginfo_t is valid; waitid(WNOHANG | WNOWAIT) only looks at our child.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) != 0 {
            // ECHILD: already reaped (not by us), so it has exited; EINTR: look again later.
            return io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD);
        }
        // With WNOHANG, si_pid stays 0 while the child runs.
        info.si_pid() != 0
    }
}

/// Reaps the exited (or killed) leader and returns its status.
pub(crate) fn reap(child: &mut Child) -> ExitStatus {
    match child.wait() {
        Ok(status) => status,
        Err(e) => {
            log::error!("waiting for the command: {e}");
            ExitStatus::from_raw(libc::SIGKILL)
        }
    }
}

/// A process that kills the command's group when zklock dies (Linux); dismissed when dropped.
pub(crate) struct Guardian {
    #[cfg(target_os = "linux")]
    pid: libc::pid_t,
}

impl Guardian {
    /// Forks the guardian of the group `pgid`. Call on the main thread, after spawning the
    /// command and before reaping it. `None` (logged) if it cannot be forked, or off Linux.
    pub(crate) fn start(pgid: libc::pid_t) -> Option<Guardian> {
        #[cfg(target_os = "linux")]
        {
            // Everything the child needs is prepared here: after a fork in a threaded process
            // it may only make async-signal-safe calls.
            // SAFETY: getpid/sysconf/sigfillset on a zeroed set are plain libc calls.
            let (parent, all, open_max) = unsafe {
                let mut all: libc::sigset_t = std::mem::zeroed();
                libc::sigfillset(&mut all);
                let open_max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(256, 65536);
                (libc::getpid(), all, open_max as libc::c_int)
            };
            // SAFETY: the child runs `guard`, which makes only async-signal-safe calls and
            // never returns.
            match unsafe { libc::fork() } {
                -1 => {
                    log::warn!(
                        "cannot start the guardian that stops the command if zklock dies: {}",
                        io::Error::last_os_error()
                    );
                    None
                }
                0 => unsafe { guard(parent, pgid, &all, open_max) },
                pid => Some(Guardian { pid }),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pgid;
            None
        }
    }
}

/// The guardian's body: signals blocked (it only waits), zklock's descriptors closed (a reader
/// of zklock's output must see EOF when zklock ends; the session's socket is not ours), a
/// parent-death signal, then sleep until zklock is gone and SIGKILL the group.
///
/// # Safety
/// Only in the child of a fork: async-signal-safe calls only.
#[cfg(target_os = "linux")]
unsafe fn guard(
    parent: libc::pid_t,
    pgid: libc::pid_t,
    all: &libc::sigset_t,
    open_max: libc::c_int,
) -> ! {
    libc::pthread_sigmask(libc::SIG_SETMASK, all, std::ptr::null_mut());
    if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
        for fd in 0..open_max {
            libc::close(fd);
        }
    }
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
    // Any signal wakes it (the death signal, a Ctrl-C meant for zklock's group); only
    // zklock's death, seen as a new parent, ends the wait. Checked before the first wait too:
    // zklock may have died before the prctl.
    while libc::getppid() == parent {
        libc::sigwaitinfo(all, std::ptr::null_mut());
    }
    libc::kill(-pgid, libc::SIGKILL);
    libc::_exit(0)
}

#[cfg(target_os = "linux")]
impl Drop for Guardian {
    fn drop(&mut self) {
        // SAFETY: kill(2) and waitpid(2) on our own, unreaped child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}
