//! Test harness shared by the lock suites: one test body runs against the in-memory ensemble
//! and against a real ZooKeeper server, through the `Backend` trait.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::{ConnectionState, SharedClient, ZkClient};

/// Faults a test can cause on one client's session.
pub trait Faults: Send + Sync {
    /// The server expires the session; returns once the client has reported `Lost` and is
    /// connected again on a new session.
    fn expire(&self);
    /// A connection blip: the link drops and comes back with the same session (every watch
    /// is lost, as with the `zookeeper` crate); returns once reconnected.
    fn blip(&self);
}

/// A client plus the faults that can be injected into it.
pub struct TestClient {
    pub client: SharedClient,
    pub faults: Arc<dyn Faults>,
}

/// Where a test runs.
pub trait Backend: Sync {
    /// A new client with its own session.
    fn connect(&self) -> TestClient;
    /// A fresh path no other test uses.
    fn root(&self) -> String;
    /// Watches registered on the server on paths under `prefix`, all sessions (a real server is
    /// shared by tests running in parallel, so counts are taken per test path).
    fn watches_under(&self, prefix: &str) -> usize;
    /// A deadline generous enough for this backend.
    fn patience(&self) -> Duration;
}

static NEXT_ROOT: AtomicU64 = AtomicU64::new(0);

/// A unique path for one test.
pub fn unique_root(prefix: &str) -> String {
    format!(
        "/{prefix}-{}-{}",
        std::process::id(),
        NEXT_ROOT.fetch_add(1, Ordering::SeqCst)
    )
}

/// The in-memory ensemble.
pub struct Memory {
    pub ensemble: MemoryEnsemble,
}

impl Memory {
    pub fn new() -> Memory {
        Memory {
            ensemble: MemoryEnsemble::new(),
        }
    }

    pub fn connect_memory(&self) -> Arc<MemoryClient> {
        self.ensemble.connect()
    }
}

struct MemoryFaults(Arc<MemoryClient>);

impl Faults for MemoryFaults {
    fn expire(&self) {
        self.0.expire();
        wait_connected(self.0.as_ref());
    }

    fn blip(&self) {
        self.0.suspend();
        self.0.resume();
        wait_connected(self.0.as_ref());
    }
}

impl Backend for Memory {
    fn connect(&self) -> TestClient {
        let c = self.ensemble.connect();
        TestClient {
            client: c.clone(),
            faults: Arc::new(MemoryFaults(c)),
        }
    }

    fn root(&self) -> String {
        unique_root("mem")
    }

    fn watches_under(&self, _prefix: &str) -> usize {
        self.ensemble.watch_count() // one ensemble per test
    }

    fn patience(&self) -> Duration {
        Duration::from_secs(10)
    }
}

/// Blocks until the client is connected (any state that serves requests), or panics after 30 s.
pub fn wait_connected(c: &dyn ZkClient) {
    let s = c
        .session()
        .wait_until_connected(Some(Instant::now() + Duration::from_secs(30)));
    assert!(s.state.is_connected(), "client did not reconnect: {s:?}");
}

/// Polls `cond` until it holds (a state the test cannot be notified of, such as another
/// process's node appearing); panics with `what` after `patience`.
pub fn eventually(patience: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Children of `path` through `client` (empty when missing).
pub fn children(client: &dyn ZkClient, path: &str) -> Vec<String> {
    client.get_children(path, None).unwrap_or_default()
}

/// True when the state is Lost.
pub fn is_lost(state: ConnectionState) -> bool {
    state == ConnectionState::Lost
}
