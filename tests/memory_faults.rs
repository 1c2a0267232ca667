//! Behaviour specific to the in-memory ensemble: every injected fault, session transitions,
//! event delivery guarantees, containers, sequence wrap and counters.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zk_locks::client::counting::CountingClient;
use zk_locks::client::memory::{Fault, FaultTiming, MemoryClient, MemoryEnsemble, Op};
use zk_locks::client::{EventType, Watcher};
use zk_locks::{ConnectionState, CreateMode, SharedClient, WatchedEvent, ZkClient, ZkError};

const TIMEOUT: Duration = Duration::from_secs(10);

type Transitions = Arc<Mutex<Vec<(ConnectionState, Option<i64>)>>>;

/// Records every transition of a client's session.
fn record(client: &MemoryClient) -> Transitions {
    let log: Transitions = Arc::default();
    let sink = log.clone();
    client.session().subscribe(move |s| {
        sink.lock().unwrap().push((s.state, s.session_id));
    });
    log
}

fn states(log: &Transitions) -> Vec<ConnectionState> {
    log.lock().unwrap().iter().map(|(s, _)| *s).collect()
}

struct Events {
    tx: mpsc::Sender<WatchedEvent>,
    rx: mpsc::Receiver<WatchedEvent>,
}

impl Events {
    fn new() -> Events {
        let (tx, rx) = mpsc::channel();
        Events { tx, rx }
    }

    fn watcher(&self) -> Watcher {
        let tx = self.tx.clone();
        Box::new(move |e| {
            let _ = tx.send(e);
        })
    }

    fn next(&self) -> WatchedEvent {
        self.rx.recv_timeout(TIMEOUT).expect("no event in time")
    }

    fn assert_none(&self) {
        if let Ok(e) = self.rx.try_recv() {
            panic!("unexpected event {e:?}");
        }
    }
}

fn ev(event_type: EventType, path: &str) -> WatchedEvent {
    WatchedEvent {
        event_type,
        path: path.to_string(),
    }
}

/// Returns once every event fired so far for `client` was delivered (events are in order).
fn barrier(ensemble: &MemoryEnsemble, client: &MemoryClient) {
    let writer = ensemble.connect();
    match writer.create("/barrier", b"", CreateMode::Persistent) {
        Ok(_) | Err(ZkError::NodeExists) => {}
        Err(e) => panic!("{e}"),
    }
    let events = Events::new();
    client.get_data("/barrier", Some(events.watcher())).unwrap();
    writer.set_data("/barrier", b"", None).unwrap();
    assert_eq!(events.next().path, "/barrier");
}

fn setup() -> (MemoryEnsemble, Arc<MemoryClient>) {
    let ensemble = MemoryEnsemble::new();
    let client = ensemble.connect();
    client.create("/d", b"", CreateMode::Persistent).unwrap();
    (ensemble, client)
}

#[test]
fn fault_before_apply_create_is_not_applied_and_blips() {
    let (ensemble, client) = setup();
    let log = record(&client);
    let before = client.session().snapshot();
    client.inject(Fault::before(Op::Create));
    assert_eq!(
        client.create("/d/lock-", b"", CreateMode::EphemeralSequential),
        Err(ZkError::ConnectionLoss)
    );
    assert_eq!(ensemble.children("/d"), Some(vec![]));
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            (ConnectionState::Suspended, before.session_id),
            (ConnectionState::Reconnected, before.session_id)
        ]
    );
    let after = client.session().snapshot();
    assert_eq!(after.epoch, before.epoch + 2);
    assert_eq!(after.losses, before.losses);
    // One-shot: the retry works, and the sequence number was not consumed.
    assert_eq!(
        client.create("/d/lock-", b"", CreateMode::EphemeralSequential),
        Ok("/d/lock-0000000000".to_string())
    );
}

#[test]
fn fault_after_apply_create_leaves_our_node() {
    let (ensemble, client) = setup();
    let log = record(&client);
    client.inject(Fault::after(Op::Create));
    assert_eq!(
        client.create("/d/lock-", b"me", CreateMode::EphemeralSequential),
        Err(ZkError::ConnectionLoss)
    );
    assert_eq!(
        ensemble.children("/d"),
        Some(vec!["lock-0000000000".to_string()])
    );
    let (data, stat) = ensemble.node("/d/lock-0000000000").unwrap();
    assert_eq!(data, b"me");
    assert_eq!(stat.ephemeral_owner, client.session_id());
    assert_eq!(
        states(&log),
        vec![ConnectionState::Suspended, ConnectionState::Reconnected]
    );
    // Same session: the orphan is still ours and still alive.
    assert_eq!(
        client.get_children("/d", None).unwrap(),
        vec!["lock-0000000000"]
    );
}

#[test]
fn fault_matching_by_op_and_path_fires_once() {
    let (ensemble, client) = setup();
    client.create("/d/x", b"", CreateMode::Persistent).unwrap();
    client.create("/d/y", b"", CreateMode::Persistent).unwrap();
    client.inject(Fault::before(Op::Delete).on_path("/d/y"));
    assert_eq!(client.exists("/d/y").map(|s| s.is_some()), Ok(true));
    client.delete("/d/x", None).unwrap();
    assert_eq!(client.delete("/d/y", None), Err(ZkError::ConnectionLoss));
    assert!(ensemble.node("/d/y").is_some());
    client.delete("/d/y", None).unwrap();

    client.inject(Fault::after_any().on_path("/d/z"));
    client.exists("/d").unwrap();
    assert_eq!(
        client.set_data("/d/z", b"", None),
        Err(ZkError::ConnectionLoss),
        "applied (NoNode) but the reply is lost"
    );
    let fault = Fault::before_any();
    assert_eq!((fault.op, fault.timing), (None, FaultTiming::BeforeApply));
}

#[test]
fn faults_queue_in_order() {
    let (_ensemble, client) = setup();
    client.inject(Fault::before(Op::Exists));
    client.inject(Fault::after(Op::Exists));
    assert_eq!(client.exists("/d"), Err(ZkError::ConnectionLoss));
    assert_eq!(client.exists("/d"), Err(ZkError::ConnectionLoss));
    assert!(client.exists("/d").unwrap().is_some());
}

#[test]
fn fault_blip_drops_watches_by_default() {
    let (ensemble, client) = setup();
    let other = ensemble.connect();
    let events = Events::new();
    client.get_data("/d", Some(events.watcher())).unwrap();
    assert_eq!(ensemble.watch_count(), 1);
    client.inject(Fault::before(Op::Exists));
    assert_eq!(client.exists("/d"), Err(ZkError::ConnectionLoss));
    assert_eq!(ensemble.watch_count(), 0);
    other.set_data("/d", b"1", None).unwrap();
    barrier(&ensemble, &client);
    events.assert_none();
}

#[test]
fn fault_blip_keeps_watches_when_asked() {
    let (ensemble, client) = setup();
    client.set_watches_survive_reconnect(true);
    let other = ensemble.connect();
    let events = Events::new();
    // The watch set by the faulting request itself survives too (applied after the fault).
    client.inject(Fault::after(Op::GetChildren));
    assert_eq!(
        client.get_children("/d", Some(events.watcher())),
        Err(ZkError::ConnectionLoss)
    );
    assert_eq!(ensemble.watch_count(), 1);
    other.create("/d/k", b"", CreateMode::Persistent).unwrap();
    assert_eq!(events.next(), ev(EventType::NodeChildrenChanged, "/d"));
}

#[test]
fn fault_before_apply_drops_the_watcher_uncalled() {
    let (ensemble, client) = setup();
    client.set_watches_survive_reconnect(true);
    let (tx, rx) = mpsc::channel::<WatchedEvent>();
    let watcher: Watcher = Box::new(move |e| {
        let _ = tx.send(e);
    });
    client.inject(Fault::before(Op::GetData));
    assert_eq!(
        client.get_data("/d", Some(watcher)),
        Err(ZkError::ConnectionLoss)
    );
    assert_eq!(ensemble.watch_count(), 0);
    // The watcher was dropped: its sender is gone.
    assert_eq!(
        rx.recv_timeout(TIMEOUT),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
}

#[test]
fn suspend_resume_drops_watches_by_default() {
    let (ensemble, client) = setup();
    let log = record(&client);
    let session = client.session_id();
    client.create("/d/e", b"", CreateMode::Ephemeral).unwrap();
    let events = Events::new();
    client.get_data("/d", Some(events.watcher())).unwrap();
    client.suspend();
    assert_eq!(client.session().state(), ConnectionState::Suspended);
    assert_eq!(ensemble.watch_count(), 0);
    assert_eq!(
        client.create("/d/x", b"", CreateMode::Persistent),
        Err(ZkError::ConnectionLoss)
    );
    assert_eq!(client.exists("/d"), Err(ZkError::ConnectionLoss));
    assert!(
        ensemble.node("/d/x").is_none(),
        "not applied while suspended"
    );
    assert!(
        ensemble.node("/d/e").is_some(),
        "the session lives on the server"
    );
    client.suspend(); // idempotent
    ensemble.connect().set_data("/d", b"1", None).unwrap();
    client.resume();
    client.resume(); // no-op
    assert_eq!(client.session_id(), session);
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            (ConnectionState::Suspended, Some(session)),
            (ConnectionState::Reconnected, Some(session))
        ]
    );
    assert!(client.exists("/d/e").unwrap().is_some());
    barrier(&ensemble, &client);
    events.assert_none();
}

#[test]
fn suspend_resume_keeps_watches_and_delivers_held_events() {
    let (ensemble, client) = setup();
    client.set_watches_survive_reconnect(true);
    let events = Events::new();
    client.get_data("/d", Some(events.watcher())).unwrap();
    client.suspend();
    assert_eq!(ensemble.watch_count(), 1);
    ensemble.connect().set_data("/d", b"1", None).unwrap();
    // Fired on the server but held: the link is down.
    assert_eq!(ensemble.watch_count(), 0);
    assert_eq!(events.rx.recv_timeout(Duration::from_millis(50)).ok(), None);
    client.resume();
    assert_eq!(events.next(), ev(EventType::NodeDataChanged, "/d"));
    assert_eq!(client.session().state(), ConnectionState::Reconnected);
}

#[test]
fn expire_while_connected() {
    let (ensemble, client) = setup();
    let other = ensemble.connect();
    let log = record(&client);
    let old = client.session().snapshot();
    let lock = client
        .create("/d/lock-", b"", CreateMode::EphemeralSequential)
        .unwrap();
    let mine = Events::new();
    client.get_data("/d", Some(mine.watcher())).unwrap();
    let theirs = Events::new();
    other.get_data(&lock, Some(theirs.watcher())).unwrap();
    assert_eq!(ensemble.watch_count(), 2);

    client.expire();

    let new = client.session().snapshot();
    assert_ne!(new.session_id, old.session_id);
    assert_eq!(new.losses, old.losses + 1);
    assert_eq!(new.state, ConnectionState::Connected);
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        vec![
            (ConnectionState::Lost, old.session_id),
            (ConnectionState::Connected, new.session_id)
        ]
    );
    assert_eq!(theirs.next(), ev(EventType::NodeDeleted, &lock));
    assert!(ensemble.node(&lock).is_none());
    assert_eq!(
        ensemble.watch_count(),
        0,
        "the old session's watches are gone"
    );
    // The client works on its new session.
    let again = client.create("/d/e", b"", CreateMode::Ephemeral).unwrap();
    assert_eq!(
        client.exists(&again).unwrap().unwrap().ephemeral_owner,
        new.session_id.unwrap()
    );
    other.set_data("/d", b"1", None).unwrap();
    barrier(&ensemble, &client);
    mine.assert_none();
}

#[test]
fn expire_while_suspended_is_learnt_at_resume() {
    let (ensemble, client) = setup();
    let log = record(&client);
    let old = client.session_id();
    client.create("/d/e", b"", CreateMode::Ephemeral).unwrap();
    client.suspend();
    ensemble.expire_session(old);
    assert!(ensemble.node("/d/e").is_none(), "ephemerals go at once");
    assert_eq!(client.session().state(), ConnectionState::Suspended);
    assert_eq!(client.session_id(), old);
    client.resume();
    let new = client.session_id();
    assert_ne!(new, old);
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            (ConnectionState::Suspended, Some(old)),
            (ConnectionState::Lost, Some(old)),
            (ConnectionState::Connected, Some(new))
        ]
    );
    assert_eq!(client.session().snapshot().losses, 1);
    client.exists("/d").unwrap();
}

#[test]
fn ensemble_expire_session_ignores_unknown_ids() {
    let (ensemble, client) = setup();
    let epoch = client.session().epoch();
    ensemble.expire_session(12345);
    ensemble.expire_session(client.session_id());
    assert_eq!(client.session().epoch(), epoch + 2);
    let old = client.session().snapshot().session_id.unwrap();
    ensemble.expire_session(old - 1); // neither ours nor alive
    assert_eq!(client.session().epoch(), epoch + 2);
}

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

#[test]
fn container_is_deleted_when_its_last_child_goes() {
    let (ensemble, client) = setup();
    client.create("/d/c", b"", CreateMode::Container).unwrap();
    assert_eq!(ensemble.node("/d/c").unwrap().1.ephemeral_owner, i64::MIN);
    client
        .create("/d/never-used", b"", CreateMode::Container)
        .unwrap();
    // Containers take children, even ephemeral ones, and nest.
    client
        .create("/d/c/inner", b"", CreateMode::Container)
        .unwrap();
    client
        .create("/d/c/inner/lock-", b"", CreateMode::EphemeralSequential)
        .unwrap();
    client
        .create("/d/c/other", b"", CreateMode::Persistent)
        .unwrap();
    let watcher = ensemble.connect();
    let events = Events::new();
    watcher
        .get_data("/d/c/inner", Some(events.watcher()))
        .unwrap();
    watcher
        .get_children("/d/c", Some(events.watcher()))
        .unwrap();

    client.delete("/d/c/inner/lock-0000000000", None).unwrap();
    assert!(
        ensemble.node("/d/c/inner").is_some(),
        "reaped only by the sweep"
    );
    assert_eq!(ensemble.reap_containers(), 1);
    assert!(
        ensemble.node("/d/c/inner").is_none(),
        "emptied container reaped"
    );
    assert_eq!(events.next(), ev(EventType::NodeDeleted, "/d/c/inner"));
    assert_eq!(events.next(), ev(EventType::NodeChildrenChanged, "/d/c"));
    assert!(ensemble.node("/d/c").is_some(), "still has a child");
    client.delete("/d/c/other", None).unwrap();
    ensemble.reap_containers();
    assert!(ensemble.node("/d/c").is_none());
    assert!(
        ensemble.node("/d/never-used").is_some(),
        "never had a child"
    );

    // Cascades through emptied containers; ephemerals removed by expiry count too.
    client.create("/d/c1", b"", CreateMode::Container).unwrap();
    client
        .create("/d/c1/c2", b"", CreateMode::Container)
        .unwrap();
    client
        .create("/d/c1/c2/e", b"", CreateMode::Ephemeral)
        .unwrap();
    client.expire();
    assert_eq!(ensemble.reap_containers(), 2, "cascades");
    assert!(ensemble.node("/d/c1").is_none());
    assert_eq!(
        ensemble.children("/d"),
        Some(vec!["never-used".to_string()])
    );
}

#[test]
fn sequence_numbers_wrap_like_the_server() {
    let (ensemble, client) = setup();
    assert!(ensemble.set_cversion_for_test("/d", i32::MAX));
    assert!(!ensemble.set_cversion_for_test("/missing", 0));
    let seq = || {
        client
            .create("/d/x-", b"", CreateMode::PersistentSequential)
            .unwrap()
    };
    assert_eq!(seq(), "/d/x-2147483647");
    assert_eq!(seq(), "/d/x--2147483648");
    assert_eq!(seq(), "/d/x--2147483647");
    ensemble.set_cversion_for_test("/d", -5);
    assert_eq!(seq(), "/d/x--000000005");
    assert_eq!(ensemble.node("/d").unwrap().1.cversion, -4);
    assert_eq!(
        zk_locks::paths::sequence_after("x--000000005", "x-"),
        Some(-5)
    );
}

#[test]
fn counters_count_every_request_and_event() {
    let (ensemble, client) = setup();
    client.reset_counters();
    client.create("/d/a", b"", CreateMode::Persistent).unwrap();
    assert_eq!(
        client.create("/d/a", b"", CreateMode::Persistent),
        Err(ZkError::NodeExists)
    );
    client.exists("/d/a").unwrap();
    let events = Events::new();
    client.get_data("/d/a", Some(events.watcher())).unwrap();
    client.get_children("/d", None).unwrap();
    client.set_data("/d/a", b"1", None).unwrap();
    events.next();
    client.suspend();
    assert_eq!(client.delete("/d/a", None), Err(ZkError::ConnectionLoss));
    client.resume();
    client.delete("/d/a", None).unwrap();
    let c = client.counters();
    assert_eq!(
        (
            c.create,
            c.delete,
            c.exists,
            c.get_data,
            c.get_children,
            c.set_data,
            c.watch_events
        ),
        (2, 2, 1, 1, 1, 1, 1)
    );
    assert_eq!(c.requests(), 8);
    assert_eq!(c.get(Op::Delete), 2);
    client.close();
    assert_eq!(client.exists("/d"), Err(ZkError::Closed));
    assert_eq!(client.counters().exists, 2, "calls after close count too");
    client.reset_counters();
    assert_eq!(client.counters(), Default::default());
    assert_eq!(ensemble.connect().counters().requests(), 0, "per client");
}

#[test]
fn counting_client_wraps_a_shared_client() {
    let ensemble = MemoryEnsemble::new();
    let shared: SharedClient = ensemble.connect();
    let counting = CountingClient::new(shared.clone());
    counting.create("/a", b"", CreateMode::Persistent).unwrap();
    let events = Events::new();
    counting.get_data("/a", Some(events.watcher())).unwrap();
    assert_eq!(
        counting.get_children("/missing", None),
        Err(ZkError::NoNode)
    );
    shared.set_data("/a", b"1", None).unwrap();
    events.next();
    let c = counting.counters();
    assert_eq!(
        (c.create, c.get_data, c.get_children, c.set_data),
        (1, 1, 1, 0)
    );
    assert_eq!((c.requests(), c.watch_events), (3, 1));
    assert_eq!(
        counting.session().session_id(),
        shared.session().session_id()
    );
    counting.reset_counters();
    assert_eq!(counting.counters().requests(), 0);
    counting.close();
    assert_eq!(shared.session().state(), ConnectionState::Closed);
}

#[test]
fn watch_count_counts_session_path_kind() {
    let (ensemble, client) = setup();
    let other = ensemble.connect();
    let events = Events::new();
    client.get_data("/d", Some(events.watcher())).unwrap();
    client.get_data("/d", Some(events.watcher())).unwrap();
    assert_eq!(ensemble.watch_count(), 1, "one server watch, two callbacks");
    client.get_children("/d", Some(events.watcher())).unwrap();
    other.get_data("/d", Some(events.watcher())).unwrap();
    assert_eq!(ensemble.watch_count(), 3);
    other.close();
    assert_eq!(ensemble.watch_count(), 2);
    ensemble.connect().set_data("/d", b"", None).unwrap();
    assert_eq!(ensemble.watch_count(), 1);
    for _ in 0..2 {
        assert_eq!(events.next(), ev(EventType::NodeDataChanged, "/d"));
    }
}

#[test]
fn close_and_drop_end_the_session() {
    let (ensemble, client) = setup();
    let log = record(&client);
    client.create("/d/e", b"", CreateMode::Ephemeral).unwrap();
    let (tx, rx) = mpsc::channel::<WatchedEvent>();
    client
        .get_data(
            "/d",
            Some(Box::new(move |e| {
                let _ = tx.send(e);
            })),
        )
        .unwrap();
    client.close();
    client.close();
    assert_eq!(states(&log), vec![ConnectionState::Closed]);
    assert_eq!(client.session().snapshot().losses, 1);
    assert!(ensemble.node("/d/e").is_none());
    // Its watch was removed (and the callback dropped, never called).
    assert_eq!(
        rx.recv_timeout(TIMEOUT),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
    for result in [
        client.create("/d/x", b"", CreateMode::Persistent).map(drop),
        client.delete("/d", None),
        client.get_data("/d", None).map(drop),
        client.get_children("/d", None).map(drop),
        client.set_data("/d", b"", None).map(drop),
        client.exists("/d").map(drop),
    ] {
        assert_eq!(result, Err(ZkError::Closed));
    }
    // Transitions after close are ignored; faults do not resurrect it.
    client.suspend();
    client.resume();
    client.expire();
    assert_eq!(client.session().state(), ConnectionState::Closed);

    // Dropping the last handle closes, even while suspended.
    let other = ensemble.connect();
    other.create("/d/o", b"", CreateMode::Ephemeral).unwrap();
    other.suspend();
    drop(other);
    assert!(ensemble.node("/d/o").is_none());
}

#[test]
fn root_and_system_nodes() {
    let (ensemble, client) = setup();
    assert_eq!(
        client.create("/", b"", CreateMode::Persistent),
        Err(ZkError::NodeExists)
    );
    for special in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
        assert_eq!(
            client.delete(special, None),
            Err(ZkError::BadArguments),
            "{special}"
        );
    }
    let root_cversion = ensemble.node("/").unwrap().1.cversion;
    assert_eq!(
        client.create("/", b"", CreateMode::PersistentSequential),
        Ok(format!("/{root_cversion:010}"))
    );
    assert!(ensemble
        .children("/")
        .unwrap()
        .contains(&"zookeeper".to_string()));
}

#[test]
fn invalid_paths_are_bad_arguments_everywhere() {
    let (_ensemble, client) = setup();
    for bad in ["", "d", "/d/", "/d//x", "/d/./x", "/d/\u{0}"] {
        assert_eq!(client.exists(bad), Err(ZkError::BadArguments), "{bad:?}");
        assert_eq!(
            client.delete(bad, None),
            Err(ZkError::BadArguments),
            "{bad:?}"
        );
        assert_eq!(
            client.get_data(bad, None),
            Err(ZkError::BadArguments),
            "{bad:?}"
        );
        assert_eq!(
            client.get_children(bad, None),
            Err(ZkError::BadArguments),
            "{bad:?}"
        );
        assert_eq!(
            client.set_data(bad, b"", None),
            Err(ZkError::BadArguments),
            "{bad:?}"
        );
        assert_eq!(
            client.create(bad, b"", CreateMode::Persistent),
            Err(ZkError::BadArguments),
            "{bad:?}"
        );
    }
}

#[test]
fn version_minus_one_matches_any() {
    let (_ensemble, client) = setup();
    client.create("/d/a", b"", CreateMode::Persistent).unwrap();
    client.set_data("/d/a", b"1", None).unwrap();
    assert_eq!(client.set_data("/d/a", b"2", Some(-1)).unwrap().version, 2);
    client.delete("/d/a", Some(-1)).unwrap();
}

#[test]
fn get_children_order_is_not_promised() {
    // Like the server's HashSet: callers must sort. Only the set is checked here.
    let (ensemble, client) = setup();
    for i in 0..20 {
        client
            .create(&format!("/d/n{i:02}"), b"", CreateMode::Persistent)
            .unwrap();
    }
    let mut names = client.get_children("/d", None).unwrap();
    names.sort();
    assert_eq!(Some(names), ensemble.children("/d"));
}

#[test]
fn concurrent_clients_create_unique_sequence_nodes() {
    let ensemble = MemoryEnsemble::new();
    ensemble
        .connect()
        .create("/d", b"", CreateMode::Persistent)
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let client = ensemble.connect();
            thread::spawn(move || {
                for _ in 0..250 {
                    let path = client
                        .create("/d/n-", b"", CreateMode::EphemeralSequential)
                        .unwrap();
                    client.get_children("/d", None).unwrap();
                    client.delete(&path, None).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stat = ensemble.node("/d").unwrap().1;
    assert_eq!(
        (stat.cversion, stat.num_children),
        (2000, 0),
        "creates and deletes both bump cversion"
    );
}

/// Performance smoke check (run with `--release -- --ignored`): the lock library budgets
/// < 5 µs for create + list + delete on this backend.
#[test]
#[ignore]
fn perf_create_list_delete() {
    let (_ensemble, client) = setup();
    for i in 0..5 {
        client
            .create(&format!("/d/other-{i}"), b"", CreateMode::Persistent)
            .unwrap();
    }
    let rounds = 100_000;
    let start = Instant::now();
    for _ in 0..rounds {
        let path = client
            .create("/d/lock-", b"", CreateMode::EphemeralSequential)
            .unwrap();
        client.get_children("/d", None).unwrap();
        client.delete(&path, None).unwrap();
    }
    let per = start.elapsed() / rounds;
    println!("create + get_children + delete: {per:?}");
    assert!(per < Duration::from_micros(50), "{per:?}");
}
