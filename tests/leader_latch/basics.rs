//! The election on the in-memory ensemble, without faults.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::memory::{MemoryEnsemble, MemoryOptions};
use zk_locks::locks::{
    Acquire, CancelToken, CloseMode, LeaderLatch, LeaderLatchListener, Leadership, LockEvent,
    LockObserver, ParticipantKind,
};
use zk_locks::{Error, LockState, ZkClient};

use super::{leaders, started, wait_participants, Record, ELECTION, PATIENCE};

#[test]
fn a_latch_leads_through_a_protected_latch_node_that_holds_its_id() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let latch = started(c.clone(), "host-a");
    let leadership = latch.await_leadership().unwrap();
    let name = leadership
        .node_path()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    // Curator's layout: `_c_<uuid>-latch-<10-digit sequence>`.
    assert!(
        name.starts_with("_c_") && name.len() == 3 + 36 + 1 + 6 + 10,
        "{name}"
    );
    assert!(name[40..].starts_with("latch-"), "{name}");
    assert_eq!(
        c.get_data(leadership.node_path(), None).unwrap().0,
        b"host-a"
    );
    assert_eq!(leadership.state(), LockState::Held);
    assert_eq!(leadership.id(), "host-a");
    assert_eq!(leadership.election_path(), ELECTION);
    assert_eq!(
        leadership.term(),
        c.exists(leadership.node_path()).unwrap().unwrap().czxid
    );
    assert!(latch.has_leadership());
    let leader = latch.leader().unwrap().unwrap();
    assert_eq!((leader.id().as_ref(), leader.is_holder), ("host-a", true));
    assert_eq!(leader.kind, ParticipantKind::Latch);
    latch.close().unwrap();
    assert!(!latch.has_leadership());
    assert_eq!(leadership.state(), LockState::Lost);
    assert!(leadership.ended().is_cancelled());
    assert!(c.get_children(ELECTION, None).unwrap().is_empty());
}

#[test]
fn leadership_moves_in_queue_order_on_close_and_terms_grow() {
    let e = MemoryEnsemble::new();
    let a = started(e.connect(), "a");
    let first = a.await_leadership().unwrap();
    let b = started(e.connect(), "b");
    wait_participants(&a, 2);
    let c = started(e.connect(), "c");
    wait_participants(&a, 3);
    let ids: Vec<(String, bool)> = c
        .participants()
        .unwrap()
        .iter()
        .map(|p| (p.id().into_owned(), p.is_holder))
        .collect();
    let expected = [("a", true), ("b", false), ("c", false)];
    assert_eq!(ids, expected.map(|(i, h)| (i.to_string(), h)));
    assert_eq!(leaders(&[&a, &b, &c]), 1);

    a.close().unwrap();
    let second = b.await_leadership().unwrap();
    assert!(second.term() > first.term());
    assert_eq!(leaders(&[&a, &b, &c]), 1);
    assert_eq!(c.leader().unwrap().unwrap().id(), "b");
    assert!(c
        .await_leadership_for(Duration::from_millis(20))
        .unwrap()
        .is_none());

    b.close().unwrap();
    let third = c.await_leadership().unwrap();
    assert!(third.term() > second.term());
    assert_eq!(leaders(&[&a, &b, &c]), 1);
}

#[test]
fn a_silent_close_tells_no_listener_and_a_notifying_one_tells_them_before_the_node_goes() {
    let e = MemoryEnsemble::new();
    for (mode, expected) in [(CloseMode::Silent, 1), (CloseMode::NotifyLeader, 2)] {
        let latch = LeaderLatch::new(e.connect(), ELECTION, "a")
            .unwrap()
            .with_close_mode(mode);
        let record = Arc::new(Record::default());
        latch.add_listener(record.clone());
        latch.start().unwrap();
        let leadership = latch.await_leadership().unwrap();
        record.wait_calls(1);
        latch.close().unwrap();
        let told = record.told();
        assert_eq!(told.len(), expected, "{mode:?}: {told:?}");
        assert_eq!(told[0], format!("+{}", leadership.term()));
        if mode == CloseMode::NotifyLeader {
            assert_eq!(told[1], "-");
        }
    }
    // `close_with` overrides the latch's mode.
    let latch = started(e.connect(), "b");
    let record = Arc::new(Record::default());
    latch.add_listener(record.clone());
    latch.await_leadership_for(PATIENCE).unwrap().unwrap();
    record.wait_calls(1);
    latch.close_with(CloseMode::NotifyLeader).unwrap();
    assert_eq!(record.told().len(), 2);
}

/// A listener told `not_leader` finds the node still there: it is deleted after the spell
/// ended, so no other participant can lead while this one is being told.
#[test]
fn a_leader_is_told_to_stop_before_its_node_is_deleted() {
    struct SeesNode(Arc<zk_locks::client::memory::MemoryClient>, AtomicUsize);
    impl LeaderLatchListener for SeesNode {
        fn is_leader(&self, _: &Leadership) {}
        fn not_leader(&self) {
            let nodes = self.0.get_children(ELECTION, None).unwrap();
            self.1.store(nodes.len() + 1, Ordering::SeqCst);
        }
    }
    let e = MemoryEnsemble::new();
    let latch = LeaderLatch::new(e.connect(), ELECTION, "a")
        .unwrap()
        .with_close_mode(CloseMode::NotifyLeader);
    let sees = Arc::new(SeesNode(e.connect(), AtomicUsize::new(0)));
    latch.add_listener(sees.clone());
    latch.start().unwrap();
    latch.await_leadership().unwrap();
    latch.close().unwrap();
    assert_eq!(
        sees.1.load(Ordering::SeqCst),
        2,
        "the node was gone when told"
    );
}

#[test]
fn awaiting_is_timed_or_cancelled_and_the_participant_stays_in_the_election() {
    let e = MemoryEnsemble::new();
    let a = started(e.connect(), "a");
    a.await_leadership().unwrap();
    let b = started(e.connect(), "b");
    assert!(b
        .await_leadership_for(Duration::from_millis(30))
        .unwrap()
        .is_none());

    let token = CancelToken::new();
    let how = Acquire::new().cancel(&token);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| b.await_leadership_with(&how));
        wait_participants(&a, 2);
        token.cancel();
        let outcome = waiting.join().unwrap();
        assert!(
            matches!(outcome, Err(Error::Cancelled { .. })),
            "{outcome:?}"
        );
    });
    // Cancelled before the call: at once.
    assert!(matches!(
        b.await_leadership_with(&how),
        Err(Error::Cancelled { .. })
    ));
    // Still queued: it leads once the leader leaves.
    assert_eq!(a.participants().unwrap().len(), 2);
    a.close().unwrap();
    assert!(b.await_leadership_for(PATIENCE).unwrap().is_some());
}

#[test]
fn a_latch_not_started_or_closed_is_a_typed_error() {
    let e = MemoryEnsemble::new();
    let latch = LeaderLatch::new(e.connect(), ELECTION, "a").unwrap();
    let not = |r: zk_locks::Result<()>| matches!(r, Err(Error::NotParticipating { .. }));
    assert!(not(latch.await_leadership().map(drop)));
    assert!(not(latch.close()));
    latch.start().unwrap();
    assert!(not(latch.start()));
    latch.close().unwrap();
    assert!(not(latch.close()));
    assert!(not(latch.start()));
    assert!(not(latch.await_leadership().map(drop)));
    assert!(matches!(
        LeaderLatch::new(e.connect(), "/", "a"),
        Err(Error::InvalidPath { .. })
    ));
}

/// Closing wakes a thread waiting to lead (`NotParticipating`) and one waiting on the
/// leadership (which ends: its token cancelled, its state `Lost` once close returns).
#[test]
fn closing_ends_every_wait() {
    let e = MemoryEnsemble::new();
    let a = started(e.connect(), "a");
    let leadership = a.await_leadership().unwrap();
    let b = started(e.connect(), "b");
    wait_participants(&a, 2);
    std::thread::scope(|s| {
        let leading = s.spawn(|| leadership.wait_while_leading(None));
        let waiting = s.spawn(|| b.await_leadership());
        a.close().unwrap();
        let state = leading.join().unwrap();
        // Woken by the spell's end (the node may still be there then) or by the deletion.
        assert!(state == LockState::Lost || leadership.ended().is_cancelled());
        assert_eq!(leadership.state(), LockState::Lost);
        assert!(waiting.join().unwrap().is_ok()); // b leads now
        b.close().unwrap();
    });
    let c = started(e.connect(), "c");
    // c queues first: d's thread could otherwise create its node before c's does.
    wait_participants(&c, 1);
    let d = started(e.connect(), "d");
    c.await_leadership().unwrap();
    std::thread::scope(|s| {
        let waiting = s.spawn(|| d.await_leadership());
        wait_participants(&c, 2);
        d.close().unwrap();
        let outcome = waiting.join().unwrap();
        assert!(
            matches!(outcome, Err(Error::NotParticipating { .. })),
            "{outcome:?}"
        );
    });
}

#[test]
fn a_panicking_listener_is_contained_and_the_others_are_told() {
    struct Panics;
    impl LeaderLatchListener for Panics {
        fn is_leader(&self, _: &Leadership) {
            panic!("a listener's bug");
        }
        fn not_leader(&self) {}
    }
    let e = MemoryEnsemble::new();
    let latch = LeaderLatch::new(e.connect(), ELECTION, "a").unwrap();
    latch.add_listener(Arc::new(Panics));
    let record = Arc::new(Record::default());
    let id = latch.add_listener(record.clone());
    latch.start().unwrap();
    latch.await_leadership().unwrap();
    record.wait_calls(1);
    assert!(latch.has_leadership());
    assert!(latch.remove_listener(id));
    assert!(!latch.remove_listener(id));
    latch.close().unwrap();
}

/// A listener may close its own latch (it runs on the latch's thread, which close then does
/// not wait for).
#[test]
fn a_listener_may_close_its_latch() {
    struct Abdicates(std::sync::OnceLock<Arc<LeaderLatch>>, AtomicUsize);
    impl LeaderLatchListener for Abdicates {
        fn is_leader(&self, _: &Leadership) {
            if let Some(latch) = self.0.get() {
                let closed = latch.close().is_ok();
                self.1.store(1 + usize::from(closed), Ordering::SeqCst);
            }
        }
        fn not_leader(&self) {}
    }
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let latch = Arc::new(LeaderLatch::new(c.clone(), ELECTION, "a").unwrap());
    let abdicates = Arc::new(Abdicates(Default::default(), AtomicUsize::new(0)));
    let _ = abdicates.0.set(latch.clone());
    latch.add_listener(abdicates.clone());
    latch.start().unwrap();
    zk_locks::testing::harness::eventually(PATIENCE, "the listener closed", || {
        abdicates.1.load(Ordering::SeqCst) == 2
    });
    zk_locks::testing::harness::eventually(PATIENCE, "the node deleted", || {
        c.get_children(ELECTION, None).unwrap().is_empty()
    });
    assert!(!latch.has_leadership());
}

#[test]
fn the_observer_sees_the_latch_nodes_queue_lead_and_go() {
    #[derive(Default)]
    struct Events(std::sync::Mutex<Vec<String>>);
    impl LockObserver for Events {
        fn queued(&self, e: &LockEvent<'_>) {
            self.0.lock().unwrap().push(format!("queued {}", e.kind));
        }
        fn acquired(&self, e: &LockEvent<'_>, _: Duration) {
            self.0.lock().unwrap().push(format!("acquired {}", e.kind));
        }
        fn released(&self, e: &LockEvent<'_>, _: Duration) {
            self.0.lock().unwrap().push(format!("released {}", e.kind));
        }
    }
    let e = MemoryEnsemble::new();
    let events = Arc::new(Events::default());
    let a = started(e.connect(), "a");
    a.await_leadership().unwrap();
    let client = e
        .connect_with(MemoryOptions::new().lock_observer(events.clone()))
        .unwrap();
    let b = started(client, "b");
    wait_participants(&a, 2);
    a.close().unwrap();
    b.await_leadership().unwrap();
    b.close().unwrap();
    let seen = events.0.lock().unwrap().clone();
    assert_eq!(seen, ["queued latch", "acquired latch", "released latch"]);
}

/// The moment the leader's node delete is sent, every copy of its leadership already reads
/// `Lost` (a successor can lead as soon as the delete is applied). Before, a copy read
/// `Held` until after the delete: for a moment two participants could read `Held`.
#[test]
fn a_leadership_reads_lost_before_its_node_is_deleted() {
    use std::sync::Mutex;
    use zk_locks::client::memory::Op;
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let latch = started(c.clone(), "a");
    let leadership = latch.await_leadership().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (copy, node, record) = (
        leadership.clone(),
        leadership.node_path().to_string(),
        seen.clone(),
    );
    c.on_request(Some(Box::new(move |op, path| {
        if op == Op::Delete && path == node {
            record.lock().unwrap().push(copy.state());
        }
    })));
    latch.close().unwrap();
    c.on_request(None);
    assert_eq!(*seen.lock().unwrap(), [LockState::Lost]);
}
