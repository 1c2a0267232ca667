//! Every injected fault and the session transitions it makes, watches across them included
//! (event delivery and request hooks: `delivery`).

use std::sync::mpsc;
use std::time::Duration;

use zk_locks::client::memory::{Fault, FaultTiming, Op};
use zk_locks::client::{EventType, Watcher};
use zk_locks::{ConnectionState, CreateMode, WatchedEvent, ZkClient, ZkError};

use super::{barrier, ev, record, setup, states, Events, TIMEOUT};

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
    client.get_children("/d", Some(events.watcher())).unwrap();
    client.inject(Fault::before_any());
    assert_eq!(client.exists("/d"), Err(ZkError::ConnectionLoss));
    assert_eq!(ensemble.watch_count(), 1);
    other.create("/d/k", b"", CreateMode::Persistent).unwrap();
    assert_eq!(events.next(), ev(EventType::NodeChildrenChanged, "/d"));
}

/// A read that failed for its caller leaves no watch (issue 24, item 6), even when the server
/// applied it before the link broke: the server's watch dies with that connection, and a
/// client re-registers only the watches whose replies it got (the native client's
/// SetWatches), so the caller, told the read failed, never hears from it.
#[test]
fn a_watched_read_whose_reply_is_lost_leaves_no_watch() {
    for op in [Op::GetData, Op::GetChildren] {
        let (ensemble, client) = setup();
        client.set_watches_survive_reconnect(true);
        let other = ensemble.connect();
        let kept = Events::new();
        client.get_data("/d", Some(kept.watcher())).unwrap();
        let (tx, rx) = mpsc::channel::<WatchedEvent>();
        let watcher: Watcher = Box::new(move |e| {
            let _ = tx.send(e);
        });
        client.inject(Fault::after(op));
        let failed = match op {
            Op::GetData => client.get_data("/d", Some(watcher)).map(drop),
            _ => client.get_children("/d", Some(watcher)).map(drop),
        };
        assert_eq!(failed, Err(ZkError::ConnectionLoss));
        assert_eq!(ensemble.watch_count(), 1, "{op:?}: only the earlier watch");
        other.create("/d/k", b"", CreateMode::Persistent).unwrap();
        other.set_data("/d", b"1", None).unwrap();
        assert_eq!(kept.next(), ev(EventType::NodeDataChanged, "/d"));
        // The failed read's watcher was dropped uncalled: its sender is gone.
        assert_eq!(
            rx.recv_timeout(TIMEOUT),
            Err(mpsc::RecvTimeoutError::Disconnected),
            "{op:?}"
        );
    }
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

/// A client that gives up on its session while its link is down reports `Lost` at once; the
/// server still holds that session (and its ephemeral node) until it expires it; the link
/// comes back with a new session.
#[test]
fn give_up_session_while_suspended() {
    let (ensemble, client) = setup();
    let log = record(&client);
    let old = client.session().snapshot();
    let lock = client
        .create("/d/lock-", b"", CreateMode::EphemeralSequential)
        .unwrap();
    client.give_up_session(); // not suspended: no-op
    assert_eq!(client.session().snapshot(), old);

    client.suspend();
    client.give_up_session();
    client.give_up_session(); // once only

    let lost = client.session().snapshot();
    assert_eq!(lost.state, ConnectionState::Lost);
    assert_eq!(lost.losses, old.losses + 1);
    assert!(ensemble.node(&lock).is_some(), "the server was not told");
    assert_eq!(client.exists("/d"), Err(ZkError::ConnectionLoss));

    client.resume();
    let new = client.session().snapshot();
    assert_eq!(new.state, ConnectionState::Connected);
    assert_ne!(new.session_id, old.session_id);
    assert_eq!(new.losses, old.losses + 1, "one loss, not two");
    assert_eq!(
        states(&log),
        [
            ConnectionState::Suspended,
            ConnectionState::Lost,
            ConnectionState::Connected
        ]
    );
    assert!(ensemble.node(&lock).is_some(), "the old session lives on");
    client.exists("/d").unwrap();

    ensemble.expire_session(old.session_id.unwrap());
    assert!(ensemble.node(&lock).is_none());
    assert_eq!(client.session().snapshot(), new, "the client is not told");
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
