//! Closing a latch from inside: a listener that closes (or drops) its own latch with
//! `CloseMode::NotifyLeader` (Curator's `close(NOTIFY_LEADER)` from `isLeader`), and what a
//! closed latch leaves behind on its client.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::locks::{CloseMode, LeaderLatch, LeaderLatchListener, Leadership};
use zk_locks::testing::harness::{eventually, wants_proof};
use zk_locks::SharedClient;

use super::{started, wait_participants, Record, ELECTION, PATIENCE};

/// What a listener does to its own latch when told it leads.
enum Abdication {
    Close,
    Drop,
}

/// A listener that closes (or drops) the latch it listens to, once, when it leads.
struct Abdicates {
    latch: Mutex<Option<Arc<LeaderLatch>>>,
    how: Abdication,
    done: AtomicUsize,
}

impl LeaderLatchListener for Abdicates {
    fn is_leader(&self, _: &Leadership) {
        let Some(latch) = self.latch.lock().unwrap().take() else {
            return;
        };
        match self.how {
            Abdication::Close => {
                latch.close_with(CloseMode::NotifyLeader).unwrap();
            }
            // The last handle: the latch is dropped here, on its own thread.
            Abdication::Drop => drop(latch),
        }
        self.done.fetch_add(1, Ordering::SeqCst);
    }

    fn not_leader(&self) {}
}

/// The leader's listeners, told `is_leader`, are all told `not_leader` before the next
/// participant can lead, when a listener closes the latch with `NotifyLeader` or drops a
/// latch whose close mode is `NotifyLeader`. Before: the listeners were cleared before the
/// latch's thread ended the spell, so `before` and `after` heard only `+term` while `b` led.
#[test]
fn a_latch_closed_or_dropped_by_its_listener_with_notify_leader_tells_every_listener() {
    for how in [Abdication::Close, Abdication::Drop] {
        let e = MemoryEnsemble::new();
        let a: SharedClient = e.connect();
        let latch = Arc::new(
            LeaderLatch::new(a, ELECTION, "a")
                .unwrap()
                .with_close_mode(CloseMode::NotifyLeader),
        );
        let before = Arc::new(Record::default());
        let after = Arc::new(Record::default());
        let abdicates = Arc::new(Abdicates {
            latch: Mutex::new(Some(latch.clone())),
            how,
            done: AtomicUsize::new(0),
        });
        latch.add_listener(before.clone());
        latch.add_listener(abdicates.clone());
        latch.add_listener(after.clone());
        latch.start().unwrap();
        drop(latch); // the listener holds the last handle
        eventually(PATIENCE, "the listener abdicated", || {
            abdicates.done.load(Ordering::SeqCst) == 1
        });
        // `b` leads once a's node is gone: a's listeners were told by then.
        let b = started(e.connect(), "b");
        b.await_leadership_for(PATIENCE).unwrap().unwrap();
        for record in [&before, &after] {
            let told = record.told();
            assert_eq!(told.len(), 2, "{told:?}");
            assert!(told[0].starts_with('+'), "{told:?}");
            assert_eq!(told[1], "-", "{told:?}");
        }
        b.close().unwrap();
    }
}

/// Closing from a listener with `Silent` still tells nobody (Curator's silent close).
#[test]
fn a_latch_closed_silently_by_its_listener_tells_nobody() {
    struct ClosesSilently(OnceLock<Arc<LeaderLatch>>);
    impl LeaderLatchListener for ClosesSilently {
        fn is_leader(&self, _: &Leadership) {
            if let Some(latch) = self.0.get() {
                let _ = latch.close_with(CloseMode::Silent);
            }
        }
        fn not_leader(&self) {}
    }
    let e = MemoryEnsemble::new();
    let latch = Arc::new(LeaderLatch::new(e.connect(), ELECTION, "a").unwrap());
    let closes = Arc::new(ClosesSilently(OnceLock::new()));
    let _ = closes.0.set(latch.clone());
    let record = Arc::new(Record::default());
    latch.add_listener(closes);
    latch.add_listener(record.clone());
    latch.start().unwrap();
    record.wait_calls(1);
    let b = started(e.connect(), "b");
    b.await_leadership_for(PATIENCE).unwrap().unwrap();
    wait_participants(&b, 1);
    assert!(
        record.told().iter().all(|t| t != "-"),
        "{:?}",
        record.told()
    );
    b.close().unwrap();
}

/// A queued latch closed while its link is down cannot withdraw its node: the delete goes to
/// the background and close says so (Curator's `close()` throws on a failed delete), instead
/// of `Ok` while the node still stands in the queue. Once the link is back the node goes.
#[test]
fn closing_a_queued_latch_whose_withdrawal_goes_to_the_background_is_an_error() {
    let e = MemoryEnsemble::new();
    let a = started(e.connect(), "a");
    a.await_leadership().unwrap();
    let cb = e.connect();
    let b = started(cb.clone(), "b");
    wait_participants(&a, 2);
    cb.suspend();
    let closed = b.close();
    assert!(
        matches!(&closed, Err(err) if err.is_retryable()),
        "{closed:?}"
    );
    cb.resume();
    wait_participants(&a, 1);
    a.close().unwrap();
}

/// A leadership kept after its spell ended does not keep the session proving itself to the
/// quorum: the interest goes when the node is given up, not when the last copy is dropped.
/// Before, `wants_proof` stayed true for as long as `kept` lived.
#[test]
fn a_leadership_kept_after_close_no_longer_keeps_the_session_proving() {
    let e = MemoryEnsemble::new();
    let c: SharedClient = e.connect();
    let latch = started(c.clone(), "a");
    let kept = latch.await_leadership().unwrap();
    assert!(wants_proof(c.as_ref()));
    latch.close().unwrap();
    assert!(!kept.is_leading());
    assert!(!wants_proof(c.as_ref()), "a closed latch's kept leadership");
    drop(kept);
}
