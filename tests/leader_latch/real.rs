//! The latch on a real ZooKeeper (the shared test server, a fault proxy per session) through
//! every real backend — our own client, our own client over TLS, the `zookeeper`-crate
//! backend: a blip, a handover on close and on an expired session. Skipped without a server
//! unless `ZK_LOCKS_REQUIRE_SERVER=1`.

use zk_locks::locks::LeaderLatch;
use zk_locks::testing::harness::{Backend, Real};
use zk_locks::LockState;

use super::{leaders, wait_participants, PATIENCE};

#[test]
fn a_real_election_survives_a_blip_and_hands_over_on_close_and_on_expiry() {
    if let Some(backend) = Real::native() {
        survives_a_blip_and_hands_over(backend);
    }
}

#[cfg(feature = "tls")]
#[test]
fn a_real_election_over_tls_survives_a_blip_and_hands_over() {
    if let Some(backend) = Real::native_tls() {
        survives_a_blip_and_hands_over(backend);
    }
}

#[cfg(feature = "zookeeper-crate")]
#[test]
fn a_real_election_through_the_zookeeper_crate_survives_a_blip_and_hands_over() {
    if let Some(backend) = Real::new() {
        survives_a_blip_and_hands_over(backend);
    }
}

fn survives_a_blip_and_hands_over(backend: Real) {
    let path = format!("{}/election", backend.root());
    let sessions: Vec<_> = (0..3).map(|_| backend.connect()).collect();
    // Started one after the other, each once the one before has queued: a, b, c in order.
    let latches: Vec<LeaderLatch> = ["a", "b", "c"]
        .iter()
        .zip(&sessions)
        .enumerate()
        .map(|(i, (id, s))| {
            let latch = LeaderLatch::new(s.client.clone(), &path, *id).unwrap();
            latch.start().unwrap();
            wait_participants(&latch, i + 1);
            latch
        })
        .collect();
    let [a, b, c] = &latches[..] else {
        unreachable!()
    };
    let first = a.await_leadership_for(PATIENCE).unwrap().unwrap();
    assert_eq!(c.leader().unwrap().unwrap().id(), "a");

    sessions[0].faults.blip(); // same session: a leads again, same term
    let again = a.await_leadership_for(PATIENCE).unwrap().unwrap();
    assert_eq!(again.term(), first.term());
    assert_eq!(leaders(&[a, b, c]), 1);

    a.close().unwrap();
    let second = b.await_leadership_for(PATIENCE).unwrap().unwrap();
    assert!(second.term() > first.term());
    assert_eq!(leaders(&[a, b, c]), 1);

    sessions[1].faults.expire(); // b's node goes with its session: c leads
    let third = c.await_leadership_for(PATIENCE).unwrap().unwrap();
    assert!(third.term() > second.term());
    assert_eq!(second.state(), LockState::Lost);
    wait_participants(c, 2); // b queued again, behind c
    assert_eq!(leaders(&[a, b, c]), 1);
    assert_eq!(b.leader().unwrap().unwrap().id(), "c");
}
