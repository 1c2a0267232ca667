//! The model's `multi`: all or nothing, the server's result shape (rolled back before the
//! failing operation, its code, `RuntimeInconsistency` after), one zxid for a committed
//! transaction, operations that see the ones before them, watches fired only on commit,
//! ephemerals undone with their session's set, faults and counters as for any request.

use zk_locks::client::memory::{Fault, MemoryEnsemble};
use zk_locks::client::{MultiOp, MultiResult, Op};
use zk_locks::{CreateMode, ZkClient, ZkError};

use super::{barrier, ev, Events};
use zk_locks::client::EventType;

fn create(path: &str, mode: CreateMode) -> MultiOp {
    MultiOp::Create {
        path: path.into(),
        data: b"c".to_vec(),
        mode,
    }
}

fn set(path: &str, data: &[u8], version: i32) -> MultiOp {
    MultiOp::SetData {
        path: path.into(),
        data: data.to_vec(),
        version,
    }
}

fn check(path: &str, version: i32) -> MultiOp {
    MultiOp::Check {
        path: path.into(),
        version,
    }
}

fn delete(path: &str) -> MultiOp {
    MultiOp::Delete {
        path: path.into(),
        version: -1,
    }
}

#[test]
fn a_failed_multi_applies_nothing_and_answers_as_the_server() {
    let ensemble = MemoryEnsemble::new();
    let c = ensemble.connect();
    c.create("/d", b"v0", CreateMode::Persistent).unwrap();
    c.create("/d/old", b"", CreateMode::Ephemeral).unwrap();
    let before = ensemble.node("/d").unwrap();
    let results = c
        .multi(&[
            create("/d/a", CreateMode::Persistent),
            set("/d", b"v1", 0),
            create("/d/seq-", CreateMode::EphemeralSequential),
            delete("/d/old"),
            check("/d/missing", -1),
            delete("/d/a"),
        ])
        .unwrap();
    assert_eq!(
        results,
        [
            MultiResult::RolledBack,
            MultiResult::RolledBack,
            MultiResult::RolledBack,
            MultiResult::RolledBack,
            MultiResult::Error(ZkError::NoNode),
            MultiResult::Error(ZkError::RuntimeInconsistency),
        ]
    );
    // Nothing applied: the directory's data, stat and children are as before, the
    // sequence number was not spent (the zxid was, as on the server), the ephemeral is still
    // its session's.
    assert_eq!(ensemble.node("/d").unwrap(), before);
    assert_eq!(ensemble.children("/d").unwrap(), ["old"]);
    let (next, stat) = c
        .create2("/d/seq-", b"", CreateMode::PersistentSequential)
        .unwrap();
    assert_eq!(next, "/d/seq-0000000001");
    assert_eq!(stat.czxid, before.1.pzxid + 2);
    c.close();
    assert_eq!(ensemble.children("/d").unwrap(), ["seq-0000000001"]);
}

#[test]
fn each_code_comes_from_the_failing_operation_in_the_servers_order() {
    let ensemble = MemoryEnsemble::new();
    let c = ensemble.connect();
    c.create("/p", b"", CreateMode::Persistent).unwrap();
    c.create("/p/child", b"", CreateMode::Persistent).unwrap();
    c.create("/e", b"", CreateMode::Ephemeral).unwrap();
    let first_error = |op: MultiOp| c.multi(&[op]).unwrap().remove(0);
    let err = MultiResult::Error;
    assert_eq!(
        first_error(create("/p", CreateMode::Persistent)),
        err(ZkError::NodeExists)
    );
    assert_eq!(
        first_error(create("/none/x", CreateMode::Persistent)),
        err(ZkError::NoNode)
    );
    assert_eq!(
        first_error(create("/e/x", CreateMode::Persistent)),
        err(ZkError::NoChildrenForEphemerals)
    );
    assert_eq!(first_error(delete("/p")), err(ZkError::NotEmpty));
    assert_eq!(first_error(set("/p", b"", 3)), err(ZkError::BadVersion));
    assert_eq!(first_error(check("/p", 3)), err(ZkError::BadVersion));
    assert_eq!(first_error(check("/p", 0)), MultiResult::Check);
    // A path the client refuses fails the whole call, nothing sent.
    c.reset_counters();
    assert_eq!(
        c.multi(&[check("no-slash", -1)]),
        Err(ZkError::BadArguments)
    );
    assert_eq!(c.counters().requests(), 0);
}

#[test]
fn a_committed_multi_has_one_zxid_and_sees_its_own_changes() {
    let ensemble = MemoryEnsemble::new();
    let c = ensemble.connect();
    let results = c
        .multi(&[
            create("/m", CreateMode::Persistent),
            create("/m/child", CreateMode::Ephemeral),
            set("/m", b"new", 0),
            check("/m", 1),
            delete("/m/child"),
        ])
        .unwrap();
    let [MultiResult::Create(m, m_stat), MultiResult::Create(child, child_stat), MultiResult::SetData(set_stat), MultiResult::Check, MultiResult::Delete] =
        &results[..]
    else {
        panic!("{results:?}");
    };
    assert_eq!((m.as_str(), child.as_str()), ("/m", "/m/child"));
    // As the server: a create inside a multi answers with its path only.
    assert_eq!((m_stat.czxid, child_stat.czxid), (0, 0));
    let m_stat = ensemble.node("/m").unwrap().1;
    assert_eq!(set_stat.mzxid, m_stat.czxid);
    assert_eq!(set_stat.version, 1);
    let (data, stat) = ensemble.node("/m").unwrap();
    assert_eq!((data.as_slice(), stat.num_children), (&b"new"[..], 0));
    // The next change takes the next zxid.
    let (_, next) = c.create2("/n", b"", CreateMode::Persistent).unwrap();
    assert_eq!(next.czxid, m_stat.czxid + 1);
}

#[test]
fn watches_fire_once_a_multi_commits_and_never_for_a_failed_one() {
    let ensemble = MemoryEnsemble::new();
    let (c, watcher) = (ensemble.connect(), ensemble.connect());
    c.create("/w", b"", CreateMode::Persistent).unwrap();
    let events = Events::new();
    watcher.get_data("/w", Some(events.watcher())).unwrap();
    let children = Events::new();
    watcher
        .get_children("/w", Some(children.watcher()))
        .unwrap();
    let failed = c
        .multi(&[
            set("/w", b"x", -1),
            create("/w/c", CreateMode::Persistent),
            check("/missing", -1),
        ])
        .unwrap();
    assert_eq!(failed[2], MultiResult::Error(ZkError::NoNode));
    barrier(&ensemble, &watcher);
    events.assert_none();
    children.assert_none();
    assert_eq!(ensemble.watch_count(), 2, "both watches still registered");
    c.multi(&[set("/w", b"x", -1), create("/w/c", CreateMode::Persistent)])
        .unwrap();
    assert_eq!(events.next(), ev(EventType::NodeDataChanged, "/w"));
    assert_eq!(children.next(), ev(EventType::NodeChildrenChanged, "/w"));
}

#[test]
fn a_multi_is_one_request_and_faults_strike_it_as_any() {
    let ensemble = MemoryEnsemble::new();
    let c = ensemble.connect();
    c.create("/f", b"", CreateMode::Persistent).unwrap();
    c.reset_counters();
    c.inject(Fault::before(Op::Multi));
    assert_eq!(
        c.multi(&[set("/f", b"lost", -1)]),
        Err(ZkError::ConnectionLoss)
    );
    assert_eq!(ensemble.node("/f").unwrap().0, b"");
    c.inject(Fault::after(Op::Multi).on_path("/f"));
    assert_eq!(
        c.multi(&[set("/f", b"applied", -1)]),
        Err(ZkError::ConnectionLoss)
    );
    assert_eq!(ensemble.node("/f").unwrap().0, b"applied");
    let counters = c.counters();
    assert_eq!((counters.multi, counters.set_data), (2, 0));
    assert_eq!(counters.requests(), 2);
}

#[test]
fn a_multi_of_a_session_that_expires_under_it_is_refused_whole() {
    let ensemble = MemoryEnsemble::new();
    let c = ensemble.connect();
    c.create("/s", b"", CreateMode::Persistent).unwrap();
    let expiring = ensemble.clone();
    let session = c.session_id();
    c.on_request(Some(Box::new(move |op, _| {
        if op == Op::Multi {
            expiring.expire_session(session);
        }
    })));
    assert_eq!(
        c.multi(&[set("/s", b"x", -1)]),
        Err(ZkError::SessionExpired)
    );
    assert_eq!(ensemble.node("/s").unwrap().0, b"");
    c.on_request(None);
    // The new session writes.
    assert!(c.multi(&[set("/s", b"x", -1)]).unwrap()[0].is_ok());
}
