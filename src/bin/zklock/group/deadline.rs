//! The deadline zklock's guardian holds ([`super::guardian`]): `Session::safe_until` as
//! `CLOCK_BOOTTIME` nanoseconds, written to the guardian by a thread of zklock's, the feeder.
//!
//! Rules this file keeps (issue 39: a frozen zklock stops nothing, and its command ran on
//! beside the next holder):
//! - the deadline is in a clock both processes read and that counts host suspension:
//!   `CLOCK_BOOTTIME` (an `Instant` is `CLOCK_MONOTONIC`, which stops while the host is
//!   suspended, as the leader's clock does not);
//! - a converted deadline is never later than the true one: a proof made before a suspension
//!   is converted with the offset (BOOTTIME − MONOTONIC) of before it ([`BootClock`]), or the
//!   guardian, woken at resume, could be handed a deadline pushed back by the suspension;
//! - the feeder writes every tick, moved or not: that is how the guardian tells a zklock that
//!   went silent (it then sends SIGTERM itself) from a lock whose proof stopped moving
//!   (zklock's own threads send it);
//! - it never blocks: the pipe is non-blocking, and a record a full pipe refuses is dropped
//!   (the guardian is stopped too, and reads the next one).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Expiry;

/// How often the feeder writes: `T/12`, so a silence of a few ticks is far shorter than the
/// `0.6T` a steady proof keeps ahead (and not under 10 ms).
pub(super) fn period(expiry: &Expiry) -> Duration {
    (expiry.timeout / 12).max(Duration::from_millis(10))
}

/// The guardian's record for "the command has ended, exit": deadlines are never negative.
pub(super) const DISMISS: i64 = -1;

/// `clock`'s time in nanoseconds (0 if it cannot be read, which the kernel never refuses for
/// these clocks). Async-signal-safe: the guardian calls it after the fork.
pub(super) fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes the timespec it is given.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    // `time_t` and `c_long` are i64 on 64-bit Linux, narrower on 32-bit: widen either way.
    #[allow(clippy::useless_conversion)]
    let (secs, nanos) = (i64::from(ts.tv_sec), i64::from(ts.tv_nsec));
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// Offsets smaller than this between two readings are the cost of reading two clocks, not a
/// suspension.
const JITTER_NS: i64 = 2_000_000;

/// The suspensions kept (each adds one offset); older ones are forgotten first.
const MAX_OFFSETS: usize = 64;

/// Converts `Instant`s (`CLOCK_MONOTONIC`) to `CLOCK_BOOTTIME` nanoseconds, never later than
/// the truth: each offset BOOTTIME − MONOTONIC seen (it grows only while the host is
/// suspended), with the instant it was first seen; a proof made at `c` is converted with the
/// offset in force since before `c`, which is at most the true one.
pub(super) struct BootClock {
    /// (first seen, offset in ns), oldest first; never empty.
    offsets: Vec<(Instant, i64)>,
    timeout: Duration,
}

impl BootClock {
    pub(super) fn new(timeout: Duration) -> BootClock {
        let (at, offset) = offset_now();
        BootClock {
            offsets: vec![(at, offset)],
            timeout,
        }
    }

    /// Looks at the offset; records it when it grew (the host was suspended since).
    pub(super) fn sample(&mut self) {
        let (at, offset) = offset_now();
        self.record(at, offset);
    }

    fn record(&mut self, at: Instant, offset: i64) {
        let last = self.offsets.last().map_or(i64::MIN, |&(_, o)| o);
        if offset > last.saturating_add(JITTER_NS) {
            if self.offsets.len() == MAX_OFFSETS {
                self.offsets.remove(0);
            }
            self.offsets.push((at, offset));
        }
    }

    /// `safe_until` as BOOTTIME nanoseconds, with the offset of the last moment seen before
    /// its proof was made (`safe_until − T`), or of the earliest seen.
    pub(super) fn convert(&self, safe_until: Instant) -> i64 {
        let made = safe_until.checked_sub(self.timeout);
        let offset = self
            .offsets
            .iter()
            .rev()
            .find(|&&(since, _)| made.is_some_and(|m| since <= m))
            .or(self.offsets.first())
            .map_or(0, |&(_, o)| o);
        // MONOTONIC read before the Instant: a delay between them makes the deadline earlier,
        // never later.
        let mono_now = clock_ns(libc::CLOCK_MONOTONIC);
        let now = Instant::now();
        let ahead = match safe_until.checked_duration_since(now) {
            Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            None => -i64::try_from((now - safe_until).as_nanos()).unwrap_or(i64::MAX),
        };
        mono_now.saturating_add(ahead).saturating_add(offset).max(0)
    }
}

/// (now, BOOTTIME − MONOTONIC): BOOTTIME read first, so that a delay between the readings
/// makes the offset smaller (a deadline earlier), never larger.
fn offset_now() -> (Instant, i64) {
    let at = Instant::now();
    let boot = clock_ns(libc::CLOCK_BOOTTIME);
    let mono = clock_ns(libc::CLOCK_MONOTONIC);
    (at, boot.saturating_sub(mono))
}

/// Writes one record; `Ok` also when a full pipe refused it (dropped: see the file's rules).
pub(super) fn write_record(pipe: &OwnedFd, value: i64) -> io::Result<()> {
    let bytes = value.to_ne_bytes();
    // SAFETY: write(2) of 8 bytes we own to our pipe; at most PIPE_BUF, so all or nothing.
    let n = unsafe { libc::write(pipe.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    if n >= 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(()),
        _ => Err(e),
    }
}

/// The thread that writes the deadline every [`period`]; stopped (and joined) by
/// [`Feeder::stop`] before the guardian is dismissed.
pub(super) struct Feeder {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Feeder {
    /// Starts the feeder; `None` (logged) if no thread can be started: the guardian then
    /// kills the group at the deadline it was forked with.
    pub(super) fn start(
        expiry: Expiry,
        mut clock: BootClock,
        pipe: Arc<OwnedFd>,
    ) -> Option<Feeder> {
        let (stop, stopped) = mpsc::channel::<()>();
        let period = period(&expiry);
        let spawned = std::thread::Builder::new()
            .name("zklock-deadline".into())
            .spawn(move || loop {
                match stopped.recv_timeout(period) {
                    Err(RecvTimeoutError::Timeout) => {}
                    // Stopped (the sender dropped), or a message: no sender sends one.
                    _ => return,
                }
                clock.sample();
                let Some(safe_until) = (expiry.safe_until)() else {
                    continue;
                };
                if let Err(e) = write_record(&pipe, clock.convert(safe_until)) {
                    log::debug!("the guardian no longer reads its deadline: {e}");
                    return;
                }
            });
        match spawned {
            Ok(thread) => Some(Feeder {
                stop: Some(stop),
                thread: Some(thread),
            }),
            Err(e) => {
                log::warn!("cannot start the thread that extends the guardian's deadline: {e}");
                None
            }
        }
    }

    /// Stops the thread and waits for it (it wakes at once: its channel closes).
    pub(super) fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(4);

    #[test]
    fn converts_to_boottime_within_the_cost_of_reading_the_clocks() {
        let clock = BootClock::new(T);
        let now = Instant::now();
        let boot = clock_ns(libc::CLOCK_BOOTTIME);
        let converted = clock.convert(now + T);
        let expected = boot + T.as_nanos() as i64;
        assert!(
            (converted - expected).abs() < 50_000_000,
            "{converted} vs {expected}"
        );
    }

    /// A suspension after a proof was made must not push its deadline back: the offset of
    /// before it is used for proofs made before it was seen, the new one for later proofs.
    #[test]
    fn a_proof_made_before_a_suspension_keeps_the_offset_of_before() {
        let mut clock = BootClock::new(T);
        let (_, before) = clock.offsets[0];
        let resumed = Instant::now();
        let suspended_ns = 3_000_000_000;
        clock.record(resumed, before + suspended_ns);
        let old_proof = resumed + T - Duration::from_secs(1); // made 1 s before the resume
        let new_proof = resumed + T + Duration::from_secs(1); // made 1 s after
        let plain = |s: Instant| BootClock::new(T).convert(s);
        let old = clock.convert(old_proof) - plain(old_proof);
        let new = clock.convert(new_proof) - plain(new_proof);
        // `plain` reads today's offset (no suspension here): differences are the offsets'.
        assert!(old.abs() < 50_000_000, "old proof moved by {old} ns");
        assert!(
            (new - suspended_ns).abs() < 50_000_000,
            "new proof moved by {new} ns"
        );
    }

    #[test]
    fn jitter_is_not_a_suspension_and_old_offsets_are_dropped() {
        let mut clock = BootClock::new(T);
        let (at, base) = clock.offsets[0];
        clock.record(at, base + JITTER_NS / 2);
        assert_eq!(clock.offsets.len(), 1);
        for i in 1..=(MAX_OFFSETS as i64 + 5) {
            clock.record(at, base + i * 10 * JITTER_NS);
        }
        assert_eq!(clock.offsets.len(), MAX_OFFSETS);
    }
}
