//! `ZkClient::submit`: requests sent without anybody blocking on them (what a future waits
//! on), on a real ZooKeeper through a fault proxy and on the in-memory ensemble.
//!
//! Must hold: the call returns before any reply (with the link frozen, nothing has come back
//! when it returns); the completion gets one result per request, in order, once; a watched
//! read sets its watch only when it succeeds, and the watch fires; with no connection the
//! results are `ConnectionLoss` at once; a request that cannot be encoded fails alone.

use std::sync::mpsc;
use std::time::Duration;

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::client::native::NativeClient;
use zk_locks::client::{EventType, Request, Response, Submission, Submitted, ZkResult};
use zk_locks::testing::harness::unique_root;
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{CreateMode, ZkClient, ZkError};

type Results = Vec<ZkResult<Response>>;

/// A completion that sends its results on a channel.
fn to_channel() -> (Submitted, mpsc::Receiver<Results>) {
    let (tx, rx) = mpsc::channel();
    (
        Box::new(move |results| {
            let _ = tx.send(results);
        }),
        rx,
    )
}

const PATIENCE: Duration = Duration::from_secs(20);

/// Create a child, list the parent with a watch, read a missing node with a watch: the
/// results in order, and the one watch that was set fires when another child comes.
fn submit_in_order_with_a_watch(client: &dyn ZkClient, root: &str, frozen: Option<&FaultProxy>) {
    client.create(root, b"", CreateMode::Persistent).unwrap();
    let (fired_tx, fired) = mpsc::channel();
    let (missing_tx, missing_fired) = mpsc::channel();
    let submissions = vec![
        Submission::new(Request::Create {
            path: format!("{root}/a"),
            data: b"x".to_vec(),
            mode: CreateMode::Persistent,
        }),
        Submission::watched(
            Request::GetChildren {
                path: root.to_string(),
            },
            Box::new(move |e| {
                let _ = fired_tx.send(e.event_type);
            }),
        )
        .wake_only(),
        Submission::watched(
            Request::GetData {
                path: format!("{root}/missing"),
            },
            Box::new(move |e| {
                let _ = missing_tx.send(e.event_type);
            }),
        ),
        Submission::new(Request::Create {
            path: "no-slash".into(),
            data: Vec::new(),
            mode: CreateMode::Persistent,
        }),
    ];
    let (done, results) = to_channel();
    if let Some(proxy) = frozen {
        proxy.freeze();
    }
    client.submit(submissions, done);
    if let Some(proxy) = frozen {
        // Returned with the link frozen: nothing can have come back.
        assert!(
            results.try_recv().is_err(),
            "answered through a frozen link"
        );
        proxy.thaw();
    }
    let results = results.recv_timeout(PATIENCE).expect("no completion");
    assert_eq!(results.len(), 4);
    assert!(
        matches!(&results[0], Ok(Response::Create(p, _)) if *p == format!("{root}/a")),
        "{:?}",
        results[0]
    );
    assert_eq!(results[1], Ok(Response::GetChildren(vec!["a".to_string()])));
    assert_eq!(results[2], Err(ZkError::NoNode));
    assert_eq!(results[3], Err(ZkError::BadArguments));
    // The listing's watch is set and fires; the missing node's is not set.
    client
        .create(&format!("{root}/missing"), b"", CreateMode::Persistent)
        .unwrap();
    client
        .create(&format!("{root}/b"), b"", CreateMode::Persistent)
        .unwrap();
    assert_eq!(
        fired.recv_timeout(PATIENCE).unwrap(),
        EventType::NodeChildrenChanged
    );
    assert!(missing_fired.try_recv().is_err());
}

#[test]
fn native_submit_returns_before_the_replies_and_completes_in_order() {
    let Some(server) = shared_server() else {
        return; // skipped (not under CI)
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = NativeClient::connect(&proxy.connect_string(), Duration::from_secs(10)).unwrap();
    submit_in_order_with_a_watch(client.as_ref(), &unique_root("submit"), Some(&proxy));
    // The watch that was never set left no callback behind.
    assert_eq!(client.watch_count(), 0);
}

#[test]
fn native_submit_without_a_connection_fails_at_once() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = NativeClient::connect(&proxy.connect_string(), Duration::from_secs(10)).unwrap();
    proxy.refuse(true);
    proxy.cut();
    client.session().wait_for_change(
        client.session().epoch(),
        Some(std::time::Instant::now() + PATIENCE),
    );
    assert!(!client.session().state().is_connected());
    let (done, results) = to_channel();
    client.submit(
        vec![
            Submission::new(Request::Exists { path: "/".into() }),
            Submission::new(Request::GetData { path: "/".into() }),
        ],
        done,
    );
    // Called before `submit` returned.
    let results = results.try_recv().expect("not completed at once");
    assert_eq!(
        results,
        vec![Err(ZkError::ConnectionLoss), Err(ZkError::ConnectionLoss)]
    );
    let (done, results) = to_channel();
    client.submit(Vec::new(), done);
    assert_eq!(results.try_recv().unwrap(), Vec::new());
}

#[test]
fn memory_submit_completes_in_order() {
    let ensemble = MemoryEnsemble::new();
    let client = ensemble.connect();
    submit_in_order_with_a_watch(client.as_ref(), "/submit", None);
}
