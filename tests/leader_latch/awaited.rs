//! `LeaderLatch::await_leadership_async`: leadership awaited by a future, woken by the latch's
//! thread, on the in-memory ensemble and a real ZooKeeper; `Leadership::ended().cancelled()`
//! awaited until the spell ends; `LeaderLatch::close_async` awaited until the node is given
//! back.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::client::native::NativeClient;
use zk_locks::locks::{CloseMode, LeaderLatch};
use zk_locks::testing::harness::unique_root;
use zk_locks::testing::shared_server;
use zk_locks::{Error, SharedClient};

use super::awaiting::runtime;
use super::{started, PATIENCE};

/// The second participant (started once the first leads) has its future pending while the
/// first leads, and ready with the spell once the first closes; the first's spell, awaited,
/// ends with its close.
fn hand_over(first: LeaderLatch, make_second: impl FnOnce() -> LeaderLatch) {
    runtime().block_on(async move {
        let leading = tokio::time::timeout(PATIENCE, first.await_leadership_async())
            .await
            .expect("the first never led")
            .unwrap();
        // Started once the first leads: it queues behind it.
        let second = make_second();
        let mut waiting = pin!(second.await_leadership_async());
        let noop = Waker::noop();
        assert!(waiting
            .as_mut()
            .poll(&mut Context::from_waker(noop))
            .is_pending());
        let ended = leading.ended().clone();
        let closer = tokio::task::spawn_blocking(move || first.close_with(CloseMode::NotifyLeader));
        tokio::time::timeout(PATIENCE, ended.cancelled())
            .await
            .expect("the first spell did not end");
        let spell = tokio::time::timeout(PATIENCE, waiting)
            .await
            .expect("the second never led")
            .unwrap();
        assert!(spell.is_leading());
        assert!(spell.term() > leading.term());
        closer.await.unwrap().unwrap();
        // Closed without a thread waiting: ready once the latch's thread gave the node back.
        tokio::time::timeout(PATIENCE, second.close_async())
            .await
            .expect("the close did not end")
            .unwrap();
        assert!(!spell.is_leading());
        assert!(second.participants().unwrap().is_empty());
        let again = second.close_async().await;
        assert!(
            matches!(again, Err(Error::NotParticipating { .. })),
            "{again:?}"
        );
    });
}

#[test]
fn leadership_is_awaited_without_a_thread_on_the_memory_ensemble() {
    let ensemble = MemoryEnsemble::new();
    hand_over(started(ensemble.connect(), "a"), || {
        started(ensemble.connect(), "b")
    });
}

#[test]
fn leadership_is_awaited_without_a_thread_on_a_real_server() {
    let Some(server) = shared_server() else {
        return; // skipped (not under CI)
    };
    let path = unique_root("awaited-election");
    let latch = |id| {
        let client: SharedClient =
            NativeClient::connect(&server.connect_string(), PATIENCE).unwrap();
        let latch = LeaderLatch::new(client, &path, id).unwrap();
        latch.start().unwrap();
        latch
    };
    hand_over(latch("a"), || latch("b"));
}

#[test]
fn awaiting_a_latch_not_started_or_closed_fails() {
    let ensemble = MemoryEnsemble::new();
    let latch = LeaderLatch::new(ensemble.connect(), "/election/awaited", "a").unwrap();
    runtime().block_on(async {
        let early = latch.await_leadership_async().await;
        assert!(
            matches!(early, Err(Error::NotParticipating { .. })),
            "{early:?}"
        );
    });
    let holder = started(ensemble.connect(), "holder");
    let latch = LeaderLatch::new(ensemble.connect(), super::ELECTION, "b").unwrap();
    latch.start().unwrap();
    let mut waiting = Box::pin(latch.await_leadership_async());
    let noop = Waker::noop();
    assert!(waiting
        .as_mut()
        .poll(&mut Context::from_waker(noop))
        .is_pending());
    latch.close().unwrap();
    match waiting.as_mut().poll(&mut Context::from_waker(noop)) {
        Poll::Ready(Err(Error::NotParticipating { .. })) => {}
        other => panic!("{other:?}"),
    }
    drop(waiting);
    holder.close().unwrap();
}
