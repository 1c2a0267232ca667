//! Our own client (`client::native`) on a real ZooKeeper 3.8, its operations and options:
//! the session id and negotiated timeout, create2, real containers, pipelining, multi, sync,
//! digest auth (re-sent after a reconnect) and a failed auth, chroot, connect errors, close,
//! callbacks that panic, timeouts too long for an `Instant`. The session rules under faults
//! are in `native_session.rs`.
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
use zk_locks::{CreateMode, Error, ZkClient, ZkError};

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

/// A delete nobody waits for is still ordered before the session's later requests, and its
/// outcome reaches the callback: the reply, or an unknown outcome when the link breaks first.
#[test]
fn an_unawaited_delete_is_ordered_and_reports_its_outcome() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let node = unique("unawaited");
    client.create(&node, b"", CreateMode::Persistent).unwrap();
    let (tx, rx) = mpsc::channel();
    let done = |tx: &mpsc::Sender<_>| {
        let tx = tx.clone();
        Box::new(move |r| tx.send(r).unwrap()) as zk_locks::client::DeleteDone
    };
    client.delete_unawaited(&node, done(&tx));
    // Sent after the delete on the same connection: the server applied the delete first.
    assert_eq!(client.exists(&node), Ok(None));
    assert_eq!(rx.recv_timeout(SESSION), Ok(Ok(())));
    client.delete_unawaited(&node, done(&tx));
    assert_eq!(rx.recv_timeout(SESSION), Ok(Err(ZkError::NoNode)));

    client.create(&node, b"", CreateMode::Persistent).unwrap();
    proxy.freeze();
    client.delete_unawaited(&node, done(&tx));
    proxy.cut();
    let outcome = rx.recv_timeout(SESSION).unwrap();
    assert!(
        outcome.is_err_and(ZkError::is_retryable),
        "a delete cut off has an unknown outcome: {outcome:?}"
    );
    proxy.thaw();
    let s = client
        .session()
        .wait_until_connected(Some(Instant::now() + SESSION * 2));
    assert!(s.state.is_connected(), "{s:?}");
    assert!(matches!(
        client.delete(&node, None),
        Ok(()) | Err(ZkError::NoNode)
    ));
}
