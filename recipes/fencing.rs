//! Fencing: a lock alone cannot stop a holder that stalls (a long GC pause, a frozen VM) and
//! wakes up after its session expired and someone else took the lock. The resource it writes
//! must reject it. Each guard has a **fencing token** (`LockGuard::fencing_token`: the lock
//! node's creation zxid, which only grows across the whole ensemble); the store remembers the
//! highest token it has seen and refuses older ones.
//!
//! Story: A takes the lock and writes; A stalls and its session dies meanwhile; B takes the
//! lock (a larger token) and writes; A wakes up and — without checking its guard, as a stalled
//! process would — writes with its old token: the store refuses.
//!
//! ```sh
//! cargo run --example fencing
//! cargo run --example fencing -- --connect 127.0.0.1:2181
//! ```

use std::sync::Mutex;

use log::{info, warn};
use zk_locks::{InterProcessLock, InterProcessMutex};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};

const LOCK: &str = "/zk-locks/fencing/lock";

/// A storage service that accepts a write only with a token at least as new as the newest it
/// has seen (it would be a database column or a storage server's check in real life).
#[derive(Debug, Default)]
pub struct FencedStore {
    inner: Mutex<StoreState>,
}

#[derive(Debug, Default)]
struct StoreState {
    highest_token: i64,
    value: String,
    /// (writer, token, accepted)
    log: Vec<(String, i64, bool)>,
}

impl FencedStore {
    /// Writes `value` if `token` is not older than any token seen; false when rejected.
    pub fn write(&self, writer: &str, token: i64, value: &str) -> bool {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let accepted = token >= s.highest_token;
        if accepted {
            s.highest_token = token;
            s.value = value.to_string();
        }
        s.log.push((writer.to_string(), token, accepted));
        accepted
    }

    /// The current value.
    pub fn value(&self) -> String {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .value
            .clone()
    }

    /// Every write attempt: (writer, token, accepted).
    pub fn log(&self) -> Vec<(String, i64, bool)> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .log
            .clone()
    }
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

/// Runs the story; returns the store so the caller can inspect its log.
pub fn run(args: &[String]) -> AnyResult<FencedStore> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("fencing on {}", options.describe());
    let store = FencedStore::default();
    let a = backend.try_connect()?;
    let b = backend.try_connect()?;
    let lock_a = InterProcessMutex::new(a.client.clone(), LOCK)?;
    let lock_b = InterProcessMutex::new(b.client.clone(), LOCK)?;

    let guard_a = lock_a.lock()?;
    // Read the token while the lock is known to be held; it is cached in the guard.
    let token_a = guard_a.fencing_token()?;
    info!("A holds the lock, fencing token {token_a}");
    let ok = store.write("A", token_a, "written by A");
    info!("A writes with token {token_a}: {}", verdict(ok));

    info!("A stalls (a long GC pause) ... and its session dies meanwhile");
    a.kill();
    info!(
        "A's guard now says {:?} — but A is not looking",
        guard_a.state()
    );

    let guard_b = lock_b.lock()?;
    let token_b = guard_b.fencing_token()?;
    info!("B holds the lock, fencing token {token_b}");
    let ok = store.write("B", token_b, "written by B");
    info!("B writes with token {token_b}: {}", verdict(ok));

    info!("A wakes up and writes with its old token {token_a}");
    let ok = store.write("A", token_a, "stale write by A");
    if ok {
        warn!("the store ACCEPTED a stale write");
    } else {
        info!(
            "the store REJECTS it: token {token_a} < {token_b}; the value stays {:?}",
            store.value()
        );
    }
    ensure(token_b > token_a, "B's token is not larger than A's")?;
    ensure(!ok, "the stale write was accepted")?;

    // A's hold went with its session, so its release is `Ok`: an error is a real failure.
    if let Err(e) = guard_a.unlock() {
        warn!("A's release failed: {e}");
    }
    guard_b.unlock()?;
    b.client.close();
    Ok(store)
}

fn verdict(accepted: bool) -> &'static str {
    if accepted {
        "accepted"
    } else {
        "REJECTED"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencing_rejects_the_stale_writer() {
        let store = run(&cookbook::memory_args()).unwrap();
        let log = store.log();
        let verdicts: Vec<(&str, bool)> = log.iter().map(|(w, _, ok)| (w.as_str(), *ok)).collect();
        assert_eq!(verdicts, [("A", true), ("B", true), ("A", false)]);
        assert!(log[1].1 > log[0].1, "B's token is newer: {log:?}");
        assert_eq!(store.value(), "written by B");
    }
}
