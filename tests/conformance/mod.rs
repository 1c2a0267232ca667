//! The `ZkClient` conformance suite: one set of test bodies, run against every backend
//! (the in-memory ensemble here, a real ZooKeeper 3.8 server elsewhere), so the model stays
//! faithful to the server.
//!
//! Use from a test file:
//! ```ignore
//! mod conformance;
//! conformance_tests!(MyFactory::new());
//! ```
//! The factory expression is evaluated once per test. Bodies use only the `ZkClient` trait
//! and assert only what a real 3.8 server does (for instance: deletes do not bump the parent's
//! cversion; container deletion is asynchronous, so it is not tested here). Watch events are
//! awaited on channels with a generous timeout; "no event" is asserted after a barrier: a
//! watch on the same session fired later, since events arrive in commit order.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_locks::client::{EventType, Watcher};
use zk_locks::{ConnectionState, CreateMode, WatchedEvent, ZkClient, ZkError};

/// How long to wait for a watch event before failing.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the suite needs from a backend.
pub trait ClientFactory {
    /// A new client with its own session, connected.
    fn connect(&self) -> Arc<dyn ZkClient>;
    /// A fresh absolute path, unique per call (the suite creates it and its ancestors), so
    /// tests can share one real server.
    fn root(&self) -> String;
}

/// A unique root under `/conformance` (process id, time and a counter), for factories.
pub fn unique_root(backend: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "/conformance/{backend}-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Watch events collected through a channel.
pub struct Events {
    tx: mpsc::Sender<WatchedEvent>,
    rx: mpsc::Receiver<WatchedEvent>,
}

impl Events {
    pub fn new() -> Events {
        let (tx, rx) = mpsc::channel();
        Events { tx, rx }
    }

    /// A one-shot watcher that reports here.
    pub fn watcher(&self) -> Watcher {
        let tx = self.tx.clone();
        Box::new(move |event| {
            let _ = tx.send(event);
        })
    }

    /// The next event; fails the test after [`EVENT_TIMEOUT`].
    pub fn next(&self) -> WatchedEvent {
        self.rx
            .recv_timeout(EVENT_TIMEOUT)
            .expect("no watch event within the timeout")
    }

    /// Asserts nothing arrived (call after [`Ctx::barrier`] on the watching client).
    pub fn assert_none(&self) {
        if let Ok(event) = self.rx.try_recv() {
            panic!("unexpected watch event {event:?}");
        }
    }
}

fn event(event_type: EventType, path: &str) -> WatchedEvent {
    WatchedEvent {
        event_type,
        path: path.to_string(),
    }
}

/// One test's world: a client and a fresh empty directory.
pub struct Ctx<'a> {
    pub factory: &'a dyn ClientFactory,
    pub client: Arc<dyn ZkClient>,
    /// Empty persistent directory for the test's nodes.
    pub dir: String,
    /// Node used by [`Ctx::barrier`].
    flush: String,
}

impl<'a> Ctx<'a> {
    pub fn new(factory: &'a dyn ClientFactory) -> Ctx<'a> {
        let client = factory.connect();
        let root = factory.root();
        let mut path = String::new();
        for segment in root.split('/').filter(|s| !s.is_empty()) {
            path.push('/');
            path.push_str(segment);
            match client.create(&path, b"", CreateMode::Persistent) {
                Ok(_) | Err(ZkError::NodeExists) => {}
                Err(e) => panic!("cannot create the test root {path}: {e}"),
            }
        }
        let dir = format!("{root}/t");
        let flush = format!("{root}/flush");
        client.create(&dir, b"", CreateMode::Persistent).unwrap();
        client.create(&flush, b"", CreateMode::Persistent).unwrap();
        Ctx {
            factory,
            client,
            dir,
            flush,
        }
    }

    pub fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.dir)
    }

    /// Returns once every watch event fired so far for `client`'s session was delivered:
    /// fires a watch of its own on that session and waits for it.
    pub fn barrier(&self, client: &dyn ZkClient) {
        let events = Events::new();
        client
            .get_data(&self.flush, Some(events.watcher()))
            .unwrap();
        self.client.set_data(&self.flush, b"x", None).unwrap();
        assert_eq!(
            events.next(),
            event(EventType::NodeDataChanged, &self.flush)
        );
    }
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

pub fn connect_knows_session(f: &dyn ClientFactory) {
    let client = f.connect();
    let snapshot = client.session().snapshot();
    assert_eq!(snapshot.state, ConnectionState::Connected);
    assert!(snapshot.session_id.is_some_and(|id| id != 0));
    let other = f.connect();
    assert_ne!(other.session().session_id(), snapshot.session_id);
}

pub fn create_modes_return_paths(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let cl = &c.client;
    assert_eq!(
        cl.create(&c.path("p"), b"1", CreateMode::Persistent)
            .unwrap(),
        c.path("p")
    );
    assert_eq!(
        cl.create(&c.path("e"), b"2", CreateMode::Ephemeral)
            .unwrap(),
        c.path("e")
    );
    assert_eq!(
        cl.create(&c.path("ps-"), b"3", CreateMode::PersistentSequential)
            .unwrap(),
        c.path("ps-0000000002")
    );
    assert_eq!(
        cl.create(&c.path("es-"), b"4", CreateMode::EphemeralSequential)
            .unwrap(),
        c.path("es-0000000003")
    );
    assert_eq!(
        cl.create(&c.path("c"), b"5", CreateMode::Container)
            .unwrap(),
        c.path("c")
    );
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

pub fn sequence_numbers_follow_parent_cversion(f: &dyn ClientFactory) {
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

pub fn create_errors(f: &dyn ClientFactory) {
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

pub fn delete_errors_and_versions(f: &dyn ClientFactory) {
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

pub fn set_data_versions_and_stat(f: &dyn ClientFactory) {
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

pub fn exists_returns_stat_or_none(f: &dyn ClientFactory) {
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

pub fn stat_fields(f: &dyn ClientFactory) {
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

pub fn get_children_lists_names(f: &dyn ClientFactory) {
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

pub fn data_watch_fires_on_change(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let a = c.path("a");
    c.client.create(&a, b"", CreateMode::Persistent).unwrap();
    let watcher = f.connect();
    let events = Events::new();
    watcher.get_data(&a, Some(events.watcher())).unwrap();
    c.client.set_data(&a, b"new", None).unwrap();
    assert_eq!(events.next(), event(EventType::NodeDataChanged, &a));
}

pub fn data_watch_fires_on_delete(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let a = c.path("a");
    c.client.create(&a, b"", CreateMode::Ephemeral).unwrap();
    let events = Events::new();
    // Also a watch set by the node's own session.
    c.client.get_data(&a, Some(events.watcher())).unwrap();
    c.client.delete(&a, None).unwrap();
    assert_eq!(events.next(), event(EventType::NodeDeleted, &a));
}

pub fn child_watch_fires_on_create_and_delete(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let watcher = f.connect();
    let events = Events::new();
    assert!(watcher
        .get_children(&c.dir, Some(events.watcher()))
        .unwrap()
        .is_empty());
    c.client
        .create(&c.path("x-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    assert_eq!(events.next(), event(EventType::NodeChildrenChanged, &c.dir));
    assert_eq!(
        watcher
            .get_children(&c.dir, Some(events.watcher()))
            .unwrap(),
        vec!["x-0000000000"]
    );
    // Data changes of a child do not fire a child watch.
    c.client
        .set_data(&c.path("x-0000000000"), b"d", None)
        .unwrap();
    c.client.delete(&c.path("x-0000000000"), None).unwrap();
    assert_eq!(events.next(), event(EventType::NodeChildrenChanged, &c.dir));
    c.barrier(watcher.as_ref());
    events.assert_none();
}

pub fn child_watch_fires_on_parent_delete(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let parent = c.path("parent");
    c.client
        .create(&parent, b"", CreateMode::Persistent)
        .unwrap();
    let watcher = f.connect();
    let children = Events::new();
    let data = Events::new();
    let dir_children = Events::new();
    watcher
        .get_children(&parent, Some(children.watcher()))
        .unwrap();
    watcher.get_data(&parent, Some(data.watcher())).unwrap();
    watcher
        .get_children(&c.dir, Some(dir_children.watcher()))
        .unwrap();
    c.client.delete(&parent, None).unwrap();
    assert_eq!(children.next(), event(EventType::NodeDeleted, &parent));
    assert_eq!(data.next(), event(EventType::NodeDeleted, &parent));
    assert_eq!(
        dir_children.next(),
        event(EventType::NodeChildrenChanged, &c.dir)
    );
    c.barrier(watcher.as_ref());
    children.assert_none();
    data.assert_none();
}

pub fn watches_are_one_shot(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let a = c.path("a");
    c.client.create(&a, b"", CreateMode::Persistent).unwrap();
    let watcher = f.connect();
    let data = Events::new();
    let children = Events::new();
    watcher.get_data(&a, Some(data.watcher())).unwrap();
    watcher.get_children(&a, Some(children.watcher())).unwrap();
    c.client.set_data(&a, b"1", None).unwrap();
    c.client
        .create(&format!("{a}/k"), b"", CreateMode::Persistent)
        .unwrap();
    assert_eq!(data.next(), event(EventType::NodeDataChanged, &a));
    assert_eq!(children.next(), event(EventType::NodeChildrenChanged, &a));
    c.client.set_data(&a, b"2", None).unwrap();
    c.client.delete(&format!("{a}/k"), None).unwrap();
    c.client.delete(&a, None).unwrap();
    c.barrier(watcher.as_ref());
    data.assert_none();
    children.assert_none();
}

pub fn no_watch_on_no_node(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let a = c.path("a");
    let watcher = f.connect();
    let events = Events::new();
    assert_eq!(
        watcher.get_data(&a, Some(events.watcher())),
        Err(ZkError::NoNode)
    );
    assert_eq!(
        watcher.get_children(&a, Some(events.watcher())),
        Err(ZkError::NoNode)
    );
    c.client.create(&a, b"", CreateMode::Persistent).unwrap();
    c.client
        .create(&format!("{a}/k"), b"", CreateMode::Persistent)
        .unwrap();
    c.client.set_data(&a, b"1", None).unwrap();
    c.client.delete(&format!("{a}/k"), None).unwrap();
    c.client.delete(&a, None).unwrap();
    c.barrier(watcher.as_ref());
    events.assert_none();
}

pub fn several_watchers_each_fire_once(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let a = c.path("a");
    c.client.create(&a, b"", CreateMode::Persistent).unwrap();
    let (w1, w2) = (f.connect(), f.connect());
    let (e1, e2) = (Events::new(), Events::new());
    w1.get_data(&a, Some(e1.watcher())).unwrap();
    w2.get_data(&a, Some(e2.watcher())).unwrap();
    c.client.set_data(&a, b"1", None).unwrap();
    assert_eq!(e1.next(), event(EventType::NodeDataChanged, &a));
    assert_eq!(e2.next(), event(EventType::NodeDataChanged, &a));
    c.client.set_data(&a, b"2", None).unwrap();
    c.barrier(w1.as_ref());
    c.barrier(w2.as_ref());
    e1.assert_none();
    e2.assert_none();
}

pub fn close_removes_ephemerals_and_notifies_others(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let owner = f.connect();
    let lock = owner
        .create(&c.path("lock-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    let plain = owner
        .create(&c.path("e"), b"", CreateMode::Ephemeral)
        .unwrap();
    owner
        .create(&c.path("kept"), b"", CreateMode::Persistent)
        .unwrap();
    let data = Events::new();
    let children = Events::new();
    c.client.get_data(&lock, Some(data.watcher())).unwrap();
    c.client
        .get_children(&c.dir, Some(children.watcher()))
        .unwrap();
    owner.close();
    assert_eq!(data.next(), event(EventType::NodeDeleted, &lock));
    assert_eq!(
        children.next(),
        event(EventType::NodeChildrenChanged, &c.dir)
    );
    assert_eq!(c.client.exists(&lock).unwrap(), None);
    assert_eq!(c.client.exists(&plain).unwrap(), None);
    assert_eq!(
        sorted(c.client.get_children(&c.dir, None).unwrap()),
        vec!["kept"]
    );
    assert_eq!(owner.session().state(), ConnectionState::Closed);
    assert_eq!(owner.exists(&c.dir), Err(ZkError::Closed));
    assert_eq!(
        owner.create(&c.path("x"), b"", CreateMode::Persistent),
        Err(ZkError::Closed)
    );
    owner.close();
    assert_eq!(owner.session().state(), ConnectionState::Closed);
}

pub fn closed_client_drops_its_watches(f: &dyn ClientFactory) {
    let c = Ctx::new(f);
    let a = c.path("a");
    c.client.create(&a, b"", CreateMode::Persistent).unwrap();
    let watcher = f.connect();
    let events = Events::new();
    watcher.get_data(&a, Some(events.watcher())).unwrap();
    watcher.close();
    c.client.set_data(&a, b"1", None).unwrap();
    // A watcher of the live client, set after the change, proves the change committed.
    c.barrier(c.client.as_ref());
    assert!(events.rx.recv_timeout(Duration::from_millis(200)).is_err());
}

/// Expands to one `#[test]` per behaviour, each evaluating `$factory` (a `ClientFactory`).
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@each $factory;
            connect_knows_session,
            create_modes_return_paths,
            sequence_numbers_follow_parent_cversion,
            create_errors,
            delete_errors_and_versions,
            set_data_versions_and_stat,
            exists_returns_stat_or_none,
            stat_fields,
            get_children_lists_names,
            data_watch_fires_on_change,
            data_watch_fires_on_delete,
            child_watch_fires_on_create_and_delete,
            child_watch_fires_on_parent_delete,
            watches_are_one_shot,
            no_watch_on_no_node,
            several_watchers_each_fire_once,
            close_removes_ephemerals_and_notifies_others,
            closed_client_drops_its_watches,
        );
    };
    (@each $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                // `None`: no server here (a skip, or a failure under ZK_LOCKS_REQUIRE_SERVER=1).
                let Some(factory) = $factory else { return };
                $crate::conformance::$name(&factory);
            }
        )*
    };
}
