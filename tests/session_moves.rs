//! A write answered with another write's reply after the session moves (issue 24, item 2).
//!
//! A server matches a committed write to its own pending request by (session id, xid). On a
//! 5-member ensemble with three members frozen, the leader cannot commit: a create sent to the
//! leader waits. The session then moves to the one follower still running and sends a second
//! create; the frozen members resume and both creates commit, in order. Had the client reused
//! the first create's xid on its new connection, the follower would answer the second create
//! with the first one's result (its path), and the second node would exist unanswered.

use std::net::SocketAddr;
use std::time::Duration;

use zk_locks::client::native::NativeClient;
use zk_locks::testing::harness::{eventually, reach_state};
use zk_locks::testing::{require_server, FaultProxy, TestingCluster};
use zk_locks::{ConnectionState, CreateMode, ZkClient};

fn addr(cluster: &TestingCluster, i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], cluster.port(i)))
}

/// Requests member `i` has in process (`stat`'s "Outstanding"), 0 when it does not answer.
fn outstanding(cluster: &TestingCluster, i: usize) -> u64 {
    cluster
        .four_letter(i, "stat")
        .ok()
        .and_then(|stat| {
            stat.lines()
                .find_map(|l| l.strip_prefix("Outstanding:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn a_write_after_the_session_moved_gets_its_own_reply() {
    if !require_server() {
        return;
    }
    let cluster = TestingCluster::start(5).unwrap();
    let leader = cluster.leader().expect("a leader");
    let mut followers: Vec<usize> = (0..5).filter(|&i| i != leader).collect();
    let survivor = followers.pop().unwrap();
    // The lock directory, made by another client so that the first create below is the very
    // first request of the client under test (xid 1 on its first connection).
    let parent = format!("/moves-{}", uuid::Uuid::new_v4());
    let setup = NativeClient::connect(&cluster.connect_string(), Duration::from_secs(10)).unwrap();
    setup.create(&parent, b"", CreateMode::Persistent).unwrap();

    let proxy = FaultProxy::start(addr(&cluster, leader)).unwrap();
    let client = NativeClient::connect(&proxy.connect_string(), Duration::from_secs(20)).unwrap();
    let node = format!("{parent}/n-");

    // Without three of the five, the leader cannot commit: the first create waits.
    for &i in &followers {
        cluster.freeze(i);
    }
    let first = {
        let (client, node) = (client.clone(), node.clone());
        std::thread::spawn(move || client.create(&node, b"first", CreateMode::EphemeralSequential))
    };
    eventually(
        Duration::from_secs(10),
        "the first create waiting on the leader",
        || outstanding(&cluster, leader) >= 1,
    );
    // The session moves to the running follower; the second create waits there.
    proxy.set_target(addr(&cluster, survivor));
    proxy.cut();
    reach_state(
        client.as_ref(),
        ConnectionState::Reconnected,
        Duration::from_secs(20),
    );
    let second = {
        let (client, node) = (client.clone(), node.clone());
        std::thread::spawn(move || client.create(&node, b"second", CreateMode::EphemeralSequential))
    };
    eventually(
        Duration::from_secs(10),
        "the second create waiting on the follower",
        || outstanding(&cluster, survivor) >= 1,
    );
    for &i in &followers {
        cluster.thaw(i);
    }

    // The first create's connection was cut: its outcome is unknown to the caller.
    let first = first.join().unwrap();
    let second = second
        .join()
        .unwrap()
        .expect("the second create is answered");
    let (data, _) = client
        .get_data(&second, None)
        .expect("the node the second create names exists");
    assert_eq!(
        String::from_utf8_lossy(&data),
        "second",
        "the second create was answered with another create's path ({second}); the first \
         returned {first:?}; children: {:?}",
        client.get_children(&parent, None)
    );
    client.close();
    setup.close();
}
