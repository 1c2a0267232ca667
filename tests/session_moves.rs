//! A write answered with another write's reply after the session moves (issue 24, item 2).
//!
//! A server matches a committed write to its own pending request by (session id, xid). On a
//! 5-member ensemble with three members frozen, the leader cannot commit: a create sent to the
//! leader waits. The session then moves to the one follower still running and sends a second
//! create; the frozen members resume and both creates commit, in order. Had the client reused
//! the first create's xid on its new connection, the follower would answer the second create
//! with the first one's result (its path), and the second node would exist unanswered.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
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

/// Polls `cond` for up to ten seconds; false if it never held.
fn within_ten_seconds(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        // Polling another process's counter; not synchronisation of the subject.
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// One round of the scenario on a serving ensemble. `Ok(None)`: inconclusive (the leader
/// gave up before the round was set: without a quorum it steps down after `syncLimit`
/// ticks, 5 s here, and a loaded machine may take that long); `Ok(Some(()))`: the second
/// create got its own reply; `Err`: it got another's.
fn round(cluster: &TestingCluster) -> Result<Option<()>, String> {
    let Some(leader) = cluster.leader() else {
        return Ok(None);
    };
    let mut followers: Vec<usize> = (0..5).filter(|&i| i != leader).collect();
    let survivor = followers.pop().unwrap();
    // The lock directory, made by another client so that the first create below is the very
    // first request of the client under test (xid 1 on its first connection).
    let parent = format!("/moves-{}", uuid::Uuid::new_v4());
    let setup = NativeClient::connect(&cluster.connect_string(), Duration::from_secs(10)).unwrap();
    setup.create(&parent, b"", CreateMode::Persistent).unwrap();
    setup.close();

    let proxy = FaultProxy::start(addr(cluster, leader)).unwrap();
    let client = NativeClient::connect(&proxy.connect_string(), Duration::from_secs(20)).unwrap();
    let node = format!("{parent}/n-");

    // Without three of the five, the leader cannot commit: the first create waits.
    for &i in &followers {
        cluster.freeze(i);
    }
    let thaw = || {
        for &i in &followers {
            cluster.thaw(i);
        }
    };
    let first = {
        let (client, node) = (client.clone(), node.clone());
        std::thread::spawn(move || client.create(&node, b"first", CreateMode::EphemeralSequential))
    };
    if !within_ten_seconds(|| outstanding(cluster, leader) >= 1) {
        thaw();
        return Ok(None);
    }
    // The session moves to the running follower; the second create waits there.
    proxy.set_target(addr(cluster, survivor));
    proxy.cut();
    let s = client.session().snapshot();
    let moved =
        within_ten_seconds(|| client.session().snapshot().state == ConnectionState::Reconnected)
            && client.session().snapshot().losses == s.losses;
    if !moved {
        thaw();
        return Ok(None);
    }
    let second = {
        let (client, node) = (client.clone(), node.clone());
        std::thread::spawn(move || client.create(&node, b"second", CreateMode::EphemeralSequential))
    };
    let waiting = within_ten_seconds(|| outstanding(cluster, survivor) >= 1);
    thaw();
    // The first create's connection was cut: its outcome is unknown to the caller.
    let first = first.join().unwrap();
    let second = second.join().unwrap();
    let (true, Ok(second)) = (waiting, second) else {
        // The leader stepped down before the second create was in place.
        client.close();
        return Ok(None);
    };
    let data = client
        .get_data(&second, None)
        .map_err(|e| format!("the node the second create names ({second}): {e}"))?
        .0;
    let children = client.get_children(&parent, None);
    client.close();
    if data != b"second" {
        return Err(format!(
            "the second create was answered with another create's path ({second}, data {:?}); \
             the first returned {first:?}; children: {children:?}",
            String::from_utf8_lossy(&data)
        ));
    }
    Ok(Some(()))
}

#[test]
fn a_write_after_the_session_moved_gets_its_own_reply() {
    if !require_server() {
        return;
    }
    // The client under test asks for 20 s (past ZooKeeper's own twenty ticks, 10 s): it must
    // outlive a leader that steps down and an election while its creates wait.
    let cluster = TestingCluster::builder(5)
        .max_session_timeout(Duration::from_secs(20))
        .start()
        .unwrap();
    for attempt in 1..=3 {
        match round(&cluster) {
            Ok(Some(())) => return,
            Ok(None) => eprintln!("round {attempt}: inconclusive (no quorum for too long)"),
            Err(e) => panic!("{e}"),
        }
        cluster.wait_for_quorum(Duration::from_secs(60)).unwrap();
    }
    panic!("three rounds in a row inconclusive: the leader gave up before each was set");
}
