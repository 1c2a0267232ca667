//! Requests and callbacks on a healthy session: create (sequential, ephemeral, container),
//! exists, data and versions, error codes, watches (one-shot, disarmed on a failed read, none
//! left by a read that timed out), callbacks that panic, close.

use std::sync::mpsc;
use std::time::Duration;

use zk_locks::client::EventType;
use zk_locks::session::ConnectionState;
use zk_locks::testing::shared_server;
use zk_locks::{CreateMode, ZkError};

use crate::backend::{
    behind_a_proxy, connect, try_connect, unique_root, until_ok, ClientKind, Connect, SESSION,
};

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

/// A watched read that timed out (its request held by a frozen link past the call timeout)
/// leaves no watch when its reply arrives after the thaw (issue 24, item 6): a later change
/// fires only the watch of a read that succeeded.
fn a_watched_read_that_timed_out_leaves_no_watch(kind: ClientKind) {
    let Some((proxy, client)) = behind_a_proxy(|hosts| {
        let options = Connect::new(hosts)
            .session_timeout(Duration::from_secs(10))
            .call_timeout(Duration::from_millis(500));
        try_connect(kind, options).expect("connect")
    }) else {
        return;
    };
    let root = unique_root("late-watch");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let (late_tx, late_rx) = mpsc::channel();
    proxy.freeze();
    let late = client.get_data(
        &root,
        Some(Box::new(move |e| {
            let _ = late_tx.send(e);
        })),
    );
    proxy.thaw();
    assert_eq!(late.unwrap_err(), ZkError::OperationTimeout);
    // Replies come in order: once this is answered, the late reply has been handled.
    until_ok(Duration::from_secs(20), || client.exists(&root));
    let (tx, rx) = mpsc::channel();
    client
        .get_data(&root, Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    client.set_data(&root, b"1", None).unwrap();
    rx.recv_timeout(SESSION * 5)
        .expect("the watch of the read that succeeded");
    assert!(
        late_rx.try_recv().is_err(),
        "the read that timed out set a watch"
    );
    if let Some(native) = client.native() {
        assert_eq!(native.watch_count(), 0);
    }
}

on_both_backends!([
    basic_operations_and_ephemeral_owner,
    close_ends_the_session_and_later_calls_fail_closed,
    watches_fire_and_a_panicking_watcher_does_not_kill_the_client,
    a_panicking_watcher_does_not_kill_the_client,
    a_watched_read_that_timed_out_leaves_no_watch,
]);
