//! The guardian: a process zklock forks beside the command, which kills the command's group
//! when zklock is gone, or when the lock's deadline passes without zklock extending it.
//!
//! Rules this file keeps:
//! - the command dies with zklock, `kill -9` included: zklock holds the write end of a pipe
//!   the guardian reads, and the end of file (every write end closed: zklock is gone) kills
//!   the group (issue: a command outliving zklock's lock);
//! - the command is gone by `Session::safe_until` even when zklock is frozen (SIGSTOP, a
//!   debugger, a cgroup freezer, a swap storm; issue 39): the guardian holds the deadline
//!   ([`super::deadline`]: BOOTTIME nanoseconds over the pipe, extended by zklock), and
//!   SIGKILLs the group once it passes, from a BOOTTIME timer (a `poll` timeout would not count
//!   a suspension of the host); at `deadline − T/6` it sends SIGTERM if zklock has been silent
//!   for three of its ticks (else zklock's own threads send it, once);
//! - once it has signalled the group it is committed: later deadlines are ignored, the group
//!   gets SIGKILL by the deadline, and it exits [`RAN_OUT`], which zklock reports as a lost
//!   lock (76) when it dismisses it;
//! - in its own process group, so that stopping zklock's job (Ctrl-Z) does not stop it;
//! - forked from a threaded process: until it exits it makes only async-signal-safe calls
//!   (read, poll, clock_gettime, timerfd_settime, kill, close, _exit; no allocation, no lock),
//!   on values prepared before the fork ([`Plan`]);
//! - the group id stays reserved while it may signal: zklock dismisses it (and waits for its
//!   exit) before reaping the command's leader.
//!
//! Without a deadline (a backend that proves nothing, `safe_until` None, or no BOOTTIME timer)
//! it only kills the group when zklock is gone, as before.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use super::deadline::{clock_ns, period, write_record, BootClock, Feeder, DISMISS};
use super::Expiry;

/// The guardian's exit status when it stopped the command's group for the deadline.
const RAN_OUT: i32 = 3;

/// A process that kills the command's group when zklock dies or its deadline passes;
/// dismissed with [`Guardian::dismiss`] (or when dropped).
pub(super) struct Guardian {
    /// `None` once dismissed.
    pid: Option<libc::pid_t>,
    /// The pipe's write end: deadlines, [`DISMISS`], and by closing, zklock's death.
    pipe: Arc<OwnedFd>,
    feeder: Option<Feeder>,
}

/// What the guardian needs, prepared before the fork.
struct Plan {
    pgid: libc::pid_t,
    all: libc::sigset_t,
    open_max: libc::c_int,
    pipe: libc::c_int,
    /// The BOOTTIME timer; -1 without a deadline.
    timer: libc::c_int,
    /// BOOTTIME ns; `NO_DEADLINE` without one.
    deadline: i64,
    /// `stop_ahead` and the silence after which zklock counts as frozen, in ns.
    ahead: i64,
    silence: i64,
}

const NO_DEADLINE: i64 = i64::MAX;

impl Guardian {
    /// Forks the guardian of the group `pgid`, with the deadline `expiry` extends (none
    /// without). Call on the main thread, after spawning the command and before reaping it.
    /// `None` (logged) if it cannot be started.
    pub(super) fn start(pgid: libc::pid_t, expiry: Option<Expiry>) -> Option<Guardian> {
        let mut fds = [-1; 2];
        // SAFETY: pipe2(2) writes two descriptors into `fds`; fcntl(2) on the one we own.
        // Close-on-exec: no command inherits a write end (it would hide zklock's death).
        let (read, write) = unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                log::warn!(
                    "cannot start the guardian that stops the command if zklock dies: {}",
                    io::Error::last_os_error()
                );
                return None;
            }
            let write = OwnedFd::from_raw_fd(fds[1]);
            libc::fcntl(fds[1], libc::F_SETFL, libc::O_NONBLOCK);
            (OwnedFd::from_raw_fd(fds[0]), Arc::new(write))
        };
        let (timer, deadline, clock) = match &expiry {
            Some(expiry) => deadline_timer(expiry),
            None => (None, NO_DEADLINE, None),
        };
        let ns = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        // SAFETY: sigfillset on a zeroed set and sysconf are plain libc calls.
        let (all, open_max) = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            let open_max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(256, 65536);
            (all, open_max as libc::c_int)
        };
        let plan = Plan {
            pgid,
            all,
            open_max,
            pipe: read.as_raw_fd(),
            timer: timer.as_ref().map_or(-1, |t| t.as_raw_fd()),
            deadline,
            ahead: expiry.as_ref().map_or(0, |e| ns(e.stop_ahead)),
            silence: expiry
                .as_ref()
                .map_or(0, |e| ns(period(e)).saturating_mul(3)),
        };
        // SAFETY: the child runs `guard`, which makes only async-signal-safe calls and never
        // returns.
        let pid = match unsafe { libc::fork() } {
            -1 => {
                log::warn!(
                    "cannot start the guardian that stops the command if zklock dies: {}",
                    io::Error::last_os_error()
                );
                return None;
            }
            0 => unsafe { guard(&plan) },
            pid => pid,
        };
        // The guardian's ends are its own now.
        drop((read, timer));
        let feeder = match (expiry, clock) {
            (Some(expiry), Some(clock)) => Feeder::start(expiry, clock, write.clone()),
            _ => None,
        };
        Some(Guardian {
            pid: Some(pid),
            pipe: write,
            feeder,
        })
    }

    /// Dismisses the guardian once the command's leader has exited (not reaped yet): stops
    /// the feeder, tells the guardian, waits for its exit. True when the guardian had
    /// signalled the group for the deadline: the lock may be someone else's.
    pub(super) fn dismiss(mut self) -> bool {
        self.finish()
    }

    fn finish(&mut self) -> bool {
        if let Some(mut feeder) = self.feeder.take() {
            feeder.stop();
        }
        let Some(pid) = self.pid.take() else {
            return false;
        };
        let told = write_record(&self.pipe, DISMISS).is_ok();
        let mut status = 0;
        // SAFETY: kill(2) and waitpid(2) on our own, unreaped child. A guardian that cannot
        // be told (its pipe closed or full) is killed; one that is stopped is continued, so it
        // reads the record and exits.
        unsafe {
            libc::kill(pid, if told { libc::SIGCONT } else { libc::SIGKILL });
            while libc::waitpid(pid, &mut status, 0) < 0 {
                if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    return false;
                }
            }
        }
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == RAN_OUT
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The BOOTTIME timer, the deadline to fork with (`safe_until` now) and the clock that
/// converts the next ones; no deadline (logged) without a timer or a `safe_until`.
fn deadline_timer(expiry: &Expiry) -> (Option<OwnedFd>, i64, Option<BootClock>) {
    let Some(safe_until) = (expiry.safe_until)() else {
        return (None, NO_DEADLINE, None);
    };
    let flags = libc::TFD_CLOEXEC | libc::TFD_NONBLOCK;
    // SAFETY: timerfd_create(2) returns a descriptor we then own, or -1.
    let fd = unsafe { libc::timerfd_create(libc::CLOCK_BOOTTIME, flags) };
    if fd < 0 {
        log::warn!(
            "no BOOTTIME timer ({}): a frozen zklock would not stop its command by the \
             session's expiry",
            io::Error::last_os_error()
        );
        return (None, NO_DEADLINE, None);
    }
    let clock = BootClock::new(expiry.timeout);
    let deadline = clock.convert(safe_until);
    // SAFETY: `fd` was just created and is ours.
    let timer = unsafe { OwnedFd::from_raw_fd(fd) };
    (Some(timer), deadline, Some(clock))
}

/// The guardian's body: signals blocked (it only waits; SIGSTOP and SIGKILL still reach it),
/// a group of its own, zklock's descriptors closed (a reader of zklock's output must see EOF
/// when zklock ends; the session's socket is not ours), then wait for records, the timer, or
/// the end of zklock.
///
/// # Safety
/// Only in the child of a fork: async-signal-safe calls only.
unsafe fn guard(plan: &Plan) -> ! {
    libc::pthread_sigmask(libc::SIG_SETMASK, &plan.all, std::ptr::null_mut());
    libc::setpgid(0, 0);
    close_all_but([plan.pipe, plan.timer], plan.open_max);
    let pgid = plan.pgid;
    let mut deadline = plan.deadline;
    let mut termed = false;
    let mut heard = clock_ns(libc::CLOCK_BOOTTIME);
    let mut record = [0u8; 8];
    let mut have = 0;
    loop {
        if deadline != NO_DEADLINE {
            let now = clock_ns(libc::CLOCK_BOOTTIME);
            if now >= deadline {
                libc::kill(-pgid, libc::SIGKILL);
                libc::_exit(RAN_OUT);
            }
            let term_at = deadline.saturating_sub(plan.ahead);
            let quiet_from = heard.saturating_add(plan.silence);
            if !termed && now >= term_at && now >= quiet_from {
                libc::kill(-pgid, libc::SIGTERM);
                termed = true;
            }
            let wake = if termed {
                deadline
            } else if now < term_at {
                term_at
            } else {
                quiet_from.min(deadline)
            };
            arm(plan.timer, wake);
        }
        let mut fds = [
            libc::pollfd {
                fd: plan.pipe,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: plan.timer,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let n = if plan.timer >= 0 { 2 } else { 1 };
        if libc::poll(fds.as_mut_ptr(), n, -1) < 0 {
            if *libc::__errno_location() == libc::EINTR {
                continue;
            }
            // Deaf to zklock: nothing could tell it the lock is still ours.
            libc::kill(-pgid, libc::SIGKILL);
            libc::_exit(RAN_OUT);
        }
        if fds[1].revents != 0 {
            let mut expirations = [0u8; 8];
            libc::read(plan.timer, expirations.as_mut_ptr().cast(), 8);
        }
        if fds[0].revents == 0 {
            continue;
        }
        let mut buf = [0u8; 64];
        let got = libc::read(plan.pipe, buf.as_mut_ptr().cast(), buf.len());
        if got < 0 && *libc::__errno_location() == libc::EINTR {
            continue;
        }
        if got <= 0 {
            // End of file: zklock is gone (or its end unreadable): nobody stops the command.
            libc::kill(-pgid, libc::SIGKILL);
            libc::_exit(if termed { RAN_OUT } else { 0 });
        }
        heard = clock_ns(libc::CLOCK_BOOTTIME);
        for &byte in &buf[..got as usize] {
            record[have] = byte;
            have += 1;
            if have < record.len() {
                continue;
            }
            have = 0;
            match i64::from_ne_bytes(record) {
                DISMISS if termed => {
                    // Committed: what is left of the group goes too.
                    libc::kill(-pgid, libc::SIGKILL);
                    libc::_exit(RAN_OUT);
                }
                DISMISS => libc::_exit(0),
                // A deadline only with a timer to keep it.
                next if next >= 0 && !termed && plan.timer >= 0 => deadline = next,
                _ => {}
            }
        }
    }
}

/// Arms the BOOTTIME timer for `at` (ns, absolute; at least 1 ns: 0 would disarm it).
///
/// # Safety
/// timerfd_settime(2) on the guardian's timer; async-signal-safe.
unsafe fn arm(timer: libc::c_int, at: i64) {
    let at = at.max(1);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at / 1_000_000_000) as libc::time_t,
            tv_nsec: (at % 1_000_000_000) as libc::c_long,
        },
    };
    libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut());
}

/// Closes every descriptor but `keep` (-1: none).
///
/// # Safety
/// close_range(2), or close(2) one by one where it is missing; async-signal-safe.
unsafe fn close_all_but(mut keep: [libc::c_int; 2], open_max: libc::c_int) {
    keep.sort_unstable();
    let mut from: u32 = 0;
    let mut ok = true;
    for &k in keep.iter().filter(|&&k| k >= 0) {
        let k = k as u32;
        if k > from {
            ok &= libc::syscall(libc::SYS_close_range, from, k - 1, 0u32) == 0;
        }
        from = k + 1;
    }
    ok &= libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32) == 0;
    if !ok {
        for fd in (0..open_max).filter(|fd| !keep.contains(fd)) {
            libc::close(fd);
        }
    }
}
