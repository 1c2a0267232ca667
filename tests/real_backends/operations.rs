//! Requests and callbacks on a healthy session: create (sequential, ephemeral, container),
//! exists, data and versions, error codes, watches (one-shot, disarmed on a failed read),
//! callbacks that panic, close.

use std::sync::mpsc;

use zk_locks::client::EventType;
use zk_locks::session::ConnectionState;
use zk_locks::testing::shared_server;
use zk_locks::{CreateMode, ZkError};

use crate::backend::{connect, unique_root, ClientKind, SESSION};

fn basic_operations_and_ephemeral_owner(kind: ClientKind) {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(kind, &server.connect_string());
    let root = unique_root("basic");
    assert_eq!(
        client.create(&root, b"x", CreateMode::Persistent).unwrap(),
        root
    );
    let seq = client
        .create(&format!("{root}/n-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    assert!(seq.starts_with(&format!("{root}/n-")) && seq.len() == root.len() + 3 + 10);
    let stat = client.exists(&seq).unwrap().unwrap();
    assert_eq!(Some(stat.ephemeral_owner), client.session().session_id());
    assert_eq!(client.get_children(&root, None).unwrap().len(), 1);
    assert_eq!(client.exists(&format!("{root}/none")).unwrap(), None);
    assert_eq!(
        client.get_data(&format!("{root}/none"), None).unwrap_err(),
        ZkError::NoNode
    );
    let stat = client.set_data(&root, b"y", Some(0)).unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(
        client.set_data(&root, b"z", Some(0)).unwrap_err(),
        ZkError::BadVersion
    );
    let container = client
        .create(&format!("{root}/c"), b"", CreateMode::Container)
        .unwrap();
    // No session owns a container: the crate backend creates it Persistent on purpose (its
    // container mode would anyway), our own client a real container, whose `Stat` shows
    // owner 0 as well.
    assert_eq!(
        client.exists(&container).unwrap().unwrap().ephemeral_owner,
        0
    );
    assert_eq!(client.delete(&root, None).unwrap_err(), ZkError::NotEmpty);
    assert_eq!(
        client
            .create("bad", b"", CreateMode::Persistent)
            .unwrap_err(),
        ZkError::BadArguments
    );
}

/// Close deletes the session's ephemerals and is idempotent; later calls fail `Closed`.
fn close_ends_the_session_and_later_calls_fail_closed(kind: ClientKind) {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(kind, &server.connect_string());
    let root = unique_root("close");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let e = client
        .create(&format!("{root}/e"), b"", CreateMode::Ephemeral)
        .unwrap();
    client.close();
    client.close();
    assert_eq!(client.session().state(), ConnectionState::Closed);
    assert_eq!(client.exists("/").unwrap_err(), ZkError::Closed);
    let other = connect(kind, &server.connect_string());
    assert_eq!(other.exists(&e).unwrap(), None);
}

fn watches_fire_and_a_panicking_watcher_does_not_kill_the_client(kind: ClientKind) {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(kind, &server.connect_string());
    let root = unique_root("watch");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    client
        .get_data(&root, Some(Box::new(|_| panic!("a watcher that panics"))))
        .unwrap();
    client.set_data(&root, b"1", None).unwrap();
    let (tx, rx) = mpsc::channel();
    client
        .get_children(&root, Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    client
        .create(&format!("{root}/a"), b"", CreateMode::Persistent)
        .unwrap();
    let event = rx
        .recv_timeout(SESSION)
        .expect("child watch after a panicking watcher");
    assert_eq!(event.path, root);
    assert_eq!(event.event_type, EventType::NodeChildrenChanged);
    client.exists("/").unwrap();
    // A watcher on a missing node is disarmed, not left to fire later.
    let (tx, rx) = mpsc::channel();
    let missing = format!("{root}/missing");
    assert_eq!(
        client
            .get_data(&missing, Some(Box::new(move |e| tx.send(e).unwrap())))
            .unwrap_err(),
        ZkError::NoNode
    );
    client
        .create(&missing, b"", CreateMode::Persistent)
        .unwrap();
    client.delete(&missing, None).unwrap();
    client.exists("/").unwrap();
    assert!(rx.try_recv().is_err());
}

/// One change fires a panicking data watch and then a child watch: the second still runs.
fn a_panicking_watcher_does_not_kill_the_client(kind: ClientKind) {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(kind, &server.connect_string());
    let root = unique_root("panicking");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    client
        .get_data(&root, Some(Box::new(|_| panic!("a watcher that panics"))))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    client
        .get_children(&root, Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    // One change fires both: the panicking data watch first, then the child watch.
    client.delete(&root, None).unwrap();
    let event = rx
        .recv_timeout(SESSION)
        .expect("the next watcher still runs");
    assert_eq!(event.event_type, EventType::NodeDeleted);
    client.exists("/").unwrap();
    assert_eq!(client.session().state(), ConnectionState::Connected);
}

on_both_backends!([
    basic_operations_and_ephemeral_owner,
    close_ends_the_session_and_later_calls_fail_closed,
    watches_fire_and_a_panicking_watcher_does_not_kill_the_client,
    a_panicking_watcher_does_not_kill_the_client,
]);
