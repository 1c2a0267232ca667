//! Conformance of `multi` on the backends that have it (`ZkClient::has_multi`: memory and our
//! own client): the result shape of a failed transaction (rolled back before the failing
//! operation, its code, `RuntimeInconsistency` after it) with nothing applied, the codes in
//! the server's order, a committed transaction's one zxid and operations that see the ones
//! before them, watches fired only by a commit. A backend without transactions (the
//! `zookeeper` crate's) must say so: `Unimplemented`, nothing sent.

use zk_locks::client::{EventType, MultiOp, MultiResult};
use zk_locks::testing::harness::Backend;
use zk_locks::{CreateMode, Stat, ZkError};

use super::support::{event, Ctx, Events};

fn create(path: &str, mode: CreateMode) -> MultiOp {
    MultiOp::Create {
        path: path.into(),
        data: b"c".to_vec(),
        mode,
    }
}

fn set(path: &str, version: i32) -> MultiOp {
    MultiOp::SetData {
        path: path.into(),
        data: b"s".to_vec(),
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

pub fn multi_failed_applies_nothing_in_the_servers_shape(f: &dyn Backend) {
    let c = Ctx::new(f);
    if !has_multi(&c) {
        return;
    }
    let cl = &c.client;
    let before = cl.exists(&c.dir).unwrap().unwrap();
    let results = cl
        .multi(&[
            create(&c.path("a"), CreateMode::Persistent),
            set(&c.dir, 0),
            create(&c.path("s-"), CreateMode::EphemeralSequential),
            check(&c.path("missing"), -1),
            delete(&c.path("a")),
        ])
        .unwrap();
    assert_eq!(
        results,
        [
            MultiResult::RolledBack,
            MultiResult::RolledBack,
            MultiResult::RolledBack,
            MultiResult::Error(ZkError::NoNode),
            MultiResult::Error(ZkError::RuntimeInconsistency),
        ]
    );
    let after = cl.exists(&c.dir).unwrap().unwrap();
    assert_eq!(
        (
            after.version,
            after.cversion,
            after.num_children,
            after.pzxid
        ),
        (
            before.version,
            before.cversion,
            before.num_children,
            before.pzxid
        )
    );
    assert!(cl.get_children(&c.dir, None).unwrap().is_empty());
    // No sequence number was spent. (Its zxid was, as the server logs a failed transaction
    // too: not measurable on a server other tests write to meanwhile; `memory_backend::multi`
    // holds the model to it.)
    assert_eq!(
        cl.create(&c.path("s-"), b"", CreateMode::EphemeralSequential)
            .unwrap(),
        c.path("s-0000000000")
    );
}

pub fn multi_codes_in_the_servers_order(f: &dyn Backend) {
    let c = Ctx::new(f);
    if !has_multi(&c) {
        return;
    }
    let cl = &c.client;
    let p = c.persistent("p");
    cl.create(&c.path("p/child"), b"", CreateMode::Persistent)
        .unwrap();
    let e = c.path("e");
    cl.create(&e, b"", CreateMode::Ephemeral).unwrap();
    let only = |op: MultiOp| cl.multi(&[op]).unwrap().remove(0);
    let err = MultiResult::Error;
    assert_eq!(
        only(create(&p, CreateMode::Persistent)),
        err(ZkError::NodeExists)
    );
    assert_eq!(
        only(create(&c.path("none/x"), CreateMode::Persistent)),
        err(ZkError::NoNode)
    );
    assert_eq!(
        only(create(&format!("{e}/x"), CreateMode::Persistent)),
        err(ZkError::NoChildrenForEphemerals)
    );
    assert_eq!(only(delete(&p)), err(ZkError::NotEmpty));
    assert_eq!(only(delete(&c.path("none"))), err(ZkError::NoNode));
    assert_eq!(only(set(&p, 3)), err(ZkError::BadVersion));
    assert_eq!(only(check(&p, 3)), err(ZkError::BadVersion));
    assert_eq!(only(check(&p, 0)), MultiResult::Check);
    assert_eq!(only(check(&p, -1)), MultiResult::Check);
}

pub fn multi_committed_shares_one_zxid(f: &dyn Backend) {
    let c = Ctx::new(f);
    if !has_multi(&c) {
        return;
    }
    let cl = &c.client;
    let m = c.path("m");
    let results = cl
        .multi(&[
            create(&m, CreateMode::Persistent),
            create(&format!("{m}/e"), CreateMode::Ephemeral),
            create(&format!("{m}/s-"), CreateMode::PersistentSequential),
            set(&m, 0),
            check(&m, 1),
            delete(&format!("{m}/e")),
        ])
        .unwrap();
    let [MultiResult::Create(p1, s1), MultiResult::Create(p2, s2), MultiResult::Create(p3, s3), MultiResult::SetData(set_stat), MultiResult::Check, MultiResult::Delete] =
        &results[..]
    else {
        panic!("{results:?}");
    };
    assert_eq!(
        (p1.as_str(), p2.as_str(), p3.as_str()),
        (
            m.as_str(),
            format!("{m}/e").as_str(),
            format!("{m}/s-0000000001").as_str()
        )
    );
    // ZooKeeper answers a create inside a multi with its path only (a container create
    // with its stat too), whatever the opcode sent: the stats are empty.
    assert_eq!(
        (*s1, *s2, *s3),
        (Stat::default(), Stat::default(), Stat::default())
    );
    assert_eq!(set_stat.version, 1);
    // Every change of the transaction has its zxid.
    let created = cl.exists(&m).unwrap().unwrap();
    let sequential = cl.exists(p3).unwrap().unwrap();
    assert_eq!(
        (created.czxid, sequential.czxid, created.mzxid),
        (set_stat.mzxid, set_stat.mzxid, set_stat.mzxid)
    );
    assert_eq!(cl.get_children(&m, None).unwrap(), ["s-0000000001"]);
    // A container create comes back with its stat.
    let dir = c.path("dir");
    let results = cl.multi(&[create(&dir, CreateMode::Container)]).unwrap();
    let [MultiResult::Create(path, stat)] = &results[..] else {
        panic!("{results:?}");
    };
    assert_eq!(path, &dir);
    assert_eq!(stat.czxid, cl.exists(&dir).unwrap().unwrap().czxid);
    assert!(stat.czxid > set_stat.mzxid);
}

pub fn multi_fires_watches_only_when_it_commits(f: &dyn Backend) {
    let c = Ctx::new(f);
    if !has_multi(&c) {
        return;
    }
    let w = c.persistent("w");
    let watcher = f.connect();
    let data = Events::new();
    watcher.get_data(&w, Some(data.watcher())).unwrap();
    let failed = c
        .client
        .multi(&[set(&w, -1), check(&c.path("missing"), -1)])
        .unwrap();
    assert_eq!(failed[1], MultiResult::Error(ZkError::NoNode));
    c.barrier(watcher.as_ref());
    data.assert_none();
    c.client.multi(&[set(&w, -1)]).unwrap();
    assert_eq!(data.next(), event(EventType::NodeDataChanged, &w));
}

/// True when the backend has transactions; otherwise asserts that it says so
/// (`Unimplemented`, nothing applied), which is all such a backend promises.
fn has_multi(c: &Ctx) -> bool {
    if c.client.has_multi() {
        return true;
    }
    let a = c.path("a");
    assert_eq!(
        c.client.multi(&[create(&a, CreateMode::Persistent)]),
        Err(ZkError::Unimplemented)
    );
    assert_eq!(c.client.exists(&a).unwrap(), None);
    false
}
