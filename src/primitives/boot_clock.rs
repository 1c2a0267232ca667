//! [`BootInstant`]: an instant of a clock that keeps counting while the host is suspended.
//!
//! The rule it protects: every deadline that stands for the *server's* clock (when the leader
//! last renewed the session, when it can expire it, `Session::safe_until`) must count time
//! the client's host spent suspended (a laptop's lid, a VM paused by its hypervisor, a
//! checkpoint and restore), because the servers kept counting. `std::time::Instant` is
//! `CLOCK_MONOTONIC` on Linux, which stops while suspended: a proof read after a resume would
//! look as fresh as before it, while the leader may have expired the session meanwhile.
//! `CLOCK_BOOTTIME` is the same clock plus the time suspended. Elsewhere (the BSDs, macOS)
//! `CLOCK_MONOTONIC` already counts suspension and stands in.

use std::ops::{Add, Sub};
use std::time::{Duration, Instant};

#[cfg(any(target_os = "linux", target_os = "android"))]
const CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// An instant of the boot clock (`CLOCK_BOOTTIME` on Linux), as the time since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct BootInstant(Duration);

impl BootInstant {
    /// The moment the host booted: earlier than any other.
    pub(crate) const BOOT: BootInstant = BootInstant(Duration::ZERO);

    /// Now.
    pub(crate) fn now() -> BootInstant {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the
        // platform defines. clock_gettime cannot fail for it (it fails only for a bad id or
        // pointer), and a failure would leave `ts` at zero: a clock stuck at boot, which
        // makes every proof look old (safe, never fresher than it is).
        unsafe { libc::clock_gettime(CLOCK, &mut ts) };
        let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
        let nanos = u32::try_from(ts.tv_nsec).unwrap_or(0).min(999_999_999);
        BootInstant(Duration::new(secs, nanos))
    }

    /// The time since `earlier`, zero if `earlier` is later.
    pub(crate) fn saturating_duration_since(self, earlier: BootInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The `Instant` that stands for this moment, judged now: what is left until it (or how
    /// long ago it was) on the boot clock, carried over to the monotonic clock. Read it again
    /// after a suspension: the two clocks part by the time suspended.
    pub(crate) fn to_instant(self) -> Instant {
        let (boot_now, now) = (BootInstant::now(), Instant::now());
        if self >= boot_now {
            now + self.saturating_duration_since(boot_now)
        } else {
            let ago = boot_now.saturating_duration_since(self);
            now.checked_sub(ago).unwrap_or(now)
        }
    }
}

impl Add<Duration> for BootInstant {
    type Output = BootInstant;
    fn add(self, rhs: Duration) -> BootInstant {
        BootInstant(self.0.saturating_add(rhs))
    }
}

impl Sub<Duration> for BootInstant {
    type Output = BootInstant;
    /// Saturates at boot.
    fn sub(self, rhs: Duration) -> BootInstant {
        BootInstant(self.0.saturating_sub(rhs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_forward_with_the_monotonic_clock() {
        let (b0, i0) = (BootInstant::now(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (b1, i1) = (BootInstant::now(), Instant::now());
        let boot = b1.saturating_duration_since(b0);
        let mono = i1 - i0;
        assert!(
            boot >= Duration::from_millis(20),
            "boot clock moved {boot:?}"
        );
        // Without a suspension between the reads the clocks agree closely.
        let apart = boot.abs_diff(mono);
        assert!(apart < Duration::from_millis(5), "clocks {apart:?} apart");
    }

    #[test]
    fn converts_to_and_from_instants() {
        let later = BootInstant::now() + Duration::from_secs(3);
        let instant = later.to_instant();
        let left = instant.saturating_duration_since(Instant::now());
        assert!(left > Duration::from_millis(2900) && left <= Duration::from_secs(3));
        let earlier = BootInstant::now() - Duration::from_secs(1);
        assert!(earlier.to_instant() < Instant::now());
    }
}
