//! The model of the server: containers, sequence wrap, counters, watch counting, session
//! end, system nodes, path and version checks, child order, concurrent creates.

use std::sync::mpsc;
use std::thread;

use zk_locks::client::counting::CountingClient;
use zk_locks::client::memory::{MemoryEnsemble, Op};
use zk_locks::client::EventType;
use zk_locks::{ConnectionState, CreateMode, SharedClient, WatchedEvent, ZkClient, ZkError};

use super::{ev, record, setup, states, Events, TIMEOUT};

#[test]
fn container_is_deleted_when_its_last_child_goes() {
    let (ensemble, client) = setup();
    client.create("/d/c", b"", CreateMode::Container).unwrap();
    assert_eq!(ensemble.node("/d/c").unwrap().1.ephemeral_owner, i64::MIN);
    client
        .create("/d/never-used", b"", CreateMode::Container)
        .unwrap();
    // Containers take children, even ephemeral ones, and nest.
    for (path, mode) in [
        ("/d/c/inner", CreateMode::Container),
        ("/d/c/inner/lock-", CreateMode::EphemeralSequential),
        ("/d/c/other", CreateMode::Persistent),
    ] {
        client.create(path, b"", mode).unwrap();
    }
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

/// A write the server refuses still spends a zxid (it logs an error transaction), measured
/// on 3.8: a create of an existing node, a delete of a missing one, a set or a delete with a
/// wrong version each put one zxid between the writes around them. A path the client
/// refuses before sending spends none.
#[test]
fn a_refused_write_spends_its_zxid_as_on_the_server() {
    let (ensemble, client) = setup();
    let mut last = client.create2("/z", b"", CreateMode::Persistent).unwrap().1;
    let refusals: [&dyn Fn() -> ZkError; 5] = [
        &|| {
            client
                .create("/z", b"", CreateMode::Persistent)
                .unwrap_err()
        },
        &|| client.delete("/z/none", None).unwrap_err(),
        &|| client.set_data("/z", b"", Some(7)).unwrap_err(),
        &|| client.delete("/z", Some(9)).unwrap_err(),
        &|| client.delete("no-slash", None).unwrap_err(),
    ];
    let mut gaps = Vec::new();
    for (i, refuse) in refusals.iter().enumerate() {
        refuse();
        let next = client
            .create2(&format!("/z/n{i}"), b"", CreateMode::Persistent)
            .unwrap()
            .1;
        gaps.push(next.czxid - last.czxid);
        last = next;
    }
    assert_eq!(gaps, [2, 2, 2, 2, 1]);
    assert_eq!(ensemble.node("/z").unwrap().1.num_children, 5);
}
