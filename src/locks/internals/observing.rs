//! How the engine reports a lock's life (see `locks/observe.rs`): the reporter each
//! `LockInternals` holds, an attempt's outcome, a grant. Kept apart from the wait loop, which
//! only says when it first has to wait (`queued`).

use std::sync::Arc;
use std::time::Instant;

use crate::client::SharedClient;
use crate::error::Result;

use super::super::driver::LockDriver;
use super::super::held::HeldNode;
use super::super::layout::{LATCH_NAME, LEASE_BASE_NAME, READ_LOCK_NAME, WRITE_LOCK_NAME};
use super::super::observe::{LockObserver, Observe};
use super::super::participants::ParticipantKind;
use super::LockInternals;

/// The reporter of a lock directory's nodes, to the client's observer (if any); the kind of
/// node from the driver's lock name.
pub(super) fn observe_for(
    client: &SharedClient,
    base_path: &str,
    driver: &dyn LockDriver,
) -> Arc<Observe> {
    let kind = match driver.lock_name() {
        READ_LOCK_NAME => ParticipantKind::Read,
        WRITE_LOCK_NAME => ParticipantKind::Write,
        LEASE_BASE_NAME => ParticipantKind::Lease,
        LATCH_NAME => ParticipantKind::Latch,
        _ => ParticipantKind::Mutex,
    };
    Arc::new(Observe::new(client.lock_observer(), base_path, kind))
}

impl LockInternals {
    /// Reports this lock's events through `observe` (a recipe's own observer, its name).
    pub(crate) fn with_observe(mut self, observe: Observe) -> LockInternals {
        self.observe = Arc::new(observe);
        self
    }

    /// Who reports this lock's events.
    pub(crate) fn observe(&self) -> &Observe {
        &self.observe
    }

    /// The same reporter with `observer` instead (`None`: the client's).
    pub(crate) fn observe_with(&self, observer: Option<Arc<dyn LockObserver>>) -> Observe {
        let o = &self.observe;
        let observer = observer.or_else(|| self.client.lock_observer());
        let observe = Observe::new(observer, o.lock(), o.kind());
        match o.grants() {
            true => observe,
            false => observe.queue_only(),
        }
    }

    /// A node granted to us: its hold is reported from now on, `acquired` first, with the
    /// time since `start` (when the acquire began). Without an observer or the debug log
    /// this is two checks: nothing is timed or kept.
    pub(crate) fn granted(&self, held: HeldNode, start: Instant) -> HeldNode {
        if !self.observe.grants() || !self.observe.listened() {
            return held;
        }
        let now = Instant::now();
        let wait = now.saturating_duration_since(start);
        self.observe.acquired(held.path(), held.session_id(), wait);
        held.observed(self.observe.clone(), now)
    }

    /// The one place an attempt's outcome is reported: `acquired`, `timed_out` (or
    /// `cancelled`) or `failed`.
    pub(super) fn report(
        &self,
        result: Result<Option<HeldNode>>,
        start: Instant,
    ) -> Result<Option<HeldNode>> {
        match result {
            Ok(Some(held)) => Ok(Some(self.granted(held, start))),
            Ok(None) if self.observe.grants() => {
                self.observe.gave_up(start.elapsed());
                Ok(None)
            }
            Err(e) if self.observe.grants() => {
                self.observe.failed(&e);
                Err(e)
            }
            other => other,
        }
    }
}

/// Reports an acquire whose future was dropped before it was ready as `cancelled` (the
/// caller gave it up), unless [`Self::done`] first: an observer sees an outcome for every
/// acquire, however it ended.
pub(crate) struct OutcomeOwed<'a> {
    observe: Option<&'a Observe>,
    start: Instant,
}

impl<'a> OutcomeOwed<'a> {
    pub(crate) fn new(observe: &'a Observe, start: Instant) -> OutcomeOwed<'a> {
        OutcomeOwed {
            observe: observe.grants().then_some(observe),
            start,
        }
    }

    /// The outcome was reported the usual way.
    pub(crate) fn done(mut self) {
        self.observe = None;
    }
}

impl Drop for OutcomeOwed<'_> {
    fn drop(&mut self) {
        if let Some(observe) = self.observe.take() {
            observe.cancelled(self.start.elapsed());
        }
    }
}
