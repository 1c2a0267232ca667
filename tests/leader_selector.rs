//! `LeaderSelector` on the in-memory ensemble, and on a real server through every real
//! backend: the callback runs while leading and leadership moves when it returns; requeue
//! and auto requeue; interrupt; Curator's default policy (suspended or lost cancels the
//! leadership's token); a callback that ignores its token keeps the node until its session
//! is lost.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::locks::{LeaderSelector, ParticipantKind};
use zk_locks::testing::harness::{eventually, wants_proof, Backend, Real};
use zk_locks::{Error, Leadership, LockState, SharedClient, ZkClient};

const PATIENCE: Duration = Duration::from_secs(10);
const ELECTION: &str = "/election/selector";

/// A selector whose callback reports its leadership on `led` and leads until its token ends.
fn cooperative(client: SharedClient, id: &str, led: mpsc::Sender<Leadership>) -> LeaderSelector {
    LeaderSelector::new(client, ELECTION, move |leadership| {
        let _ = led.send(leadership.clone());
        leadership.wait_while_leading(None);
        while !leadership.ended().is_cancelled() {
            leadership.wait_while_leading(Some(Duration::from_millis(20)));
        }
    })
    .unwrap()
    .with_id(id)
}

fn recv(rx: &mpsc::Receiver<Leadership>) -> Leadership {
    rx.recv_timeout(PATIENCE).expect("a leadership in time")
}

#[test]
fn the_callback_leads_through_a_mutex_node_holding_the_id_and_leadership_moves_when_it_returns() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let (tx, rx) = mpsc::channel();
    let a = cooperative(c.clone(), "a", tx.clone());
    a.start().unwrap();
    let first = recv(&rx);
    assert_eq!(first.id(), "a");
    assert!(a.has_leadership());
    let name = first.node_path().rsplit('/').next().unwrap().to_string();
    assert!(
        name.starts_with("_c_") && name[40..].starts_with("lock-"),
        "{name}"
    );
    assert_eq!(c.get_data(first.node_path(), None).unwrap().0, b"a");

    let b = cooperative(e.connect(), "b", tx);
    b.start().unwrap();
    eventually(PATIENCE, "b queued", || {
        a.participants().unwrap().len() == 2
    });
    let queue = b.participants().unwrap();
    assert_eq!((queue[0].id().as_ref(), queue[0].is_holder), ("a", true));
    assert_eq!((queue[1].id().as_ref(), queue[1].is_holder), ("b", false));
    assert_eq!(queue[0].kind, ParticipantKind::Mutex);
    assert!(!b.has_leadership());

    a.interrupt_leadership(); // a's callback returns: b leads
    let second = recv(&rx);
    assert_eq!(second.id(), "b");
    assert!(second.term() > first.term());
    assert_eq!(first.state(), LockState::Lost);
    assert!(!a.has_leadership());
    // Not requeued: a is out of the queue until asked.
    eventually(PATIENCE, "a gone", || b.participants().unwrap().len() == 1);
    assert!(a.requeue().unwrap());
    eventually(PATIENCE, "a queued", || {
        b.participants().unwrap().len() == 2
    });
    assert_eq!(b.leader().unwrap().unwrap().id(), "b");
    b.close().unwrap();
    let third = recv(&rx);
    assert_eq!(third.id(), "a");
    assert!(third.term() > second.term());
    a.close().unwrap();
    assert!(c.get_children(ELECTION, None).unwrap().is_empty());
}

#[test]
fn auto_requeue_takes_turns_and_never_two_lead_at_once() {
    let e = MemoryEnsemble::new();
    let leading = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let turns = Arc::new(AtomicUsize::new(0));
    let terms = Arc::new(std::sync::Mutex::new(Vec::new()));
    let selectors: Vec<LeaderSelector> = (0..3)
        .map(|i| {
            let (leading, turns, terms) = (leading.clone(), turns.clone(), terms.clone());
            let overlaps = overlaps.clone();
            // A panic here would be contained by the selector: count what must not happen.
            let s = LeaderSelector::new(e.connect(), ELECTION, move |l| {
                let others = leading.fetch_add(1, Ordering::SeqCst);
                if others != 0 || l.state() != LockState::Held {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                terms.lock().unwrap().push(l.term());
                leading.fetch_sub(1, Ordering::SeqCst);
                turns.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap()
            .with_id(format!("p{i}"));
            s.auto_requeue();
            s.start().unwrap();
            s
        })
        .collect();
    eventually(PATIENCE, "turns", || turns.load(Ordering::SeqCst) >= 30);
    for s in &selectors {
        s.close().unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two leaders at once");
    let terms = terms.lock().unwrap().clone();
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "{terms:?}");
}

#[test]
fn a_suspended_session_cancels_the_leadership_and_the_callback_gives_it_up() {
    let e = MemoryEnsemble::new();
    let ca = e.connect();
    let (tx, rx) = mpsc::channel();
    let a = cooperative(ca.clone(), "a", tx.clone());
    a.start().unwrap();
    let first = recv(&rx);
    let b = cooperative(e.connect(), "b", tx);
    b.start().unwrap();
    eventually(PATIENCE, "b queued", || {
        b.participants().unwrap().len() == 2
    });
    ca.suspend();
    eventually(PATIENCE, "the token ends", || first.ended().is_cancelled());
    assert!(!a.has_leadership());
    // The callback returned; its node's delete waits for the link (the session lives).
    ca.resume();
    let second = recv(&rx);
    assert_eq!(second.id(), "b");
    assert!(second.term() > first.term());
    a.close().unwrap();
    b.close().unwrap();
}

/// A callback that ignores its token keeps the node: others do not lead while its session
/// lives; once the session is lost they do, and its leadership reads `Lost`.
#[test]
fn a_callback_that_ignores_its_token_keeps_leadership_until_the_session_is_lost() {
    let e = MemoryEnsemble::new();
    let ca = e.connect();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (tx, rx) = mpsc::channel();
    let stubborn_tx = tx.clone();
    let a = LeaderSelector::new(ca.clone(), ELECTION, move |l| {
        let _ = stubborn_tx.send(l.clone());
        let _ = release_rx.recv(); // ignores the token
    })
    .unwrap()
    .with_id("a");
    a.start().unwrap();
    let first = recv(&rx);
    let b = cooperative(e.connect(), "b", tx);
    b.start().unwrap();
    eventually(PATIENCE, "b queued", || {
        b.participants().unwrap().len() == 2
    });
    a.interrupt_leadership();
    assert!(first.ended().is_cancelled());
    assert!(
        rx.recv_timeout(Duration::from_millis(100)).is_err(),
        "b led too early"
    );
    assert_eq!(b.leader().unwrap().unwrap().id(), "a");

    ca.expire(); // the session is lost: the server deletes a's node
    let second = recv(&rx);
    assert_eq!(second.id(), "b");
    assert_eq!(first.state(), LockState::Lost);
    release_tx.send(()).unwrap();
    a.close().unwrap();
    b.close().unwrap();
}

#[test]
fn close_withdraws_a_queued_selector_and_a_panicking_callback_is_contained() {
    let e = MemoryEnsemble::new();
    let (tx, rx) = mpsc::channel();
    let a = cooperative(e.connect(), "a", tx);
    a.start().unwrap();
    let _first = recv(&rx);
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let b = LeaderSelector::new(e.connect(), ELECTION, move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        panic!("a callback's bug");
    })
    .unwrap()
    .with_id("b");
    b.auto_requeue();
    b.start().unwrap();
    eventually(PATIENCE, "b queued", || {
        a.participants().unwrap().len() == 2
    });
    a.close().unwrap();
    eventually(PATIENCE, "b ran twice", || runs.load(Ordering::SeqCst) >= 2);
    b.close().unwrap();
    let c = e.connect();
    assert!(c.get_children(ELECTION, None).unwrap().is_empty());
    assert!(matches!(b.close(), Err(Error::NotParticipating { .. })));
    assert!(matches!(b.requeue(), Err(Error::NotParticipating { .. })));
    assert!(matches!(b.start(), Err(Error::NotParticipating { .. })));
}

/// A selector without an id leads as its node's data, `<host> <pid>` (its docs, and what a
/// latch's leadership names: its node's data). Before, `Leadership::id()` was "".
#[test]
fn a_selector_without_an_id_leads_as_its_node_data() {
    let e = MemoryEnsemble::new();
    let c: SharedClient = e.connect();
    let (tx, rx) = mpsc::channel();
    let selector = LeaderSelector::new(c.clone(), ELECTION, move |leadership| {
        let _ = tx.send(leadership.clone());
        leadership.wait_while_leading(None);
    })
    .unwrap();
    selector.start().unwrap();
    let leadership = recv(&rx);
    let data = c.get_data(leadership.node_path(), None).unwrap().0;
    assert!(!data.is_empty());
    assert_eq!(leadership.id().as_bytes(), data.as_slice());
    assert_eq!(selector.id().as_bytes(), data.as_slice());
    assert!(leadership
        .id()
        .ends_with(&format!(" {}", std::process::id())));
    // `with_id("")` is the same default.
    let named = LeaderSelector::new(c.clone(), ELECTION, |_| {})
        .unwrap()
        .with_id("");
    assert_eq!(named.id(), selector.id());
    // Kept after its spell: the session no longer proves itself for it.
    assert!(wants_proof(c.as_ref()));
    selector.close().unwrap();
    assert!(!leadership.is_leading());
    assert!(
        !wants_proof(c.as_ref()),
        "a closed selector's kept leadership"
    );
}

#[test]
fn a_real_selector_hands_over_when_the_callback_returns_and_on_expiry() {
    if let Some(backend) = Real::native() {
        hands_over_when_the_callback_returns_and_on_expiry(backend);
    }
}

#[cfg(feature = "tls")]
#[test]
fn a_real_selector_over_tls_hands_over() {
    if let Some(backend) = Real::native_tls() {
        hands_over_when_the_callback_returns_and_on_expiry(backend);
    }
}

#[cfg(feature = "zookeeper-crate")]
#[test]
fn a_real_selector_through_the_zookeeper_crate_hands_over() {
    if let Some(backend) = Real::new() {
        hands_over_when_the_callback_returns_and_on_expiry(backend);
    }
}

/// Two auto-requeueing selectors on `backend`: leadership moves when the callback returns
/// (interrupted) and when the leader's session expires, terms growing.
fn hands_over_when_the_callback_returns_and_on_expiry(backend: Real) {
    let path = format!("{}/selector", backend.root());
    let sessions: Vec<_> = (0..2).map(|_| backend.connect()).collect();
    let (tx, rx) = mpsc::channel();
    let make = |i: usize, id: &str| {
        let tx = tx.clone();
        let s = LeaderSelector::new(sessions[i].client.clone(), &path, move |l| {
            let _ = tx.send(l.clone());
            while !l.ended().is_cancelled() {
                l.wait_while_leading(Some(Duration::from_millis(50)));
            }
        })
        .unwrap()
        .with_id(id);
        s.auto_requeue();
        s.start().unwrap();
        s
    };
    let a = make(0, "a");
    let first = recv(&rx);
    let b = make(1, "b");
    eventually(PATIENCE, "b queued", || {
        b.participants().unwrap().len() == 2
    });
    a.interrupt_leadership();
    let second = recv(&rx);
    assert_eq!(second.id(), "b");
    assert!(second.term() > first.term());
    sessions[1].faults.expire(); // b's session is lost: a (requeued) leads
    let third = recv(&rx);
    assert_eq!(third.id(), "a");
    assert!(third.term() > second.term());
    a.close().unwrap();
    b.close().unwrap();
}

/// The moment the leader's node delete is sent (its callback returned), its leadership
/// already reads `Lost`. Before, it read `Held` until after the delete, when a successor
/// could already lead (seen as a flaky `first.state()` assertion under load).
#[test]
fn a_leadership_reads_lost_before_its_node_is_deleted() {
    use zk_locks::client::memory::Op;
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let (tx, rx) = mpsc::channel();
    let a = cooperative(c.clone(), "a", tx);
    a.start().unwrap();
    let first = recv(&rx);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (copy, node, record) = (first.clone(), first.node_path().to_string(), seen.clone());
    c.on_request(Some(Box::new(move |op, path| {
        if op == Op::Delete && path == node {
            record.lock().unwrap().push(copy.state());
        }
    })));
    a.interrupt_leadership();
    eventually(PATIENCE, "the node deleted", || {
        c.get_children(ELECTION, None).unwrap().is_empty()
    });
    c.on_request(None);
    assert_eq!(*seen.lock().unwrap(), [LockState::Lost]);
    a.close().unwrap();
}
