//! When each fault struck and whom: the run's [`FaultLog`]. The checker uses it twice: to name
//! the faults that hit each holder of an overlap, and to set aside the sections of a holder
//! whose session the server ended without warning while the section ran.
//!
//! Why that set-aside is needed: a forced expiry (the server closes a session that was not
//! silent: `closeSession` from another connection, the memory backend's `expire`) deletes the
//! holder's nodes and fires the other clients' watches *before* the holder's client can hear
//! of it. In between, a successor holds the lock while the old holder's guard still says
//! `Held` (`tests/rw_exclusion_memory.rs` forces that instant). No lock can close that gap;
//! fencing covers it, and the fenced store still checks those sections. An expiry after the
//! session went silent (a freeze) is different: the client suspends itself before the server
//! expires it, so its sections stay checked.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::checks::Section;
use super::config::FaultKind;

/// One fault as the fault thread (or a request hook) injected it.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    /// What struck.
    pub kind: FaultKind,
    /// The session it struck, `None` for every session.
    pub victim: Option<usize>,
    /// Just before the injection began.
    pub start: Instant,
    /// Once the injection was over; for an expiry, once the victim's client reported the loss.
    pub end: Instant,
    /// The server ended the victim's session while its client was connected, so the client
    /// heard of it only after others could see its nodes gone.
    pub unannounced_expiry: bool,
}

/// The faults of one run, in the order they ended (cheap to clone: a shared handle).
#[derive(Debug, Clone, Default)]
pub struct FaultLog {
    records: Arc<Mutex<Vec<FaultRecord>>>,
}

impl FaultLog {
    /// Runs `inject` and records it as `kind` on `victim`.
    pub fn record<T>(
        &self,
        kind: FaultKind,
        victim: Option<usize>,
        unannounced_expiry: bool,
        inject: impl FnOnce() -> T,
    ) -> T {
        let start = Instant::now();
        let result = inject();
        self.records.lock().push(FaultRecord {
            kind,
            victim,
            start,
            end: Instant::now(),
            unannounced_expiry,
        });
        result
    }

    /// Records a fault whose window the caller measured.
    pub fn push(&self, record: FaultRecord) {
        self.records.lock().push(record);
    }

    /// Every record so far.
    pub fn records(&self) -> Vec<FaultRecord> {
        self.records.lock().clone()
    }
}

/// True when `s` ran while the server ended its session without warning (from before its last
/// validity check to after its enter) and, where the environment can tell, a node of the
/// section was gone by its last check: its holder could not know, so exclusion cannot judge
/// it. A section whose nodes all still existed then held them throughout (nodes do not come
/// back), and is judged, even in a new session its client had not reported yet.
pub fn expired_unannounced(s: &Section, faults: &[FaultRecord]) -> bool {
    s.nodes_alive != Some(true)
        && faults.iter().any(|f| {
            f.unannounced_expiry
                && f.victim.is_none_or(|v| v == s.worker)
                && f.start <= s.checked
                && f.end >= s.enter
        })
}

/// The faults that struck `s`'s session between its request for the lock and its last check,
/// as `kind@+ms` (from the request).
pub fn faults_hitting(s: &Section, faults: &[FaultRecord]) -> Vec<String> {
    faults
        .iter()
        .filter(|f| {
            f.victim.is_none_or(|v| v == s.worker) && f.start <= s.checked && f.end >= s.asked
        })
        .map(|f| {
            let at = f.start.saturating_duration_since(s.asked);
            let before = s.asked.saturating_duration_since(f.start);
            if before.is_zero() {
                format!("{}@+{:.2}ms", f.kind.name(), at.as_secs_f64() * 1e3)
            } else {
                format!("{}@-{:.2}ms", f.kind.name(), before.as_secs_f64() * 1e3)
            }
        })
        .collect()
}
