//! Event delivery: delays, commit order, request hooks (seeing, pausing, expiring at an exact
//! point), and callbacks that call the client, close it, or panic.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zk_locks::client::memory::{Fault, MemoryEnsemble, Op};
use zk_locks::client::EventType;
use zk_locks::{ConnectionState, CreateMode, ZkClient, ZkError};

use super::{ev, setup, Events, TIMEOUT};

#[test]
fn event_delay_delays_delivery() {
    let (ensemble, client) = setup();
    client.set_event_delay(Duration::from_millis(300));
    let events = Events::new();
    client.get_data("/d", Some(events.watcher())).unwrap();
    let start = Instant::now();
    ensemble.connect().set_data("/d", b"1", None).unwrap();
    assert_eq!(events.next(), ev(EventType::NodeDataChanged, "/d"));
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn events_arrive_in_commit_order() {
    let (ensemble, client) = setup();
    let writer = ensemble.connect();
    for name in ["a", "b", "c"] {
        writer
            .create(&format!("/d/{name}"), b"", CreateMode::Persistent)
            .unwrap();
    }
    let events = Events::new();
    for name in ["a", "b", "c"] {
        client
            .get_data(&format!("/d/{name}"), Some(events.watcher()))
            .unwrap();
    }
    client.get_children("/d", Some(events.watcher())).unwrap();
    writer.set_data("/d/c", b"", None).unwrap();
    writer.delete("/d/a", None).unwrap();
    writer.set_data("/d/b", b"", None).unwrap();
    let got: Vec<_> = (0..4).map(|_| events.next()).collect();
    assert_eq!(
        got,
        vec![
            ev(EventType::NodeDataChanged, "/d/c"),
            ev(EventType::NodeDeleted, "/d/a"),
            ev(EventType::NodeChildrenChanged, "/d"),
            ev(EventType::NodeDataChanged, "/d/b"),
        ]
    );
}

#[test]
fn on_request_hook_sees_every_request_before_it_applies() {
    let (ensemble, client) = setup();
    let seen: Arc<Mutex<Vec<(Op, String, bool)>>> = Arc::default();
    let sink = seen.clone();
    let inspector = ensemble.clone();
    client.on_request(Some(Box::new(move |op, path| {
        let exists = inspector.node(path).is_some();
        sink.lock().unwrap().push((op, path.to_string(), exists));
    })));
    client.create("/d/a", b"", CreateMode::Persistent).unwrap();
    client.set_data("/d/a", b"", None).unwrap();
    client.get_data("/d/a", None).unwrap();
    client.get_children("/d", None).unwrap();
    client.exists("/d/a").unwrap();
    client.delete("/d/a", None).unwrap();
    client.on_request(None);
    client.exists("/d").unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (Op::Create, "/d/a".to_string(), false),
            (Op::SetData, "/d/a".to_string(), true),
            (Op::GetData, "/d/a".to_string(), true),
            (Op::GetChildren, "/d".to_string(), true),
            (Op::Exists, "/d/a".to_string(), true),
            (Op::Delete, "/d/a".to_string(), true),
        ]
    );
}

#[test]
fn on_request_hook_can_pause_a_thread() {
    let (ensemble, client) = setup();
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let entered_tx = Mutex::new(entered_tx);
    client.on_request(Some(Box::new(move |op, _| {
        if op == Op::Create {
            entered_tx.lock().unwrap().send(()).unwrap();
            go_rx.lock().unwrap().recv().unwrap();
        }
    })));
    let paused = {
        let client = client.clone();
        thread::spawn(move || client.create("/d/x", b"", CreateMode::Persistent))
    };
    entered_rx.recv_timeout(TIMEOUT).unwrap();
    // While the request is paused, another client takes the name.
    ensemble
        .connect()
        .create("/d/x", b"other", CreateMode::Persistent)
        .unwrap();
    go_tx.send(()).unwrap();
    assert_eq!(paused.join().unwrap(), Err(ZkError::NodeExists));
}

#[test]
fn on_request_hook_can_expire_the_session_at_an_exact_point() {
    let (ensemble, client) = setup();
    let handle = Arc::downgrade(&client);
    let fired = Arc::new(AtomicUsize::new(0));
    let count = fired.clone();
    client.on_request(Some(Box::new(move |op, _| {
        if op == Op::Create && count.fetch_add(1, Ordering::SeqCst) == 0 {
            if let Some(client) = handle.upgrade() {
                client.expire();
                // Requests made by the hook do not re-enter it.
                assert!(client.exists("/d").unwrap().is_some());
            }
        }
    })));
    let old = client.session_id();
    assert_eq!(
        client.create("/d/e", b"", CreateMode::Ephemeral),
        Err(ZkError::SessionExpired)
    );
    assert!(ensemble.node("/d/e").is_none(), "not applied");
    assert_ne!(client.session_id(), old);
    client.create("/d/e", b"", CreateMode::Ephemeral).unwrap();
    assert_eq!(fired.load(Ordering::SeqCst), 2);
    client.on_request(None); // breaks the Arc cycle through the hook
}

#[test]
fn watcher_may_call_the_client() {
    let (ensemble, client) = setup();
    let (tx, rx) = mpsc::channel();
    let inner = client.clone();
    client
        .get_data(
            "/d",
            Some(Box::new(move |e| {
                // Calls back into the client from the event thread, and re-arms a watch.
                let tx2 = tx.clone();
                let again = inner.get_data(
                    &e.path,
                    Some(Box::new(move |e2| {
                        let _ = tx2.send(("second", e2, Vec::new()));
                    })),
                );
                let _ = tx.send(("first", e, again.map(|(d, _)| d).unwrap_or_default()));
            })),
        )
        .unwrap();
    let writer = ensemble.connect();
    writer.set_data("/d", b"1", None).unwrap();
    let (which, event, data) = rx.recv_timeout(TIMEOUT).unwrap();
    assert_eq!(
        (which, event.event_type, data),
        ("first", EventType::NodeDataChanged, b"1".to_vec())
    );
    writer.set_data("/d", b"2", None).unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap().0, "second");
}

#[test]
fn watcher_may_close_or_drop_the_last_handle() {
    let ensemble = MemoryEnsemble::new();
    let client = ensemble.connect();
    client.create("/d", b"", CreateMode::Persistent).unwrap();
    client.create("/d/e", b"", CreateMode::Ephemeral).unwrap();
    let (tx, rx) = mpsc::channel();
    let owned = client.clone();
    client
        .get_data(
            "/d",
            Some(Box::new(move |_| {
                owned.close(); // on the event thread, holding the last handle
                drop(owned);
                let _ = tx.send(());
            })),
        )
        .unwrap();
    drop(client);
    ensemble.connect().set_data("/d", b"1", None).unwrap();
    rx.recv_timeout(TIMEOUT).unwrap();
    assert_eq!(ensemble.children("/d"), Some(vec![]));
}

#[test]
fn panicking_watcher_does_not_kill_the_event_thread() {
    let (ensemble, client) = setup();
    client
        .get_data(
            "/d",
            Some(Box::new(|_| panic!("watcher panics on purpose"))),
        )
        .unwrap();
    let events = Events::new();
    client.get_children("/d", Some(events.watcher())).unwrap();
    let writer = ensemble.connect();
    writer.set_data("/d", b"1", None).unwrap();
    writer.create("/d/k", b"", CreateMode::Persistent).unwrap();
    assert_eq!(events.next(), ev(EventType::NodeChildrenChanged, "/d"));
    assert_eq!(client.counters().watch_events, 2);
}

#[test]
fn session_listener_may_call_the_client() {
    let (_ensemble, client) = setup();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let weak = Arc::downgrade(&client);
    client.session().subscribe(move |s| {
        if let Some(c) = weak.upgrade() {
            let _ = tx.lock().unwrap().send((s.state, c.exists("/d")));
        }
    });
    client.inject(Fault::before(Op::Delete));
    assert_eq!(client.delete("/d", None), Err(ZkError::ConnectionLoss));
    let got: Vec<_> = rx.try_iter().collect();
    assert_eq!(
        got,
        vec![
            (ConnectionState::Suspended, Err(ZkError::ConnectionLoss)),
            (
                ConnectionState::Reconnected,
                Ok(client.exists("/d").unwrap())
            ),
        ]
    );
}
