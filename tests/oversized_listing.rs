//! A lock directory whose listing is over the client's packet limit (about 17,000 lock nodes
//! at ZooKeeper's default 1 MiB; here a small limit and 600 nodes, the same path through the
//! code), on a real ZooKeeper (issue 40, item 6).
//!
//! Must hold: the acquire fails at once with a clear typed error
//! ([`ZkError::ReplyTooLarge`]) and leaves no node behind; the session's connection is not
//! broken (no reconnect), so every other lock of the session is untouched. Before, the
//! oversized reply broke the connection, the wait listed again on the next one, and so on:
//! a wedged queue that cut every lock of the session off over and over.

use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::testing::harness::unique_root;
use zk_locks::testing::shared_server;
use zk_locks::{CreateMode, InterProcessLock, InterProcessMutex, LockState, ZkClient, ZkError};

const LIMIT: usize = 16 * 1024;
const NODES: usize = 600;

#[test]
fn an_oversized_listing_fails_the_acquire_with_a_typed_error_and_keeps_the_connection() {
    let Some(server) = shared_server() else {
        return; // skipped (not under CI)
    };
    let crowded = unique_root("oversized");
    let filler = NativeClient::connect(&server.connect_string(), Duration::from_secs(10)).unwrap();
    filler
        .create(&crowded, b"", CreateMode::Persistent)
        .unwrap();
    for i in 0..NODES {
        // Named as mutex nodes, 50 bytes each: the listing is about 30 KiB.
        let name = format!("_c_{}-lock-{i:010}", uuid::Uuid::new_v4());
        filler
            .create(&format!("{crowded}/{name}"), b"", CreateMode::Persistent)
            .unwrap();
    }
    let client = NativeClient::connect_with(
        NativeOptions::new(server.connect_string())
            .session_timeout(Duration::from_secs(10))
            .packet_limit(LIMIT),
    )
    .unwrap();
    let other = InterProcessMutex::new(client.clone(), &unique_root("kept")).unwrap();
    let kept = other.lock().unwrap();
    let attempts = client.connect_attempts();

    let lock = InterProcessMutex::new(client.clone(), &crowded).unwrap();
    let started = Instant::now();
    let err = lock
        .try_lock_for(Duration::from_secs(20))
        .expect_err("acquired behind 600 nodes");
    assert_eq!(err.zk_code(), Some(ZkError::ReplyTooLarge), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the acquire waited out its deadline"
    );
    assert_eq!(
        client.connect_attempts(),
        attempts,
        "the connection was broken: {:?}",
        client.link_journal()
    );
    assert_eq!(kept.state(), LockState::Held);
    // No node of ours left behind (the delete may finish just after the call returns).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = filler.get_children(&crowded, None).unwrap().len();
        if left == NODES {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} nodes of ours left",
            left - NODES
        );
        std::thread::sleep(Duration::from_millis(20)); // polling the server
    }
    drop(kept);
}
