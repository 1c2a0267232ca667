//! Our own client (`client::native`) on a real ZooKeeper 3.8: session states under faults
//! (FaultProxy), watches restored after a reconnect, create2, containers, pipelining, multi,
//! sync, auth, chroot, connect errors.
//!
//! No sleeps as synchronisation: tests wait on `Session::wait_for_change` or channels, always
//! with a deadline.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::{MultiOp, MultiResult, NativeClient, NativeOptions};
use zk_locks::client::{EventType, Request, Response};
use zk_locks::session::{ConnectionState, SessionSnapshot};
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{
    CreateMode, Error, InterProcessLock, InterProcessMutex, LockState, ZkClient, ZkError,
};

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
fn the_session_id_and_negotiated_timeout_are_the_servers() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    assert_eq!(client.session().session_id(), proxy.session_id());
    assert_eq!(client.session().state(), ConnectionState::Connected);
    assert_eq!(client.negotiated_timeout(), SESSION);
    // The test server allows at most 60 s.
    let long = NativeClient::connect(&server.connect_string(), Duration::from_secs(90)).unwrap();
    assert_eq!(long.negotiated_timeout(), Duration::from_secs(60));
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

#[test]
fn create2_containers_pipeline_multi_and_sync() {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(&server.connect_string());
    let root = unique("ops");
    let (path, stat) = client.create2(&root, b"r", CreateMode::Container).unwrap();
    assert_eq!(path, root);
    assert!(stat.czxid > 0);
    let results = client.pipeline(&[
        Request::Create {
            path: format!("{root}/lock-"),
            data: vec![],
            mode: CreateMode::EphemeralSequential,
        },
        Request::GetChildren { path: root.clone() },
        Request::Exists {
            path: format!("{root}/none"),
        },
        Request::Delete {
            path: format!("{root}/none"),
            version: None,
        },
    ]);
    let Ok(Response::Create(created, stat)) = &results[0] else {
        panic!("{results:?}");
    };
    assert_eq!(stat.ephemeral_owner, client.session().session_id().unwrap());
    // ZooKeeper serves a session's requests in order: the listing sees the node.
    assert_eq!(
        results[1],
        Ok(Response::GetChildren(vec![
            created[root.len() + 1..].to_string()
        ]))
    );
    assert_eq!(results[2], Ok(Response::Exists(None)));
    assert_eq!(results[3], Err(ZkError::NoNode));
    let ok = client
        .multi(vec![
            MultiOp::Check {
                path: root.clone(),
                version: 0,
            },
            MultiOp::Create {
                path: format!("{root}/m"),
                data: b"x".to_vec(),
                mode: CreateMode::Persistent,
            },
        ])
        .unwrap();
    assert!(
        matches!(&ok[..], [MultiResult::Check, MultiResult::Create(p, _)] if *p == format!("{root}/m"))
    );
    let failed = client.multi(vec![
        MultiOp::Create {
            path: format!("{root}/n"),
            data: vec![],
            mode: CreateMode::Persistent,
        },
        MultiOp::Check {
            path: root.clone(),
            version: 42,
        },
    ]);
    match failed {
        Ok(results) => assert!(
            results.contains(&MultiResult::Error(ZkError::BadVersion)),
            "{results:?}"
        ),
        Err(e) => assert_eq!(e, ZkError::BadVersion),
    }
    assert_eq!(client.exists(&format!("{root}/n")).unwrap(), None);
    client.sync(&root).unwrap();
}

#[test]
fn chroot_is_applied_to_paths_and_events() {
    let Some(server) = shared_server() else {
        return;
    };
    let chroot = unique("chroot") + "/nested";
    let client = connect(&format!("{}{chroot}", server.connect_string()));
    assert_eq!(client.chroot(), Some(chroot.as_str()));
    assert_eq!(
        client.create("/a", b"", CreateMode::Persistent).unwrap(),
        "/a"
    );
    let plain = connect(&server.connect_string());
    assert!(plain.exists(&format!("{chroot}/a")).unwrap().is_some());
    let (tx, rx) = mpsc::channel();
    client
        .get_children("/", Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    plain
        .create(&format!("{chroot}/b"), b"", CreateMode::Persistent)
        .unwrap();
    assert_eq!(rx.recv_timeout(SESSION).unwrap().path, "/");
    let mut children = client.get_children("/", None).unwrap();
    children.sort();
    assert_eq!(children, vec!["a", "b"]);
}

#[test]
fn auth_digest_is_accepted_and_a_failed_auth_is_terminal() {
    let Some(server) = shared_server() else {
        return;
    };
    let digest = NativeOptions::new(server.connect_string())
        .session_timeout(SESSION)
        .digest_auth("app", "secret");
    let client = NativeClient::connect_with(digest).unwrap();
    client.exists("/").unwrap();
    let bad = NativeOptions::new(server.connect_string())
        .session_timeout(SESSION)
        .auth("no-such-scheme", b"x");
    let err = NativeClient::connect_with(bad).unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("authentication")),
        "{err}"
    );
}

#[test]
fn connect_errors_are_typed_and_timely() {
    for bad in ["", ",", "no-such-host.invalid:2181"] {
        let err = NativeClient::connect(bad, SESSION).unwrap_err();
        assert!(matches!(err, Error::Connect { .. }), "{bad:?}: {err}");
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let options = NativeOptions::new(format!("127.0.0.1:{port}"))
        .session_timeout(SESSION)
        .connect_timeout(Duration::from_secs(1));
    let err = NativeClient::connect_with(options).unwrap_err();
    assert!(
        matches!(&err, Error::Connect { hosts, .. } if hosts.contains(&port.to_string())),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn close_ends_the_session_and_later_calls_fail_closed() {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(&server.connect_string());
    let root = unique("close");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let e = client
        .create(&format!("{root}/e"), b"", CreateMode::Ephemeral)
        .unwrap();
    client.close();
    client.close();
    assert_eq!(client.session().state(), ConnectionState::Closed);
    assert_eq!(client.exists("/").unwrap_err(), ZkError::Closed);
    let other = connect(&server.connect_string());
    assert_eq!(other.exists(&e).unwrap(), None);
}

#[test]
fn a_container_is_reaped_once_its_last_child_is_gone() {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(&server.connect_string());
    let root = unique("container");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let container = format!("{root}/dir");
    client
        .create(&container, b"", CreateMode::Container)
        .unwrap();
    let child = client
        .create(&format!("{container}/c"), b"", CreateMode::Persistent)
        .unwrap();
    let (tx, rx) = mpsc::channel();
    client
        .get_data(&container, Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    client.delete(&child, None).unwrap();
    // The server's container manager deletes it (checked every 500 ms by the test server).
    let event = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("container reaped");
    assert_eq!(event.event_type, EventType::NodeDeleted);
    assert_eq!(client.exists(&container).unwrap(), None);
}

#[test]
fn huge_timeouts_are_accepted_without_overflow() {
    let Some(server) = shared_server() else {
        return;
    };
    let options = NativeOptions::new(server.connect_string())
        .session_timeout(SESSION)
        .connect_timeout(Duration::MAX)
        .call_timeout(Duration::MAX);
    let client = NativeClient::connect_with(options).unwrap();
    client.exists("/").unwrap();
    assert!(client.pipeline(&[Request::Exists { path: "/".into() }])[0].is_ok());
    let too_long = NativeOptions::new(server.connect_string()).session_timeout(Duration::MAX);
    assert!(matches!(
        NativeClient::connect_with(too_long),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn a_panicking_watcher_does_not_kill_the_client() {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(&server.connect_string());
    let root = unique("panicking");
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

/// Credentials are sent again on every connection: a node only `app:secret` may read stays
/// readable after a cut.
#[test]
fn digest_credentials_are_resent_after_a_reconnect() {
    let Some(server) = shared_server() else {
        return;
    };
    // The node is created by another client, authenticated as app:secret, with the "auth"
    // ACL: only that digest identity may read it.
    let path = unique("auth");
    let creator = zookeeper::ZooKeeper::connect(
        &server.connect_string(),
        SESSION,
        |_: zookeeper::WatchedEvent| {},
    )
    .unwrap();
    let deadline = Instant::now() + SESSION * 5;
    while creator.add_auth("digest", b"app:secret".to_vec()).is_err() {
        assert!(
            Instant::now() < deadline,
            "the crate client never connected"
        );
    }
    creator
        .create(
            &path,
            b"secret".to_vec(),
            zookeeper::Acl::creator_all().clone(),
            zookeeper::CreateMode::Persistent,
        )
        .unwrap();
    let anonymous = connect(&server.connect_string());
    assert_eq!(
        anonymous.get_data(&path, None).unwrap_err(),
        ZkError::NoAuth
    );

    let proxy = FaultProxy::start(server.addr()).unwrap();
    let options = NativeOptions::new(proxy.connect_string())
        .session_timeout(SESSION)
        .digest_auth("app", "secret");
    let client = NativeClient::connect_with(options).unwrap();
    assert_eq!(client.get_data(&path, None).unwrap().0, b"secret");
    proxy.cut();
    reach(&client, ConnectionState::Reconnected, SESSION * 2);
    assert_eq!(client.get_data(&path, None).unwrap().0, b"secret");
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
