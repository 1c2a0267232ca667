//! The command's process group: what zklock signals, and what dies with zklock.
//!
//! Rules this file keeps (issue: a command, or a helper it started, outliving zklock's lock):
//! - the command runs as the leader of a process group of its own, and every signal zklock
//!   sends it (a lost lock, the end of `--grace`, a forwarded Ctrl-C or SIGTERM) goes to the
//!   whole group, `kill(-pgid)`, so `sh -c 'worker & wait'` loses its worker too;
//! - the leader is not reaped while zklock may still signal the group: an unreaped leader keeps
//!   the group id from being reused (exits are seen with `waitid(WNOWAIT)`);
//! - on Linux the command dies with zklock, `kill -9` included: the leader has a parent-death
//!   signal (SIGKILL), and a guardian process forked by zklock ([`guardian`]) kills the whole
//!   group when zklock dies. Both follow the *thread* that created them, so both are created
//!   on the main thread, which lives as long as zklock;
//! - on Linux the group is gone by `Session::safe_until` even while zklock is frozen: the
//!   guardian holds that deadline, which a thread of zklock's extends ([`deadline`]), and
//!   kills the group once it passes unextended (issue 39).
//!
//! Outside zklock's reach: a process that leaves the group on purpose (`setsid`, `setpgid`, a
//! double-forking daemon), and on other Unixes the death of zklock itself (no parent-death
//! signal there). With `--foreground` the command stays in zklock's group (the terminal's
//! job, so it may read from the terminal) and only the command itself is signalled, as
//! `timeout --foreground` does.

#[cfg(target_os = "linux")]
mod deadline;
#[cfg(target_os = "linux")]
mod guardian;

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use guardian::Guardian;

/// Where the guardian's deadline comes from: the lock's session.
pub(crate) struct Expiry {
    /// `Session::safe_until` of the lock's session.
    pub(crate) safe_until: Box<dyn Fn() -> Option<Instant> + Send>,
    /// The negotiated session timeout `T`: the proof behind `safe_until` was made at
    /// `safe_until − T`.
    pub(crate) timeout: Duration,
    /// How long before the deadline the group gets SIGTERM (zklock's own `T/6`).
    pub(crate) stop_ahead: Duration,
}

/// The running command: its leader, and whether it leads a group of its own (not with
/// `--foreground`).
pub(crate) struct Running {
    child: Child,
    own_group: bool,
    /// Kills the group if zklock dies or its deadline passes; dismissed before the leader is
    /// reaped.
    #[cfg(target_os = "linux")]
    guardian: Option<Guardian>,
}

impl Running {
    /// Spawns `cmd` as the leader of a new process group (in zklock's own group with
    /// `foreground`, as `timeout --foreground`: the terminal's job, but only the command itself
    /// is signalled); on Linux it gets SIGKILL if zklock dies, and (not with `foreground`)
    /// by the deadline `expiry` gives whatever zklock does. Call on the main thread (the
    /// parent-death signals follow the spawning thread).
    pub(crate) fn spawn(
        cmd: &mut Command,
        foreground: bool,
        expiry: Option<Expiry>,
    ) -> io::Result<Running> {
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
        #[cfg(target_os = "linux")]
        let guardian = match foreground {
            true => None,
            false => Guardian::start(child.id() as libc::pid_t, expiry),
        };
        #[cfg(not(target_os = "linux"))]
        let _ = expiry;
        Ok(Running {
            child,
            own_group: !foreground,
            #[cfg(target_os = "linux")]
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

    /// Reaps the exited (or killed) leader and returns its status, and true when the guardian
    /// signalled the group because the deadline passed unextended (the lock may be gone).
    /// From then on the group id may be reused, so nothing is signalled any more (the
    /// guardian is dismissed first).
    pub(crate) fn reap(mut self) -> (ExitStatus, bool) {
        #[cfg(target_os = "linux")]
        let ran_out = self.guardian.take().is_some_and(Guardian::dismiss);
        #[cfg(not(target_os = "linux"))]
        let ran_out = false;
        let status = match self.child.wait() {
            Ok(status) => status,
            Err(e) => {
                log::error!("waiting for the command: {e}");
                ExitStatus::from_raw(libc::SIGKILL)
            }
        };
        (status, ran_out)
    }
}
