//! Deterministic failure modes of the lock engine on the in-memory ensemble, by job:
//!
//! - `sessions`: connection or session loss at exact points, for the mutex and the guards;
//! - `costs`: request and round-trip counts, herd, order, restored watches;
//! - `semaphore`: the semaphore and `SharedCount` under the same faults;
//! - `retries`: retry pauses that end at the deadline or on close.

mod costs;
mod retries;
mod semaphore;
mod sessions;

use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::memory::MemoryClient;
use zk_locks::InterProcessMutex;

/// How long a test waits for a state it expects.
const PATIENCE: Duration = Duration::from_secs(10);

/// A mutex at `path` through `c`.
fn mutex(c: &Arc<MemoryClient>, path: &str) -> InterProcessMutex {
    InterProcessMutex::new(c.clone(), path).unwrap()
}
