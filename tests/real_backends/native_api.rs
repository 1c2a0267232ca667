//! Our own client only, its own API and options: the session id and negotiated timeout,
//! create2, real containers (reaped by the server), pipelining, multi, sync, digest auth and a
//! failed auth, timeouts too long for an `Instant`.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use zk_locks::client::native::{MultiOp, MultiResult, NativeClient, NativeOptions};
use zk_locks::client::{EventType, Request, Response};
use zk_locks::session::ConnectionState;
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{CreateMode, Error, ZkClient, ZkError};

use crate::backend::{behind_a_proxy, native, unique_root, SESSION};

#[test]
fn the_session_id_and_negotiated_timeout_are_the_servers() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = native(&proxy.connect_string());
    assert_eq!(client.session().session_id(), proxy.session_id());
    assert_eq!(client.session().state(), ConnectionState::Connected);
    assert_eq!(client.negotiated_timeout(), SESSION);
    // The shared test server states its longest session: 60 s.
    let long = NativeClient::connect(&server.connect_string(), Duration::from_secs(90)).unwrap();
    assert_eq!(
        long.negotiated_timeout(),
        zk_locks::testing::SHARED_MAX_SESSION_TIMEOUT
    );
}

#[test]
fn create2_containers_pipeline_multi_and_sync() {
    let Some(server) = shared_server() else {
        return;
    };
    let client = native(&server.connect_string());
    let root = unique_root("ops");
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
        .multi(&[
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
    let failed = client.multi(&[
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
    // The server's shape: rolled back before the failing operation, then its code.
    assert_eq!(
        failed,
        Ok(vec![
            MultiResult::RolledBack,
            MultiResult::Error(ZkError::BadVersion)
        ])
    );
    assert_eq!(client.exists(&format!("{root}/n")).unwrap(), None);
    client.sync(&root).unwrap();
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
fn a_container_is_reaped_once_its_last_child_is_gone() {
    let Some(server) = shared_server() else {
        return;
    };
    let client = native(&server.connect_string());
    let root = unique_root("container");
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

/// A delete nobody waits for is still ordered before the session's later requests, and its
/// outcome reaches the callback: the reply, or an unknown outcome when the link breaks first.
#[test]
fn an_unawaited_delete_is_ordered_and_reports_its_outcome() {
    let Some((proxy, client)) = behind_a_proxy(native) else {
        return;
    };
    let node = unique_root("unawaited");
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
