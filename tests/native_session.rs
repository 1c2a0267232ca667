//! Our own client (`client::native`) on a real ZooKeeper 3.8: the session rules under faults
//! (FaultProxy): an aged client keeps its session and locks through a cut, short and long
//! freezes, a targeted expiry, a call in flight during a freeze, and watches restored with
//! SetWatches after a reconnect (in batches). Operations and options are in
//! `native_client.rs`.
//!
//! No sleeps as synchronisation: tests wait on `Session::wait_for_change` or channels, always
//! with a deadline.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
use zk_locks::client::{EventType, Request};
use zk_locks::session::{ConnectionState, SessionSnapshot};
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{CreateMode, InterProcessLock, InterProcessMutex, LockState, ZkClient};

const SESSION: Duration = Duration::from_secs(2);

fn connect(connect_string: &str) -> Arc<NativeClient> {
    NativeClient::connect(connect_string, SESSION).expect("connect")
}

fn unique(prefix: &str) -> String {
    format!("/{prefix}-{}", uuid::Uuid::new_v4())
}

/// Waits until the session reaches `state`; asserts it did; returns every snapshot seen on
/// the way (the last one in `state`).
fn reach(client: &NativeClient, state: ConnectionState, within: Duration) -> Vec<SessionSnapshot> {
    let deadline = Instant::now() + within;
    let mut seen = vec![client.session().snapshot()];
    while seen.last().unwrap().state != state && Instant::now() < deadline {
        let epoch = seen.last().unwrap().epoch;
        let next = client.session().wait_for_change(epoch, Some(deadline));
        if next.epoch != epoch {
            seen.push(next);
        }
    }
    assert_eq!(seen.last().unwrap().state, state, "{:?}", states(&seen));
    seen
}

fn states(seen: &[SessionSnapshot]) -> Vec<ConnectionState> {
    seen.iter().map(|s| s.state).collect()
}

/// Lets time pass with no transition (time is the subject: the client ages).
fn age(client: &NativeClient, by: Duration) {
    let before = client.session().snapshot();
    let after = client
        .session()
        .wait_for_change(before.epoch, Some(Instant::now() + by));
    assert_eq!(
        after.epoch, before.epoch,
        "no transition while idle: {after:?}"
    );
}

#[test]
fn aged_client_cut_keeps_the_session_and_every_lock() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let root = unique("aged");
    let mutexes: Vec<_> = (0..3)
        .map(|i| InterProcessMutex::new(client.clone(), &format!("{root}/lock-{i}")).unwrap())
        .collect();
    let guards: Vec<_> = mutexes.iter().map(|m| m.lock().unwrap()).collect();
    let before = client.session().snapshot();
    // Older than several session timeouts: pings must keep the session, and the cut must not
    // be mistaken for an expiry.
    age(&client, SESSION * 3);
    proxy.cut();
    let seen = reach(&client, ConnectionState::Reconnected, SESSION * 3);
    assert!(
        states(&seen).contains(&ConnectionState::Suspended),
        "{:?}",
        states(&seen)
    );
    let last = *seen.last().unwrap();
    assert_eq!(last.session_id, before.session_id);
    assert_eq!(last.losses, 0);
    for guard in &guards {
        assert_eq!(guard.state(), LockState::Held);
    }
    // The lock nodes are still ours on the server.
    for i in 0..3 {
        let children = client
            .get_children(&format!("{root}/lock-{i}"), None)
            .unwrap();
        assert_eq!(children.len(), 1);
    }
    drop(guards);
}

#[test]
fn freeze_shorter_than_the_session_is_suspended_then_reconnected() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let before = client.session().snapshot();
    proxy.freeze();
    reach(&client, ConnectionState::Suspended, SESSION * 2);
    proxy.thaw();
    let seen = reach(&client, ConnectionState::Reconnected, SESSION * 2);
    let last = *seen.last().unwrap();
    assert_eq!(last.session_id, before.session_id);
    assert_eq!(last.losses, 0);
    client.exists("/").unwrap();
}

#[test]
fn freeze_longer_than_the_session_is_lost_in_time_then_a_new_session() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let before = client.session().snapshot();
    proxy.freeze();
    let frozen_at = Instant::now();
    let seen = reach(&client, ConnectionState::Lost, SESSION * 2);
    let lost_after = frozen_at.elapsed();
    assert!(
        lost_after <= SESSION + Duration::from_secs(1),
        "Lost after {lost_after:?}"
    );
    assert!(
        states(&seen).contains(&ConnectionState::Suspended),
        "{:?}",
        states(&seen)
    );
    proxy.thaw();
    let seen = reach(&client, ConnectionState::Connected, SESSION * 4);
    let last = *seen.last().unwrap();
    assert_ne!(last.session_id, before.session_id);
    assert_eq!(last.losses, 1);
    client.exists("/").unwrap();
}

#[test]
fn a_call_in_flight_during_a_freeze_returns_by_the_deadline() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    proxy.freeze();
    let started = Instant::now();
    let err = client.get_children("/", None).unwrap_err();
    let took = started.elapsed();
    assert!(err.is_retryable(), "{err}");
    assert!(
        took <= SESSION + Duration::from_millis(500),
        "returned after {took:?}"
    );
    proxy.thaw();
}

#[test]
fn targeted_expiry_is_lost_then_a_new_session() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let root = unique("expiry");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let ephemeral = client
        .create(&format!("{root}/e"), b"", CreateMode::Ephemeral)
        .unwrap();
    // A watch of the expired session must be dropped, never fired as if the node changed.
    let (watch_tx, watch_rx) = mpsc::channel();
    client
        .get_data(&root, Some(Box::new(move |e| watch_tx.send(e).unwrap())))
        .unwrap();
    let before = client.session().snapshot();
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    client.session().subscribe(move |s| {
        let _ = tx.lock().unwrap().send(s.state);
    });
    assert_eq!(proxy.expire_session().unwrap(), before.session_id.unwrap());
    let deadline = Instant::now() + SESSION * 3;
    let mut seen = Vec::new();
    while seen.last() != Some(&ConnectionState::Connected) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(state) => seen.push(state),
            Err(_) => panic!("no new session in time: {seen:?}"),
        }
    }
    let lost = seen.iter().position(|s| *s == ConnectionState::Lost);
    assert!(
        lost.is_some_and(|i| i + 1 < seen.len()),
        "Lost then Connected: {seen:?}"
    );
    let last = client.session().snapshot();
    assert_eq!(last.losses, before.losses + 1);
    assert_ne!(last.session_id, before.session_id);
    assert_eq!(client.exists(&ephemeral).unwrap(), None);
    assert_eq!(client.watch_count(), 0);
    // A change after the new session does not reach the dropped watch.
    client.set_data(&root, b"changed", None).unwrap();
    client.sync(&root).unwrap();
    assert!(watch_rx.try_recv().is_err());
}

#[test]
fn a_deletion_while_disconnected_fires_the_restored_watch() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let waiter = connect(&proxy.connect_string());
    let other = connect(&server.connect_string());
    let root = unique("setwatches");
    other.create(&root, b"", CreateMode::Persistent).unwrap();
    let node = other
        .create(&format!("{root}/predecessor"), b"", CreateMode::Persistent)
        .unwrap();
    let (tx, rx) = mpsc::channel();
    waiter
        .get_data(&node, Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    proxy.refuse(true);
    proxy.cut();
    reach(&waiter, ConnectionState::Suspended, SESSION * 2);
    other.delete(&node, None).unwrap();
    proxy.refuse(false);
    reach(&waiter, ConnectionState::Reconnected, SESSION * 2);
    // No call on the waiter: the watch was re-registered with SetWatches, and the server
    // fired it for the deletion it missed.
    let event = rx
        .recv_timeout(SESSION * 2)
        .expect("the restored watch fired");
    assert_eq!(event.event_type, EventType::NodeDeleted);
    assert_eq!(event.path, node);
    assert_eq!(waiter.watch_count(), 0);
}

/// The same through the lock engine: a waiter whose holder released while the waiter's link
/// was down is woken by its restored watch and takes the lock without listing again (its
/// requests are counted), in the same session.
#[test]
fn a_waiter_with_a_restored_watch_takes_the_lock_without_listing_again() {
    use zk_locks::client::CountingClient;
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let native = connect(&proxy.connect_string());
    let counting = Arc::new(CountingClient::new(native.clone()));
    let holder_client = connect(&server.connect_string());
    let path = unique("restored-hand-off");
    let holder = InterProcessMutex::new(holder_client.clone(), &path).unwrap();
    holder.acquire().unwrap();
    let session = native.session().snapshot();
    let (tx, rx) = mpsc::channel();
    let waiter_lock = InterProcessMutex::new(counting.clone(), &path).unwrap();
    let waiter = std::thread::spawn(move || {
        let acquired = waiter_lock.acquire_timeout(SESSION * 10);
        let held = matches!(acquired, Ok(true)) && waiter_lock.is_owned_by_current_thread();
        tx.send(acquired).unwrap();
        if held {
            waiter_lock.release().unwrap();
        }
    });
    // Queued and watching the holder's node.
    let deadline = Instant::now() + SESSION * 2;
    while native.watch_count() == 0 {
        assert!(Instant::now() < deadline, "the waiter never watched");
        native.session().wait_for_change(
            native.session().epoch(),
            Some(Instant::now() + SESSION / 20),
        );
    }
    proxy.refuse(true);
    proxy.cut();
    reach(&native, ConnectionState::Suspended, SESSION * 2);
    holder.release().unwrap();
    proxy.refuse(false);
    let acquired = rx.recv_timeout(SESSION * 4).expect("the waiter was woken");
    assert!(acquired.unwrap(), "the waiter holds the lock");
    let c = counting.counters();
    assert_eq!(
        (c.create, c.get_children, c.get_data),
        (1, 1, 1),
        "queued once (create and listing pipelined), watched once, no second listing: {c:?}"
    );
    let after = native.session().snapshot();
    assert_eq!(after.session_id, session.session_id);
    assert_eq!(after.losses, session.losses);
    waiter.join().unwrap();
}

#[test]
fn a_watch_restored_after_a_cut_fires_on_a_later_change() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let root = unique("restored");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let (tx, rx) = mpsc::channel();
    client
        .get_children(&root, Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    proxy.cut();
    reach(&client, ConnectionState::Reconnected, SESSION * 2);
    assert!(rx.try_recv().is_err(), "nothing changed: no event");
    client
        .create(&format!("{root}/child"), b"", CreateMode::Persistent)
        .unwrap();
    let event = rx
        .recv_timeout(SESSION * 2)
        .expect("the restored child watch fired");
    assert_eq!(event.event_type, EventType::NodeChildrenChanged);
}

/// More watched path text than one packet may carry (1 MiB): the restore goes out in several
/// SetWatches batches and every watch is back (each fires on its node's deletion after the
/// reconnect).
#[test]
fn many_watches_are_restored_in_batches() {
    let Some(server) = shared_server() else {
        return;
    };
    const NODES: usize = 7000;
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let root = unique("batches");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    // ~160 bytes per path: about 1.1 MB of path text.
    let long = "n".repeat(100);
    let paths: Vec<String> = (0..NODES)
        .map(|i| format!("{root}/{long}-{i:05}"))
        .collect();
    let creates: Vec<Request> = paths
        .iter()
        .map(|p| Request::Create {
            path: p.clone(),
            data: vec![],
            mode: CreateMode::Persistent,
        })
        .collect();
    assert!(client.pipeline(&creates).iter().all(Result::is_ok));
    let (tx, rx) = mpsc::channel();
    for p in &paths {
        let tx = tx.clone();
        client
            .get_data(p, Some(Box::new(move |e| tx.send(e).unwrap())))
            .unwrap();
    }
    assert_eq!(client.watch_count(), NODES);
    proxy.cut();
    reach(&client, ConnectionState::Reconnected, SESSION * 2);
    let other = connect(&server.connect_string());
    let deletes: Vec<Request> = paths
        .iter()
        .map(|p| Request::Delete {
            path: p.clone(),
            version: None,
        })
        .collect();
    assert!(other.pipeline(&deletes).iter().all(Result::is_ok));
    for _ in 0..NODES {
        let event = rx
            .recv_timeout(SESSION * 5)
            .expect("every restored watch fires");
        assert_eq!(event.event_type, EventType::NodeDeleted);
    }
    assert_eq!(client.watch_count(), 0);
}
