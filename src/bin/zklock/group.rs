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
//! signal there). With `--foreground` the command stays in zklock's group (the terminal's
//! job, so it may read from the terminal) and only the command itself is signalled, as
//! `timeout --foreground` does.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};

/// The running command: its leader, and whether it leads a group of its own (not with
/// `--foreground`).
pub(crate) struct Running {
    child: Child,
    own_group: bool,
    /// Kills the group if zklock dies; dismissed once the leader is reaped.
    guardian: Option<Guardian>,
}

impl Running {
    /// Spawns `cmd` as the leader of a new process group (in zklock's own group with
    /// `foreground`, as `timeout --foreground`: the terminal's job, but only the command itself
    /// is signalled); on Linux it gets SIGKILL if zklock dies. Call on the main thread (the
    /// parent-death signals follow the spawning thread).
    pub(crate) fn spawn(cmd: &mut Command, foreground: bool) -> io::Result<Running> {
        if !foreground {
            cmd.process_group(0);
        }
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
                    // zklock died between the fork and the prctl: nobody would send it now.
                    if libc::getppid() != parent {
                        libc::raise(libc::SIGKILL);
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn()?;
        let guardian = if foreground {
            None
        } else {
            Guardian::start(child.id() as libc::pid_t)
        };
        Ok(Running {
            child,
            own_group: !foreground,
            guardian,
        })
    }

    fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// Sends `signo` to every process in the command's group (to the command alone with
    /// `--foreground`). The leader is not reaped yet, so its id still names that group.
    pub(crate) fn signal(&self, signo: libc::c_int) {
        let target = if self.own_group {
            -self.pid()
        } else {
            self.pid()
        };
        // SAFETY: kill(2) on our unreaped child, or on the group it leads.
        if unsafe { libc::kill(target, signo) } != 0 {
            log::debug!(
                "signal {signo} to the command ({target}): {}",
                io::Error::last_os_error()
            );
        }
    }

    /// Whether the leader has exited, without reaping it (the group id stays reserved).
    pub(crate) fn has_exited(&self) -> bool {
        // SAFETY: a zeroed siginfo_t is valid; waitid(WNOHANG | WNOWAIT) only looks at our
        // child.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            if libc::waitid(libc::P_PID, self.pid() as libc::id_t, &mut info, flags) != 0 {
                // ECHILD: already reaped (not by us), so it has exited; EINTR: look again.
                return io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD);
            }
            // With WNOHANG, si_pid stays 0 while the child runs.
            info.si_pid() != 0
        }
    }

    /// Reaps the exited (or killed) leader and returns its status; from then on the group
    /// id may be reused, so nothing is signalled any more (the guardian is dismissed first).
    pub(crate) fn reap(mut self) -> ExitStatus {
        drop(self.guardian.take());
        match self.child.wait() {
            Ok(status) => status,
            Err(e) => {
                log::error!("waiting for the command: {e}");
                ExitStatus::from_raw(libc::SIGKILL)
            }
        }
    }
}

/// A process that kills the command's group when zklock dies (Linux); dismissed when dropped.
struct Guardian {
    #[cfg(target_os = "linux")]
    pid: libc::pid_t,
}

impl Guardian {
    /// Forks the guardian of the group `pgid`. Call on the main thread, after spawning the
    /// command and before reaping it. `None` (logged) if it cannot be forked, or off Linux.
    fn start(pgid: libc::pid_t) -> Option<Guardian> {
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
