//! Fenced writes: `LockGuard::fenced_multi` and `Lease::fenced_multi` commit only while the
//! hold's nodes exist (a `check` of each, then the caller's operations, one transaction).
//! On the memory backend: ok while held; refused after a deletion, after a lost session
//! (without a request), after a session changed under a client that does not know yet (the
//! server's check decides); a `Suspect` hold writes through; a multi-lock checks every node;
//! the read/write lock checks its own node; a caller's failing operation is its own error.
//! On a real server through our own client: a stale holder's write refused after a real
//! expiry, and after its node was deleted.

#[macro_use]
mod common;

use common::{unique_root, Backend, Memory, Real, REAL_SESSION_TIMEOUT};
use zk_locks::client::memory::Fault;
use zk_locks::client::{MultiOp, MultiResult, Op};
use zk_locks::locks::{
    InterProcessMultiLock, InterProcessReadWriteLock, InterProcessSemaphoreV2, LockState,
};
use zk_locks::{CreateMode, Error, InterProcessLock, InterProcessMutex, ZkClient, ZkError};

fn write(config: &str, value: &str) -> [MultiOp; 1] {
    [MultiOp::SetData {
        path: config.into(),
        data: value.as_bytes().to_vec(),
        version: -1,
    }]
}

fn value(client: &dyn ZkClient, config: &str) -> String {
    String::from_utf8(client.get_data(config, None).unwrap().0).unwrap()
}

fn assert_lost(result: zk_locks::Result<Vec<MultiResult>>, node: &str) {
    match result {
        Err(Error::LockLost { path, node: lost }) => {
            assert_eq!(lost, node);
            assert_eq!(Some(path.as_str()), zk_locks::paths::parent(node));
        }
        other => panic!("expected LockLost for {node}, got {other:?}"),
    }
}

/// A config node and a mutex beside it, in a fresh root.
fn setup(b: &dyn Backend, client: &dyn ZkClient) -> (String, String) {
    let root = b.root();
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let config = format!("{root}/config");
    client
        .create(&config, b"v0", CreateMode::Persistent)
        .unwrap();
    (config, format!("{root}/lock"))
}

#[test]
fn a_held_guard_writes_in_one_request() {
    let b = Memory::new();
    let c = b.connect();
    let (config, lock) = setup(&b, &*c);
    let m = InterProcessMutex::new(c.client.clone(), &lock).unwrap();
    let g = m.lock().unwrap();
    let memory = c.memory().unwrap();
    memory.reset_counters();
    let results = g.fenced_multi(&write(&config, "v1")).unwrap();
    assert!(matches!(&results[..], [MultiResult::SetData(stat)] if stat.version == 1));
    let counters = memory.counters();
    assert_eq!((counters.multi, counters.requests()), (1, 1));
    assert_eq!(value(&*c, &config), "v1");
    // A failing operation of the caller's is its own error; the lock is still held.
    let stale_version = [MultiOp::SetData {
        path: config.clone(),
        data: b"v2".to_vec(),
        version: 0,
    }];
    match g.fenced_multi(&stale_version) {
        Err(Error::Zk { op, path, code }) => {
            assert_eq!(
                (op, path.as_str(), code),
                ("multi", config.as_str(), ZkError::BadVersion)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(value(&*c, &config), "v1");
    assert_eq!(g.state(), LockState::Held);
}

#[test]
fn a_deleted_node_refuses_the_write_and_the_guard_turns_lost() {
    let b = Memory::new();
    let (c, operator) = (b.connect(), b.connect());
    let (config, lock) = setup(&b, &*c);
    let m = InterProcessMutex::new(c.client.clone(), &lock).unwrap();
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    operator.delete(&node, None).unwrap();
    // Nobody waited on the guard: it still believes it holds.
    assert_eq!(g.state(), LockState::Held);
    assert_lost(g.fenced_multi(&write(&config, "stale")), &node);
    assert_eq!(value(&*c, &config), "v0");
    assert_eq!(g.state(), LockState::Lost);
}

#[test]
fn a_lost_session_refuses_the_write_without_a_request() {
    let b = Memory::new();
    let c = b.connect();
    let (config, lock) = setup(&b, &*c);
    let m = InterProcessMutex::new(c.client.clone(), &lock).unwrap();
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    c.faults.expire();
    let memory = c.memory().unwrap();
    memory.reset_counters();
    assert_lost(g.fenced_multi(&write(&config, "stale")), &node);
    assert_eq!(memory.counters().requests(), 0);
    assert_eq!(value(&*c, &config), "v0");
}

#[test]
fn a_session_changed_unknown_to_the_client_is_caught_by_the_check() {
    let b = Memory::new();
    let c = b.connect();
    let (config, lock) = setup(&b, &*c);
    let m = InterProcessMutex::new(c.client.clone(), &lock).unwrap();
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    // The session ends and the client runs on in a new one without reporting it: the guard
    // believes it holds, the server knows better.
    let memory = c.memory().unwrap();
    memory.inject(Fault::in_new_session(Op::Exists));
    c.exists("/").unwrap();
    assert_eq!(g.state(), LockState::Held);
    assert_lost(g.fenced_multi(&write(&config, "stale")), &node);
    assert_eq!(value(&*c, &config), "v0");
}

#[test]
fn a_suspect_guard_writes_through_and_the_check_decides() {
    let b = Memory::new();
    let (c, operator) = (b.connect(), b.connect());
    let (config, lock) = setup(&b, &*c);
    let m = InterProcessMutex::new(c.client.clone(), &lock).unwrap();
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    let memory = c.memory().unwrap();
    memory.suspend();
    assert_eq!(g.state(), LockState::Suspect);
    memory.reset_counters();
    let link_down = g.fenced_multi(&write(&config, "v1")).unwrap_err();
    assert_eq!(
        link_down.zk_code(),
        Some(ZkError::ConnectionLoss),
        "{link_down}"
    );
    assert!(link_down.is_retryable());
    assert_eq!(memory.counters().multi, 1, "sent, not refused");
    memory.resume();
    // Back in the same session, not re-read yet: the check says it is still ours.
    g.fenced_multi(&write(&config, "v1")).unwrap();
    assert_eq!(value(&*c, &config), "v1");
    // The node is deleted while the link is down: after the reconnect the check refuses.
    memory.suspend();
    operator.delete(&node, None).unwrap();
    memory.resume();
    assert_lost(g.fenced_multi(&write(&config, "stale")), &node);
    assert_eq!(value(&*c, &config), "v1");
}

#[test]
fn a_multi_lock_checks_every_node() {
    let b = Memory::new();
    let (c, operator) = (b.connect(), b.connect());
    let (config, lock) = setup(&b, &*c);
    let (a, z) = (format!("{lock}-a"), format!("{lock}-z"));
    let both = InterProcessMultiLock::from_paths(c.client.clone(), &[&a, &z]).unwrap();
    let g = both.lock().unwrap();
    let memory = c.memory().unwrap();
    memory.reset_counters();
    g.fenced_multi(&write(&config, "v1")).unwrap();
    assert_eq!(memory.counters().requests(), 1);
    let second = g.nodes()[1].path().to_string();
    operator.delete(&second, None).unwrap();
    assert_lost(g.fenced_multi(&write(&config, "stale")), &second);
    assert_eq!(value(&*c, &config), "v1");
}

#[test]
fn read_and_write_guards_check_their_own_node() {
    let b = Memory::new();
    let (c, operator) = (b.connect(), b.connect());
    let (config, lock) = setup(&b, &*c);
    let rw = InterProcessReadWriteLock::new(c.client.clone(), &lock).unwrap();
    {
        let w = rw.write_lock().lock().unwrap();
        assert!(w.node_path().unwrap().contains("__WRIT__"));
        w.fenced_multi(&write(&config, "by the writer")).unwrap();
    }
    let r = rw.read_lock().lock().unwrap();
    let node = r.node_path().unwrap().to_string();
    assert!(node.contains("__READ__"));
    r.fenced_multi(&write(&config, "by a reader")).unwrap();
    operator.delete(&node, None).unwrap();
    assert_lost(r.fenced_multi(&write(&config, "stale")), &node);
    assert_eq!(value(&*c, &config), "by a reader");
}

#[test]
fn a_lease_writes_while_held_and_is_refused_once_lost() {
    let b = Memory::new();
    let c = b.connect();
    let (config, lock) = setup(&b, &*c);
    let sem = InterProcessSemaphoreV2::new(c.client.clone(), &lock, 2).unwrap();
    let lease = sem.acquire().unwrap();
    lease.fenced_multi(&write(&config, "v1")).unwrap();
    let node = lease.node_path().to_string();
    c.faults.expire();
    assert_lost(lease.fenced_multi(&write(&config, "stale")), &node);
    assert_eq!(value(&*c, &config), "v1");
}

fn assert_refused_up_front(result: zk_locks::Result<Vec<MultiResult>>, why: &str) {
    match result {
        Err(e @ Error::InvalidArgument { name: "client", .. }) => {
            assert!(e.to_string().contains(why), "{e}");
            assert!(!e.is_retryable());
        }
        other => panic!("expected InvalidArgument(client) saying {why:?}, got {other:?}"),
    }
}

/// A multi-lock over two clients of one ensemble checks each node where it is: one request,
/// and a deletion of the second client's node refuses the write. Over clients of two
/// ensembles the write is refused up front (no request) and the guard stays held.
#[test]
fn a_multi_lock_across_clients_checks_each_node_where_it_is() {
    let b = Memory::new();
    let (c, d, operator) = (b.connect(), b.connect(), b.connect());
    let (config, lock) = setup(&b, &*c);
    let (a, z) = (format!("{lock}-a"), format!("{lock}-z"));
    let across = |second: zk_locks::SharedClient| {
        let locks: Vec<Box<dyn InterProcessLock>> = vec![
            Box::new(InterProcessMutex::new(c.client.clone(), &a).unwrap()),
            Box::new(InterProcessMutex::new(second, &z).unwrap()),
        ];
        InterProcessMultiLock::new(locks).unwrap()
    };

    let other = Memory::new().connect();
    let two_ensembles = across(other.client.clone());
    let g = two_ensembles.lock().unwrap();
    let memory = c.memory().unwrap();
    memory.reset_counters();
    assert_refused_up_front(g.fenced_multi(&write(&config, "v1")), "ensemble");
    assert_eq!(memory.counters().requests(), 0);
    assert_eq!(g.state(), LockState::Held);
    assert_eq!(value(&*c, &config), "v0");
    drop(g);

    let one_ensemble = across(d.client.clone());
    let g = one_ensemble.lock().unwrap();
    memory.reset_counters();
    g.fenced_multi(&write(&config, "v1")).unwrap();
    assert_eq!(memory.counters().requests(), 1);
    let second = g.nodes()[1].path().to_string();
    operator.delete(&second, None).unwrap();
    assert_lost(g.fenced_multi(&write(&config, "stale")), &second);
    assert_eq!(value(&*c, &config), "v1");
}

/// Two clients of one real server on the chroots `/app1` and `/app2`: neither can name the
/// other's node, so a fenced write over both is refused up front and both locks stay held
/// (it was `LockLost`, and the guard `Lost`, while both were held). With a first client
/// whose chroot holds both (the test's root), each node is checked at its path there.
#[test]
fn a_multi_lock_across_chroots_on_a_real_server() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let root = unique_root("fenced-chroots");
    let connect = |chroot: &str| -> zk_locks::SharedClient {
        let hosts = format!("{}{root}{chroot}", server.connect_string());
        zk_locks::client::native::NativeClient::connect(&hosts, REAL_SESSION_TIMEOUT).unwrap()
    };
    let (app1, app2, whole) = (connect("/app1"), connect("/app2"), connect(""));
    whole
        .create("/config", b"v0", CreateMode::Persistent)
        .unwrap();
    let mutex = |client: &zk_locks::SharedClient, path: &str| -> Box<dyn InterProcessLock> {
        Box::new(InterProcessMutex::new(client.clone(), path).unwrap())
    };

    let apart =
        InterProcessMultiLock::new(vec![mutex(&app1, "/locks/a"), mutex(&app2, "/locks/b")])
            .unwrap();
    let g = apart.lock().unwrap();
    let ops = write("/config", "v1");
    assert_refused_up_front(g.fenced_multi(&ops), "outside the first client's chroot");
    assert_eq!(g.state(), LockState::Held);
    for (node, client) in g.nodes().iter().zip([&app1, &app2]) {
        assert!(client.exists(node.path()).unwrap().is_some());
    }
    assert_eq!(value(&*whole, "/config"), "v0");
    drop(g);

    let under_one = InterProcessMultiLock::new(vec![
        mutex(&whole, "/locks/w"),
        mutex(&app1, "/locks/a"),
        mutex(&app2, "/locks/b"),
    ])
    .unwrap();
    let g = under_one.lock().unwrap();
    g.fenced_multi(&write("/config", "v1")).unwrap();
    assert_eq!(value(&*whole, "/config"), "v1");
    let on_app2 = g.nodes()[2].path().to_string();
    app2.delete(&on_app2, None).unwrap();
    assert_lost(g.fenced_multi(&write("/config", "stale")), &on_app2);
    assert_eq!(value(&*whole, "/config"), "v1");
    drop(g);
    for client in [app1, app2, whole] {
        client.close();
    }
}

/// On a real server, through our own client: B takes over once A's session really expired
/// (A's write refused, without a request), and once A's node was deleted (A does not know:
/// the server's check refuses).
#[test]
fn a_stale_holder_is_refused_on_a_real_server() {
    let Some(b) = Real::native() else {
        return;
    };
    let (a, bee, operator) = (b.connect(), b.connect(), b.connect());
    let (config, lock) = setup(&b, &*a);
    let lock_a = InterProcessMutex::new(a.client.clone(), &lock).unwrap();
    let lock_b = InterProcessMutex::new(bee.client.clone(), &lock).unwrap();

    let guard_a = lock_a.lock().unwrap();
    guard_a.fenced_multi(&write(&config, "A")).unwrap();
    let node_a = guard_a.node_path().unwrap().to_string();
    a.faults.expire(); // returns once A reported Lost and is connected again
    let guard_b = lock_b.lock().unwrap();
    guard_b.fenced_multi(&write(&config, "B")).unwrap();
    assert_lost(guard_a.fenced_multi(&write(&config, "stale A")), &node_a);
    assert_eq!(value(&*operator, &config), "B");
    drop(guard_a);

    let node_b = guard_b.node_path().unwrap().to_string();
    operator.delete(&node_b, None).unwrap();
    assert_lost(guard_b.fenced_multi(&write(&config, "stale B")), &node_b);
    assert_eq!(value(&*operator, &config), "B");
    assert_eq!(guard_b.state(), LockState::Lost);
}

/// A client without transactions (the `zookeeper`-crate backend's kind): the trait's
/// defaults for `multi` and `has_multi`, everything else delegated.
struct NoTransactions(std::sync::Arc<zk_locks::client::memory::MemoryClient>);

impl ZkClient for NoTransactions {
    fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> zk_locks::client::ZkResult<String> {
        self.0.create(path, data, mode)
    }
    fn delete(&self, path: &str, version: Option<i32>) -> zk_locks::client::ZkResult<()> {
        self.0.delete(path, version)
    }
    fn exists(&self, path: &str) -> zk_locks::client::ZkResult<Option<zk_locks::Stat>> {
        self.0.exists(path)
    }
    fn get_data(
        &self,
        path: &str,
        watcher: Option<zk_locks::client::Watcher>,
    ) -> zk_locks::client::ZkResult<(Vec<u8>, zk_locks::Stat)> {
        self.0.get_data(path, watcher)
    }
    fn get_children(
        &self,
        path: &str,
        watcher: Option<zk_locks::client::Watcher>,
    ) -> zk_locks::client::ZkResult<Vec<String>> {
        self.0.get_children(path, watcher)
    }
    fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> zk_locks::client::ZkResult<zk_locks::Stat> {
        self.0.set_data(path, data, version)
    }
    fn session(&self) -> &zk_locks::Session {
        self.0.session()
    }
    fn close(&self) {
        self.0.close()
    }
}

#[test]
fn a_backend_without_transactions_refuses_without_a_request() {
    let b = Memory::new();
    let memory = b.connect_memory();
    let (config, lock) = setup(&b, &*memory);
    let client: zk_locks::SharedClient = std::sync::Arc::new(NoTransactions(memory.clone()));
    assert!(!client.has_multi());
    let m = InterProcessMutex::new(client, &lock).unwrap();
    let g = m.lock().unwrap();
    memory.reset_counters();
    let refused = g.fenced_multi(&write(&config, "v1")).unwrap_err();
    assert!(
        matches!(&refused, Error::InvalidArgument { name: "client", .. }),
        "{refused}"
    );
    assert!(!refused.is_retryable());
    assert_eq!(memory.counters().requests(), 0);
    assert_eq!(value(&*memory, &config), "v0");
}

/// An owned guard fences as the borrowed one does: committed while held (here from another
/// thread than the one that took it), refused once its node is gone.
#[test]
fn an_owned_guard_fences_its_writes() {
    let b = Memory::new();
    let c = b.connect();
    let (config, lock) = setup(&b, &*c);
    let m = std::sync::Arc::new(InterProcessMutex::new(c.client.clone(), &lock).unwrap());
    let g = m.lock_owned().unwrap();
    let ops = write(&config, "owned");
    let g = std::thread::spawn(move || {
        g.fenced_multi(&ops).unwrap();
        g
    })
    .join()
    .unwrap();
    assert_eq!(value(&*c.client, &config), "owned");
    let node = g.node_path().unwrap().to_string();
    c.client.delete(&node, None).unwrap();
    assert_lost(g.fenced_multi(&write(&config, "stale")), &node);
    assert_eq!(value(&*c.client, &config), "owned");
}
