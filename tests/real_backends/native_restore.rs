//! Our own client only: what a reconnect of the same session restores. Watches come back
//! with SetWatches (a deletion missed while disconnected fires at once; a later change fires
//! as usual; more path text than one packet goes in batches), and credentials are sent again
//! on every connection; a watcher removed while disconnected is not restored. The watch
//! restores run over TLS too.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::client::{registering_as, EventType, Request, WatcherId};
use zk_locks::session::ConnectionState;
use zk_locks::testing::harness::watches::watches_in;
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{CreateMode, InterProcessLock, InterProcessMutex, ZkClient, ZkError};

use crate::backend::{behind_a_proxy_over, native, native_with, reach, unique_root, Link, SESSION};

/// Session and call timeout for bulk work (thousands of nodes in one pipeline, a megabyte of
/// SetWatches), which a loaded machine may take seconds to get through.
const PATIENT: Duration = Duration::from_secs(30);

/// Our own client over `link` with [`PATIENT`] session and call timeouts.
fn patient(link: Link, hosts: &str) -> Arc<NativeClient> {
    native_with(
        link,
        NativeOptions::new(hosts)
            .session_timeout(PATIENT)
            .call_timeout(PATIENT),
    )
}

/// Our own client over `link` with the tests' session timeout.
fn over(link: Link, hosts: &str) -> Arc<NativeClient> {
    native_with(link, NativeOptions::new(hosts).session_timeout(SESSION))
}

/// Every result of a pipeline is `Ok`; else the count and the first error.
fn all_ok(results: Vec<Result<zk_locks::client::Response, ZkError>>, what: &str) {
    let failed: Vec<&ZkError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} {what} failed, the first with {:?}",
        failed.len(),
        results.len(),
        failed[0]
    );
}

fn a_deletion_while_disconnected_fires_the_restored_watch(link: Link) {
    let Some(server) = link.server() else {
        return;
    };
    let proxy = FaultProxy::start(link.addr(server)).unwrap();
    let waiter = over(link, &proxy.connect_string());
    let other = native(&server.connect_string());
    let root = unique_root("setwatches");
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
    reach(waiter.as_ref(), ConnectionState::Suspended, SESSION * 2);
    other.delete(&node, None).unwrap();
    proxy.refuse(false);
    reach(waiter.as_ref(), ConnectionState::Reconnected, SESSION * 2);
    // No call on the waiter: the watch was re-registered with SetWatches, and the server
    // fired it for the deletion it missed.
    let event = rx
        .recv_timeout(SESSION * 2)
        .expect("the restored watch fired");
    assert_eq!(event.event_type, EventType::NodeDeleted);
    assert_eq!(event.path, node);
    assert_eq!(waiter.watch_count(), 0);
}

fn a_watch_restored_after_a_cut_fires_on_a_later_change(link: Link) {
    let Some((proxy, client)) = behind_a_proxy_over(link, |hosts| over(link, hosts)) else {
        return;
    };
    let root = unique_root("restored");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let (tx, rx) = mpsc::channel();
    client
        .get_children(&root, Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    proxy.cut();
    reach(client.as_ref(), ConnectionState::Reconnected, SESSION * 2);
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
fn many_watches_are_restored_in_batches(link: Link) {
    let Some(server) = link.server() else {
        return;
    };
    const NODES: usize = 7000;
    let proxy = FaultProxy::start(link.addr(server)).unwrap();
    let client = patient(link, &proxy.connect_string());
    let root = unique_root("batches");
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
    all_ok(client.pipeline(&creates), "creates");
    let (tx, rx) = mpsc::channel();
    for p in &paths {
        let tx = tx.clone();
        client
            .get_data(p, Some(Box::new(move |e| tx.send(e).unwrap())))
            .unwrap();
    }
    assert_eq!(client.watch_count(), NODES);
    proxy.cut();
    reach(client.as_ref(), ConnectionState::Reconnected, PATIENT);
    let other = patient(Link::Tcp, &server.connect_string());
    let deletes: Vec<Request> = paths
        .iter()
        .map(|p| Request::Delete {
            path: p.clone(),
            version: None,
        })
        .collect();
    all_ok(other.pipeline(&deletes), "deletes");
    for _ in 0..NODES {
        let event = rx
            .recv_timeout(PATIENT)
            .expect("every restored watch fires");
        assert_eq!(event.event_type, EventType::NodeDeleted);
    }
    assert_eq!(client.watch_count(), 0);
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
    let path = unique_root("auth");
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
    let anonymous = native(&server.connect_string());
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
    reach(client.as_ref(), ConnectionState::Reconnected, SESSION * 2);
    assert_eq!(client.get_data(&path, None).unwrap().0, b"secret");
}

/// The same through the lock engine: a waiter whose holder released while the waiter's link
/// was down is woken by its restored watch and takes the lock without listing again (its
/// requests are counted), in the same session.
fn a_waiter_with_a_restored_watch_takes_the_lock_without_listing_again(link: Link) {
    use zk_locks::client::CountingClient;
    let Some(server) = link.server() else {
        return;
    };
    let proxy = FaultProxy::start(link.addr(server)).unwrap();
    let waiting_client = over(link, &proxy.connect_string());
    let counting = Arc::new(CountingClient::new(waiting_client.clone()));
    let holder_client = native(&server.connect_string());
    let path = unique_root("restored-hand-off");
    let holder = InterProcessMutex::new(holder_client.clone(), &path).unwrap();
    holder.acquire().unwrap();
    let session = waiting_client.session().snapshot();
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
    while waiting_client.watch_count() == 0 {
        assert!(Instant::now() < deadline, "the waiter never watched");
        waiting_client.session().wait_for_change(
            waiting_client.session().epoch(),
            Some(Instant::now() + SESSION / 20),
        );
    }
    proxy.refuse(true);
    proxy.cut();
    reach(
        waiting_client.as_ref(),
        ConnectionState::Suspended,
        SESSION * 2,
    );
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
    let after = waiting_client.session().snapshot();
    assert_eq!(after.session_id, session.session_id);
    assert_eq!(after.losses, session.losses);
    waiter.join().unwrap();
}

/// A watcher removed while the link is down is left out of SetWatches: after the reconnect
/// the server watches only the path whose watcher stayed (`wchp`, by session).
fn a_watcher_removed_while_disconnected_is_not_restored(link: Link) {
    let Some(server) = link.server() else {
        return;
    };
    let proxy = FaultProxy::start(link.addr(server)).unwrap();
    let waiter = over(link, &proxy.connect_string());
    let other = native(&server.connect_string());
    let root = unique_root("setwatches-removed");
    other.create(&root, b"", CreateMode::Persistent).unwrap();
    let (kept, removed) = (format!("{root}/kept"), format!("{root}/removed"));
    for path in [&kept, &removed] {
        other.create(path, b"", CreateMode::Persistent).unwrap();
    }
    waiter.get_data(&kept, Some(Box::new(|_| {}))).unwrap();
    let id = WatcherId::new();
    registering_as(id, || waiter.get_data(&removed, Some(Box::new(|_| {})))).unwrap();
    let session = waiter.session().session_id().expect("a session");
    let watched = || {
        let me = format!("{session:#x}");
        let wchp = server.four_letter("wchp").unwrap_or_default();
        let mut paths: Vec<String> = watches_in(&wchp)
            .filter(|(p, s)| *s == me && p.starts_with(&root))
            .map(|(p, _)| p.to_string())
            .collect();
        paths.sort();
        paths
    };
    assert_eq!(watched(), vec![kept.clone(), removed.clone()]);
    proxy.refuse(true);
    proxy.cut();
    reach(waiter.as_ref(), ConnectionState::Suspended, SESSION * 2);
    let began = Instant::now();
    assert!(waiter.remove_watcher(&removed, id), "removed unfired");
    // No connection: nothing to send, nothing waited for.
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    proxy.refuse(false);
    reach(waiter.as_ref(), ConnectionState::Reconnected, SESSION * 2);
    // A call flows once SetWatches is answered, and is answered after it.
    waiter.exists("/").unwrap();
    assert_eq!(watched(), vec![kept]);
    assert_eq!(waiter.watch_count(), 1);
}

on_both_links!([
    a_watcher_removed_while_disconnected_is_not_restored,
    a_deletion_while_disconnected_fires_the_restored_watch,
    a_watch_restored_after_a_cut_fires_on_a_later_change,
    many_watches_are_restored_in_batches,
    a_waiter_with_a_restored_watch_takes_the_lock_without_listing_again,
]);
