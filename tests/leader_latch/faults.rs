//! The leader under the in-memory ensemble's faults: it stops leading as soon as its link is
//! in doubt (before the server can have elected another), leads again on the same node when
//! the link comes back with the session, and queues anew when the node is lost. At no moment
//! do two participants report leadership `Held`; terms never go back.

use std::sync::Arc;

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::client::MultiOp;
use zk_locks::locks::LeaderLatch;
use zk_locks::testing::harness::eventually;
use zk_locks::{Error, LockState, ZkClient};

use super::{leaders, started, wait_participants, Record, ELECTION, PATIENCE};

#[test]
fn a_suspended_leader_stops_at_once_and_leads_again_with_the_same_term_on_resume() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let latch = started(c.clone(), "a");
    let record = Arc::new(Record::default());
    latch.add_listener(record.clone());
    let first = latch.await_leadership().unwrap();
    record.wait_calls(1);

    c.suspend();
    // At once, whatever the latch's thread has done yet: the state is the node's.
    assert!(!latch.has_leadership());
    assert_eq!(first.state(), LockState::Suspect);
    record.wait_calls(2);
    assert!(first.ended().is_cancelled());
    assert!(latch.leadership().is_none());

    c.resume();
    let again = latch.await_leadership_for(PATIENCE).unwrap().unwrap();
    assert_eq!(again.term(), first.term());
    assert!(!again.ended().is_cancelled());
    record.wait_calls(3);
    let t = first.term();
    assert_eq!(
        record.told(),
        [format!("+{t}"), "-".into(), format!("+{t}")]
    );
    latch.close().unwrap();
}

/// The leader's session expires while its link is down: the next participant leads (the
/// old leader stopped when the link went down), the old one learns `Lost` on resume and
/// queues behind with a new node; then it leads again with a larger term.
#[test]
fn a_leader_whose_session_expires_hands_over_and_queues_again() {
    let e = MemoryEnsemble::new();
    let ca = e.connect();
    let a = started(ca.clone(), "a");
    let first = a.await_leadership().unwrap();
    let b = started(e.connect(), "b");
    wait_participants(&b, 2);

    ca.suspend();
    assert_eq!(leaders(&[&a, &b]), 0);
    ca.expire(); // the server deletes a's node: b leads
    let second = b.await_leadership_for(PATIENCE).unwrap().unwrap();
    assert!(second.term() > first.term());
    assert_eq!(leaders(&[&a, &b]), 1);
    ca.resume(); // a learns its session was lost
    assert_eq!(first.state(), LockState::Lost);
    wait_participants(&b, 2); // a queued again, behind b
    assert_eq!(leaders(&[&a, &b]), 1);
    assert!(b.has_leadership());
    let ids: Vec<String> = b
        .participants()
        .unwrap()
        .iter()
        .map(|p| p.id().into_owned())
        .collect();
    assert_eq!(ids, ["b", "a"]);

    b.close().unwrap();
    let third = a.await_leadership_for(PATIENCE).unwrap().unwrap();
    assert!(third.term() > second.term());
    a.close().unwrap();
}

/// The session expires while the leader is connected: it learns at once (Lost), never
/// overlapping with the next leader.
#[test]
fn an_expiry_while_connected_ends_leadership_and_the_next_one_leads() {
    let e = MemoryEnsemble::new();
    let ca = e.connect();
    let a = started(ca.clone(), "a");
    let first = a.await_leadership().unwrap();
    let b = started(e.connect(), "b");
    wait_participants(&b, 2);
    ca.expire();
    let second = b.await_leadership_for(PATIENCE).unwrap().unwrap();
    assert_eq!(first.state(), LockState::Lost);
    assert!(second.term() > first.term());
    assert_eq!(leaders(&[&a, &b]), 1);
    // a's fenced write is refused without a request; b's commits.
    ca.create("/config", b"", zk_locks::CreateMode::Persistent)
        .unwrap();
    let write = [MultiOp::SetData {
        path: "/config".into(),
        data: b"x".to_vec(),
        version: -1,
    }];
    assert!(matches!(
        first.fenced_multi(&write),
        Err(Error::LockLost { .. })
    ));
    second.fenced_multi(&write).unwrap();
}

/// Someone deletes the leader's node (an operator): the leader's wait on it sees the
/// deletion, it stops leading and queues a new node; the next participant leads.
#[test]
fn a_leader_whose_node_is_deleted_stops_and_queues_again() {
    let e = MemoryEnsemble::new();
    let a = started(e.connect(), "a");
    let first = a.await_leadership().unwrap();
    let b = started(e.connect(), "b");
    wait_participants(&b, 2);
    let operator = e.connect();
    operator.delete(first.node_path(), None).unwrap();
    let second = b.await_leadership_for(PATIENCE).unwrap().unwrap();
    eventually(PATIENCE, "a stops leading", || !a.has_leadership());
    assert_eq!(first.state(), LockState::Lost);
    assert!(second.term() > first.term());
    wait_participants(&b, 2); // a queued again
    assert_eq!(b.leader().unwrap().unwrap().id(), "b");
    assert_eq!(leaders(&[&a, &b]), 1);
}

/// The client closes under a latch: a wait to lead ends with `Closed`, the leadership is
/// `Lost`.
#[test]
fn a_closed_client_ends_the_latch() {
    let e = MemoryEnsemble::new();
    let ca = e.connect();
    let a = started(ca.clone(), "a");
    let leadership = a.await_leadership().unwrap();
    let cb = e.connect();
    let b = LeaderLatch::new(cb.clone(), ELECTION, "b").unwrap();
    b.start().unwrap();
    wait_participants(&a, 2);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| b.await_leadership());
        cb.close();
        let outcome = waiting.join().unwrap();
        assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
    });
    ca.close();
    assert_eq!(leadership.state(), LockState::Lost);
    eventually(PATIENCE, "a stops leading", || a.leadership().is_none());
    assert!(!a.has_leadership());
}

/// Many leadership changes under faults: after each, at most one participant leads, and
/// the terms of successive leaders only grow.
#[test]
fn terms_only_grow_through_a_run_of_faults() {
    let e = MemoryEnsemble::new();
    let clients: Vec<_> = (0..3).map(|_| e.connect()).collect();
    let latches: Vec<LeaderLatch> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| started(c.clone(), &format!("p{i}")))
        .collect();
    let all: Vec<&LeaderLatch> = latches.iter().collect();
    let mut last_term = 0;
    for round in 0..9 {
        let (i, leadership) = eventually_one_leader(&latches);
        assert!(
            leadership.term() > last_term,
            "round {round}: term went back"
        );
        last_term = leadership.term();
        assert_eq!(leaders(&all), 1);
        match round % 3 {
            0 => clients[i].expire(),
            1 => {
                clients[i].suspend();
                assert!(!latches[i].has_leadership());
                clients[i].expire(); // another may lead now
                assert!(leaders(&all) <= 1);
                clients[i].resume();
            }
            _ => {
                let operator = e.connect();
                operator.delete(leadership.node_path(), None).unwrap();
            }
        }
        eventually(PATIENCE, "the old leader stops", || {
            leadership.state() == LockState::Lost
        });
    }
}

/// The one participant that leads (waits for one), and its leadership.
fn eventually_one_leader(latches: &[LeaderLatch]) -> (usize, zk_locks::Leadership) {
    let mut found = None;
    eventually(PATIENCE, "a leader", || {
        found = latches
            .iter()
            .enumerate()
            .find_map(|(i, l)| l.leadership().filter(|l| l.is_leading()).map(|l| (i, l)));
        found.is_some()
    });
    found.unwrap()
}
