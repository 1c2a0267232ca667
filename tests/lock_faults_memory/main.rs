//! Deterministic failure modes of the lock engine on the in-memory ensemble, by job:
//!
//! - `sessions`: connection or session loss at exact points, for the mutex and the guards;
//! - `costs`: request and round-trip counts, herd, order, restored watches;
//! - `handoffs`: requests per hand-off, per recipe (where no second listing is needed);
//! - `semaphore`: the semaphore and `SharedCount` under the same faults;
//! - `shared_count`: `SharedCount` under changes close together (a change right after the
//!   read that armed the watch, racing listener calls, bursts);
//! - `retries`: retry pauses that end at the deadline or on close.

mod costs;
mod handoffs;
mod retries;
mod semaphore;
mod sessions;
mod shared_count;

use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::{InterProcessLock, InterProcessMutex};

/// How long a test waits for a state it expects.
const PATIENCE: Duration = Duration::from_secs(10);

/// A mutex at `path` through `c`.
fn mutex(c: &Arc<MemoryClient>, path: &str) -> InterProcessMutex {
    InterProcessMutex::new(c.clone(), path).unwrap()
}

/// A fresh ensemble, a client of it, and a mutex at `path` through that client whose parent
/// nodes exist already (one acquisition made and released), so a fault injected next meets
/// the lock node's own create.
fn mutex_with_parents(path: &str) -> (MemoryEnsemble, Arc<MemoryClient>, InterProcessMutex) {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = mutex(&c, path);
    m.acquire().unwrap();
    m.release().unwrap();
    (e, c, m)
}
