//! The election workers: every session takes part in one latch election and one selector
//! election. Each spell of leadership is recorded as a section — its term read as the token,
//! `is_leading()` checked at both ends, as a lock holder's validity is — and then given up
//! (the latch closed, the selector's callback returning), so leadership keeps moving under the
//! faults. The checker then proves one leader at a time, one participant per term and terms
//! that never go back ([`check_terms`](super::check_terms)).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use super::config::Recipe;
use super::workers::{Holding, Run};
use zk_locks::locks::{LeaderLatch, LeaderSelector, Leadership};
use zk_locks::{SharedClient, ZkClient};

/// A leader holds its leadership: valid while it leads, its term as its token.
impl Holding for Leadership {
    fn valid(&self) -> bool {
        self.is_leading()
    }
    fn token(&self) -> zk_locks::Result<i64> {
        Ok(self.term())
    }
    fn nodes(&self) -> Vec<(String, Option<i64>)> {
        // The client's session now: the node's own while the leadership is valid.
        vec![(
            self.node_path().to_string(),
            self.client().session().session_id(),
        )]
    }
}

/// The participant id of a session's workers (the data of their election nodes).
fn participant_id(worker: usize) -> String {
    format!("torture-{worker}")
}

impl Run {
    /// One latch: join the election, lead once (one section), close (leadership moves on).
    pub(super) fn iterate_latch(&self, worker: usize, client: &SharedClient, path: &str) {
        let asked = Instant::now();
        let latch = match LeaderLatch::new(client.clone(), path, participant_id(worker)) {
            Ok(latch) => latch,
            Err(e) => return self.error(&e),
        };
        if let Err(e) = latch.start() {
            return self.error(&e);
        }
        match latch.await_leadership_for(self.config.acquire_timeout) {
            Ok(Some(leadership)) => {
                let _held = self.hold(worker);
                self.section(Recipe::Latch, true, worker, asked, &leadership);
                self.release_result(latch.close());
            }
            Ok(None) => {
                self.tally.lock().timeouts += 1;
                self.release_result(latch.close());
            }
            Err(e) => {
                self.error(&e);
                self.release_result(latch.close());
            }
        }
    }

    /// A started selector with auto requeue, whose callback records one section and returns;
    /// each call of the returned iteration waits (bounded) for its next leadership. The
    /// selector is closed when the iteration is dropped.
    pub(super) fn selector_worker(
        self: &Arc<Self>,
        worker: usize,
        client: &SharedClient,
        path: &str,
    ) -> zk_locks::Result<Box<dyn FnMut(u64)>> {
        let (led, leaderships) = mpsc::channel::<()>();
        let run = self.clone();
        // When this participant (re)queued: at start, then as each callback returns.
        let mut asked = Instant::now();
        let selector = LeaderSelector::new(client.clone(), path, move |leadership| {
            {
                let _held = run.hold(worker);
                run.section(Recipe::Selector, true, worker, asked, leadership);
            }
            asked = Instant::now();
            let _ = led.send(());
        })?
        .with_id(participant_id(worker));
        selector.auto_requeue();
        selector.start()?;
        let run = self.clone();
        Ok(Box::new(move |_| {
            let _selector = &selector;
            if leaderships
                .recv_timeout(run.config.acquire_timeout)
                .is_err()
            {
                run.tally.lock().timeouts += 1;
            }
        }))
    }
}
