//! `LeaderLatch` and `Leadership`, by job:
//!
//! - `basics`: the election on the in-memory ensemble — node layout and data, queue order,
//!   leadership moving on close, close modes, awaiting (untimed, timed, cancelled), listeners;
//! - `faults`: the leader under the memory ensemble's faults (suspend/resume, session loss,
//!   its node deleted, the client closed): it stops leading before another can lead, and
//!   terms only grow;
//! - `closing`: a latch closed or dropped from its own listener, and what closed latches
//!   leave on their client;
//! - `real`: a few of the same on a real ZooKeeper (`TestingServer`);
//! - `awaited`: leadership awaited by a future, and a spell's end.

mod awaited;
#[path = "../support/awaiting.rs"]
mod awaiting;
mod basics;
mod closing;
mod faults;
mod real;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use zk_locks::locks::{LeaderLatch, LeaderLatchListener, Leadership};
use zk_locks::SharedClient;

/// How long a test waits for a state it expects.
const PATIENCE: Duration = Duration::from_secs(10);

/// The election path of the tests.
const ELECTION: &str = "/election/tests";

/// A started latch with `id` on `client`.
fn started(client: SharedClient, id: &str) -> LeaderLatch {
    let latch = LeaderLatch::new(client, ELECTION, id).unwrap();
    latch.start().unwrap();
    latch
}

/// How many of `latches` report leadership `Held` now: never more than one.
fn leaders(latches: &[&LeaderLatch]) -> usize {
    let n = latches.iter().filter(|l| l.has_leadership()).count();
    assert!(n <= 1, "{n} participants report leadership at once");
    n
}

/// Blocks until `latch`'s participant count is `n` (as the server lists it).
fn wait_participants(latch: &LeaderLatch, n: usize) {
    zk_locks::testing::harness::eventually(PATIENCE, "the participants", || {
        latch.participants().map(|p| p.len() == n).unwrap_or(false)
    });
}

/// A listener that records what it is told: `+term` for `is_leader`, `-` for `not_leader`.
#[derive(Default)]
struct Record {
    told: Mutex<Vec<String>>,
    calls: AtomicUsize,
}

impl Record {
    fn told(&self) -> Vec<String> {
        self.told.lock().unwrap().clone()
    }

    /// Blocks until `n` calls were made.
    fn wait_calls(&self, n: usize) {
        zk_locks::testing::harness::eventually(PATIENCE, "listener calls", || {
            self.calls.load(Ordering::SeqCst) >= n
        });
    }
}

impl LeaderLatchListener for Record {
    fn is_leader(&self, leadership: &Leadership) {
        self.told
            .lock()
            .unwrap()
            .push(format!("+{}", leadership.term()));
        self.calls.fetch_add(1, Ordering::SeqCst);
    }

    fn not_leader(&self) {
        self.told.lock().unwrap().push("-".into());
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}
