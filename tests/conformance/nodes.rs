//! Conformance of the node operations: create modes and errors, sequence numbers, deletes
//! and versions, data, `exists`, the stat's fields, children.

use zk_locks::testing::harness::Backend;
use zk_locks::{ConnectionState, CreateMode, ZkError};

use super::support::{sorted, Ctx};

pub fn connect_knows_session(f: &dyn Backend) {
    let client = f.connect();
    let snapshot = client.session().snapshot();
    assert_eq!(snapshot.state, ConnectionState::Connected);
    assert!(snapshot.session_id.is_some_and(|id| id != 0));
    let other = f.connect();
    assert_ne!(other.session().session_id(), snapshot.session_id);
}

pub fn create_modes_return_paths(f: &dyn Backend) {
    let c = Ctx::new(f);
    let cl = &c.client;
    // In this order: each create bumps the parent's cversion, which numbers the next one.
    for (name, data, mode, created) in [
        ("p", b"1", CreateMode::Persistent, "p"),
        ("e", b"2", CreateMode::Ephemeral, "e"),
        (
            "ps-",
            b"3",
            CreateMode::PersistentSequential,
            "ps-0000000002",
        ),
        (
            "es-",
            b"4",
            CreateMode::EphemeralSequential,
            "es-0000000003",
        ),
        ("c", b"5", CreateMode::Container, "c"),
    ] {
        assert_eq!(
            cl.create(&c.path(name), data, mode).unwrap(),
            c.path(created),
            "{mode:?}"
        );
    }
    assert_eq!(
        sorted(cl.get_children(&c.dir, None).unwrap()),
        vec!["c", "e", "es-0000000003", "p", "ps-0000000002"]
    );
    for (name, data) in [
        ("p", b"1"),
        ("e", b"2"),
        ("es-0000000003", b"4"),
        ("c", b"5"),
    ] {
        assert_eq!(cl.get_data(&c.path(name), None).unwrap().0, data);
    }
    let session = cl.session().session_id().unwrap();
    let owner = |name: &str| cl.exists(&c.path(name)).unwrap().unwrap().ephemeral_owner;
    assert_eq!(owner("p"), 0);
    assert_eq!(owner("ps-0000000002"), 0);
    assert_eq!(owner("e"), session);
    assert_eq!(owner("es-0000000003"), session);
}

pub fn sequence_numbers_follow_parent_cversion(f: &dyn Backend) {
    let c = Ctx::new(f);
    let cl = &c.client;
    let seq = |name: &str| {
        cl.create(&c.path(name), b"", CreateMode::EphemeralSequential)
            .unwrap()
    };
    assert_eq!(seq("lock-"), c.path("lock-0000000000"));
    assert_eq!(seq("lock-"), c.path("lock-0000000001"));
    // Any child creation bumps the parent's cversion, sequential or not.
    cl.create(&c.path("plain"), b"", CreateMode::Persistent)
        .unwrap();
    assert_eq!(seq("other-"), c.path("other-0000000003"));
    assert_eq!(cl.exists(&c.dir).unwrap().unwrap().cversion, 4);
    // Deletes bump the reported cversion but not the sequence numbers (measured on 3.8).
    cl.delete(&c.path("plain"), None).unwrap();
    cl.delete(&c.path("lock-0000000000"), None).unwrap();
    assert_eq!(cl.exists(&c.dir).unwrap().unwrap().cversion, 6);
    assert_eq!(seq("lock-"), c.path("lock-0000000004"));
    // A failed create bumps neither.
    assert_eq!(
        cl.create(&c.path("lock-0000000004"), b"", CreateMode::Persistent),
        Err(ZkError::NodeExists)
    );
    assert_eq!(cl.exists(&c.dir).unwrap().unwrap().cversion, 7);
    assert_eq!(seq("lock-"), c.path("lock-0000000005"));
    // Counters are per parent.
    let sub = c.path("sub");
    cl.create(&sub, b"", CreateMode::Persistent).unwrap();
    assert_eq!(
        cl.create(&format!("{sub}/x-"), b"", CreateMode::PersistentSequential)
            .unwrap(),
        format!("{sub}/x-0000000000")
    );
    // (A trailing slash, which makes the number the whole name on the server, is not in the
    // shared suite: the `zookeeper` crate rejects such paths before sending them.)
}

pub fn create_errors(f: &dyn Backend) {
    let c = Ctx::new(f);
    let cl = &c.client;
    let create = |path: &str, mode| cl.create(path, b"", mode);
    assert_eq!(
        create(&c.path("missing/x"), CreateMode::Persistent),
        Err(ZkError::NoNode)
    );
    assert_eq!(
        create(&c.path("missing/x-"), CreateMode::EphemeralSequential),
        Err(ZkError::NoNode)
    );
    create(&c.path("a"), CreateMode::Persistent).unwrap();
    assert_eq!(
        create(&c.path("a"), CreateMode::Persistent),
        Err(ZkError::NodeExists)
    );
    assert_eq!(
        create(&c.path("a"), CreateMode::Ephemeral),
        Err(ZkError::NodeExists)
    );
    create(&c.path("eph"), CreateMode::Ephemeral).unwrap();
    for mode in [
        CreateMode::Persistent,
        CreateMode::Ephemeral,
        CreateMode::EphemeralSequential,
    ] {
        assert_eq!(
            create(&c.path("eph/child"), mode),
            Err(ZkError::NoChildrenForEphemerals),
            "{mode:?}"
        );
    }
    // Invalid paths whose parent exists: the server itself answers BadArguments.
    assert_eq!(
        create("relative", CreateMode::Persistent),
        Err(ZkError::BadArguments)
    );
    assert_eq!(
        create(&format!("{}/", c.path("a")), CreateMode::Persistent),
        Err(ZkError::BadArguments)
    );
    assert_eq!(
        create(&c.path("bad\u{1}char"), CreateMode::Persistent),
        Err(ZkError::BadArguments)
    );
    assert_eq!(
        create(&c.path("."), CreateMode::Persistent),
        Err(ZkError::BadArguments)
    );
    assert_eq!(
        sorted(cl.get_children(&c.dir, None).unwrap()),
        vec!["a", "eph"]
    );
}

pub fn delete_errors_and_versions(f: &dyn Backend) {
    let c = Ctx::new(f);
    let cl = &c.client;
    let a = c.path("a");
    assert_eq!(cl.delete(&a, None), Err(ZkError::NoNode));
    assert_eq!(cl.delete(&a, Some(0)), Err(ZkError::NoNode));
    cl.create(&a, b"", CreateMode::Persistent).unwrap();
    cl.create(&format!("{a}/child"), b"", CreateMode::Persistent)
        .unwrap();
    assert_eq!(cl.delete(&a, None), Err(ZkError::NotEmpty));
    // The version is checked before emptiness.
    assert_eq!(cl.delete(&a, Some(3)), Err(ZkError::BadVersion));
    cl.delete(&format!("{a}/child"), Some(0)).unwrap();
    cl.set_data(&a, b"v1", None).unwrap();
    assert_eq!(cl.delete(&a, Some(0)), Err(ZkError::BadVersion));
    assert!(cl.exists(&a).unwrap().is_some());
    cl.delete(&a, Some(1)).unwrap();
    assert_eq!(cl.exists(&a).unwrap(), None);
    cl.create(&a, b"", CreateMode::Persistent).unwrap();
    cl.set_data(&a, b"v1", None).unwrap();
    cl.delete(&a, None).unwrap();
    assert_eq!(cl.delete(&a, None), Err(ZkError::NoNode));
}

pub fn set_data_versions_and_stat(f: &dyn Backend) {
    let c = Ctx::new(f);
    let cl = &c.client;
    let a = c.path("a");
    assert_eq!(cl.set_data(&a, b"x", None), Err(ZkError::NoNode));
    cl.create(&a, b"hello", CreateMode::Persistent).unwrap();
    let created = cl.exists(&a).unwrap().unwrap();
    assert_eq!((created.version, created.data_length), (0, 5));
    let s1 = cl.set_data(&a, b"hi", Some(0)).unwrap();
    assert_eq!((s1.version, s1.data_length), (1, 2));
    assert_eq!(s1.czxid, created.czxid);
    assert!(s1.mzxid > created.mzxid);
    assert!(s1.mtime >= created.ctime);
    assert_eq!(s1.ctime, created.ctime);
    assert_eq!(cl.set_data(&a, b"no", Some(0)), Err(ZkError::BadVersion));
    assert_eq!(cl.get_data(&a, None).unwrap(), (b"hi".to_vec(), s1));
    let s2 = cl.set_data(&a, b"", None).unwrap();
    assert_eq!((s2.version, s2.data_length), (2, 0));
    assert_eq!(cl.get_data(&a, None).unwrap(), (Vec::new(), s2));
    assert_eq!(cl.exists(&a).unwrap(), Some(s2));
}

pub fn exists_returns_stat_or_none(f: &dyn Backend) {
    let c = Ctx::new(f);
    let cl = &c.client;
    assert_eq!(cl.exists(&c.path("a")).unwrap(), None);
    assert_eq!(cl.exists(&c.path("a/b")).unwrap(), None);
    let created = cl
        .create(&c.path("a"), b"abc", CreateMode::Persistent)
        .unwrap();
    let stat = cl.exists(&created).unwrap().unwrap();
    assert_eq!(cl.get_data(&created, None).unwrap().1, stat);
}

pub fn stat_fields(f: &dyn Backend) {
    let c = Ctx::new(f);
    let cl = &c.client;
    let before = cl.exists(&c.dir).unwrap().unwrap();
    assert_eq!((before.num_children, before.cversion), (0, 0));
    cl.create(&c.path("a"), b"12345", CreateMode::Persistent)
        .unwrap();
    cl.create(&c.path("b"), b"", CreateMode::Ephemeral).unwrap();
    let a = cl.exists(&c.path("a")).unwrap().unwrap();
    let b = cl.exists(&c.path("b")).unwrap().unwrap();
    assert!(b.czxid > a.czxid, "czxid increases: {a:?} {b:?}");
    assert_eq!((a.czxid, a.mzxid, a.pzxid), (a.czxid, a.czxid, a.czxid));
    assert_eq!((a.version, a.cversion, a.aversion), (0, 0, 0));
    assert_eq!(
        (a.data_length, a.num_children, a.ephemeral_owner),
        (5, 0, 0)
    );
    assert_eq!(a.ctime, a.mtime);
    assert!(
        a.ctime > 1_500_000_000_000,
        "ctime is wall-clock ms: {}",
        a.ctime
    );
    assert_eq!(b.ephemeral_owner, cl.session().session_id().unwrap());
    let dir = cl.exists(&c.dir).unwrap().unwrap();
    assert_eq!((dir.num_children, dir.cversion), (2, 2));
    assert_eq!(dir.pzxid, b.czxid);
    assert_eq!(dir.mzxid, before.mzxid);
    cl.delete(&c.path("a"), None).unwrap();
    let dir2 = cl.exists(&c.dir).unwrap().unwrap();
    assert_eq!(
        (dir2.num_children, dir2.cversion),
        (1, 3),
        "a delete bumps cversion"
    );
    assert!(dir2.pzxid > dir.pzxid);
    // Another session sees the same stat.
    let other = f.connect();
    assert_eq!(other.exists(&c.path("b")).unwrap(), Some(b));
}

pub fn get_children_lists_names(f: &dyn Backend) {
    let c = Ctx::new(f);
    let cl = &c.client;
    assert_eq!(cl.get_children(&c.dir, None).unwrap(), Vec::<String>::new());
    assert_eq!(cl.get_children(&c.path("none"), None), Err(ZkError::NoNode));
    for name in ["b", "a", "c"] {
        cl.create(&c.path(name), b"", CreateMode::Persistent)
            .unwrap();
    }
    cl.create(&c.path("a/nested"), b"", CreateMode::Persistent)
        .unwrap();
    assert_eq!(
        sorted(cl.get_children(&c.dir, None).unwrap()),
        vec!["a", "b", "c"]
    );
    assert_eq!(cl.get_data(&c.path("none"), None), Err(ZkError::NoNode));
}
