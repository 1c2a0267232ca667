//! The session under faults (FaultProxy): a cut keeps the session (a young client; an aged
//! one too on our own client), a short freeze suspends, a long one loses the session in
//! time, a call in flight returns by its deadline, a targeted expiry is `Lost` then a new
//! session, a server restart and a leader kill are survived. The cuts and freezes run over
//! TLS too (our own client).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use zk_locks::session::{ConnectionState, SessionSnapshot};
use zk_locks::testing::{shared_server, TestingCluster, TestingServer};
use zk_locks::{CreateMode, InterProcessLock, InterProcessMutex, LockGuard, LockState, ZkError};

use crate::backend::{
    age, behind_a_proxy, behind_a_proxy_over, connect, connect_on, frozen_call_slack, reach,
    states, try_connect, unique_root, until_ok, wait_for_state, Client, ClientKind, Connect, On,
    SESSION,
};

fn young_client_cut_suspends_then_reconnects_the_same_session(on: impl Into<On>) {
    let on = on.into();
    let Some((proxy, client)) = behind_a_proxy_over(on.link, |hosts| connect_on(on, hosts)) else {
        return;
    };
    let before = client.session().snapshot();
    proxy.cut();
    let seen = reach(&*client, ConnectionState::Reconnected, SESSION * 2);
    let last = *seen.last().unwrap();
    // Suspended then Reconnected: two transitions (a waiter may wake only once).
    assert_eq!(last.session_id, before.session_id);
    assert!(last.epoch >= before.epoch + 2);
    assert_eq!(last.losses, 0);
    client.exists("/").unwrap();
}

/// A client of `kind` behind a proxy holds three mutexes under a fresh root, ages three session
/// timeouts with no transition, then its connection is cut; `then` gets the client, the root,
/// the guards and the session as it was before the cut.
pub(crate) fn holding_three_locks_aged_then_cut(
    on: impl Into<On>,
    then: impl FnOnce(&Client, &str, &[LockGuard<'_, InterProcessMutex>], SessionSnapshot),
) {
    let on = on.into();
    let Some((proxy, client)) = behind_a_proxy_over(on.link, |hosts| connect_on(on, hosts)) else {
        return;
    };
    let root = unique_root("aged");
    let mutexes: Vec<_> = (0..3)
        .map(|i| InterProcessMutex::new(client.shared(), &format!("{root}/lock-{i}")).unwrap())
        .collect();
    let guards: Vec<_> = mutexes.iter().map(|m| m.lock().unwrap()).collect();
    let before = client.session().snapshot();
    age(&*client, SESSION * 3);
    proxy.cut();
    then(&client, &root, &guards, before);
}

/// A client older than several session timeouts keeps its session and every lock through a
/// cut: pings keep the session, and the cut is not mistaken for an expiry. (The crate
/// backend cannot: see `crate_limits`.)
fn aged_client_cut_keeps_the_session_and_every_lock(on: impl Into<On>) {
    holding_three_locks_aged_then_cut(on, |client, root, guards, before| {
        let seen = reach(&**client, ConnectionState::Reconnected, SESSION * 3);
        let last = *seen.last().unwrap();
        // Suspended then Reconnected: two transitions, even when the watcher only woke for the
        // second one (a loaded machine can run both before it looks).
        assert!(last.epoch >= before.epoch + 2, "{:?}", states(&seen));
        assert_eq!(last.session_id, before.session_id);
        assert_eq!(last.losses, 0);
        for guard in guards {
            assert_eq!(guard.state(), LockState::Held);
        }
        // The lock nodes are still ours on the server.
        for i in 0..3 {
            let children = client
                .get_children(&format!("{root}/lock-{i}"), None)
                .unwrap();
            assert_eq!(children.len(), 1);
        }
    });
}

fn freeze_shorter_than_the_session_is_suspended_then_reconnected(on: impl Into<On>) {
    let on = on.into();
    let Some((proxy, client)) = behind_a_proxy_over(on.link, |hosts| connect_on(on, hosts)) else {
        return;
    };
    let before = client.session().snapshot();
    proxy.freeze();
    reach(&*client, ConnectionState::Suspended, SESSION * 2);
    proxy.thaw();
    let seen = reach(&*client, ConnectionState::Reconnected, SESSION * 2);
    let last = *seen.last().unwrap();
    assert_eq!(last.session_id, before.session_id);
    assert_eq!(last.losses, 0);
    client.exists("/").unwrap();
}

fn freeze_longer_than_the_session_is_lost_in_time_then_a_new_session(on: impl Into<On>) {
    let on = on.into();
    let Some((proxy, client)) = behind_a_proxy_over(on.link, |hosts| connect_on(on, hosts)) else {
        return;
    };
    let before = client.session().snapshot();
    proxy.freeze();
    let frozen_at = Instant::now();
    let seen = reach(&*client, ConnectionState::Lost, SESSION * 2);
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
    let seen = reach(&*client, ConnectionState::Connected, SESSION * 4);
    let last = *seen.last().unwrap();
    assert_ne!(last.session_id, before.session_id);
    assert_eq!(last.losses, 1);
    client.exists("/").unwrap();
}

fn a_call_in_flight_during_a_freeze_returns_by_the_deadline(on: impl Into<On>) {
    let on = on.into();
    let Some((proxy, client)) = behind_a_proxy_over(on.link, |hosts| connect_on(on, hosts)) else {
        return;
    };
    proxy.freeze();
    let started = Instant::now();
    let err = client.get_children("/", None).unwrap_err();
    let took = started.elapsed();
    assert!(err.is_retryable(), "{err}");
    assert!(
        took <= SESSION + frozen_call_slack(on.kind),
        "returned after {took:?}"
    );
    proxy.thaw();
}

fn targeted_expiry_is_lost_then_a_new_session(kind: ClientKind) {
    let Some((proxy, client)) = behind_a_proxy(|hosts| connect(kind, hosts)) else {
        return;
    };
    let root = unique_root("expiry");
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
    // Listeners see every transition (a waiter may wake only after Lost → Connected).
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
    // A change after the new session does not reach the dropped watch. Our own client also
    // shows its registry empty, and `sync` makes sure the change's notification would have
    // arrived by now.
    if let Some(native) = client.native() {
        assert_eq!(native.watch_count(), 0);
    }
    client.set_data(&root, b"changed", None).unwrap();
    if let Some(native) = client.native() {
        native.sync(&root).unwrap();
    }
    assert!(watch_rx.try_recv().is_err());
}

fn server_stop_and_restart(kind: ClientKind) {
    if shared_server().is_none() {
        return;
    }
    let server = TestingServer::start().unwrap();
    let client = connect(kind, &server.connect_string());
    let root = unique_root("restart");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    server.stop();
    let seen = wait_for_state(&*client, ConnectionState::Suspended, SESSION * 2);
    assert!(
        !seen.last().unwrap().state.is_connected(),
        "{:?}",
        states(&seen)
    );
    server.restart().unwrap();
    until_ok(SESSION * 15, || client.exists(&root)).expect("persistent node survives a restart");
    let state = client
        .session()
        .wait_until_connected(Some(Instant::now() + SESSION * 3))
        .state;
    assert!(state.is_connected(), "{state:?}");
}

fn cluster_leader_kill_the_client_moves_on(kind: ClientKind) {
    if shared_server().is_none() {
        return;
    }
    let cluster = TestingCluster::start(3).unwrap();
    let client = try_connect(
        kind,
        Connect::new(cluster.connect_string()).session_timeout(Duration::from_secs(4)),
    )
    .unwrap();
    let root = unique_root("cluster");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let leader = cluster.leader().expect("a leader");
    cluster.kill(leader);
    cluster.wait_for_quorum(Duration::from_secs(60)).unwrap();
    assert_ne!(cluster.leader(), Some(leader));
    until_ok(Duration::from_secs(30), || {
        client
            .create(&format!("{root}/after"), b"", CreateMode::Persistent)
            .or_else(|e| {
                if e == ZkError::NodeExists {
                    Ok(String::new())
                } else {
                    Err(e)
                }
            })
    });
    assert!(client.exists(&format!("{root}/after")).unwrap().is_some());
}

/// The aged cut on our own client (the crate's ignored run is in `crate_limits`).
#[test]
fn native_aged_client_cut_keeps_the_session_and_every_lock() {
    aged_client_cut_keeps_the_session_and_every_lock(ClientKind::Native);
}

on_both_backends!([
    young_client_cut_suspends_then_reconnects_the_same_session,
    freeze_shorter_than_the_session_is_suspended_then_reconnected,
    freeze_longer_than_the_session_is_lost_in_time_then_a_new_session,
    a_call_in_flight_during_a_freeze_returns_by_the_deadline,
    targeted_expiry_is_lost_then_a_new_session,
    server_stop_and_restart,
    cluster_leader_kill_the_client_moves_on,
]);

over_tls!([
    young_client_cut_suspends_then_reconnects_the_same_session,
    aged_client_cut_keeps_the_session_and_every_lock,
    freeze_shorter_than_the_session_is_suspended_then_reconnected,
    freeze_longer_than_the_session_is_lost_in_time_then_a_new_session,
    a_call_in_flight_during_a_freeze_returns_by_the_deadline,
]);
