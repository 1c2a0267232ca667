//! Where a test or a recipe runs, behind one trait: [`Backend`] hands out sessions
//! ([`TestClient`]: a client plus the faults that can hit it), fresh roots, the server's
//! watch count and a patience. [`Memory`] is the in-memory ensemble; the real ones are in
//! `real.rs`.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::wait::wait_connected;
use crate::client::memory::{MemoryClient, MemoryEnsemble};
use crate::error::Result;
use crate::{SharedClient, ZkClient};

/// Faults a test can cause on one client's session. Each returns once the client serves
/// again.
pub trait Faults: Send + Sync {
    /// The server expires the session; returns once the client has reported `Lost` and is
    /// connected again on a new session.
    fn expire(&self);
    /// A connection blip: the link drops and comes back with the same session (the
    /// `zookeeper` crate loses every watch; our own client restores them); returns once
    /// reconnected.
    fn blip(&self);
}

/// One session: the client, the faults that can be injected into it, and (on the in-memory
/// ensemble) the client's own fault API. Keep it alive as long as the client is used: on a
/// real server it owns the session's fault proxy, whose drop cuts the connection.
pub struct TestClient {
    /// The client, as the recipes take it.
    pub client: SharedClient,
    /// Faults aimed at this session only.
    pub faults: Arc<dyn Faults>,
    memory: Option<Arc<MemoryClient>>,
}

impl TestClient {
    /// A session of a real server: `faults` keeps whatever aims them (a fault proxy).
    pub fn real(client: SharedClient, faults: Arc<dyn Faults>) -> TestClient {
        TestClient {
            client,
            faults,
            memory: None,
        }
    }

    /// The session's id (panics before the first session is established).
    pub fn session_id(&self) -> i64 {
        self.client.session().session_id().expect("a session id")
    }

    /// A session connected straight to a server, with no fault to aim: its [`Faults`] panic.
    pub fn without_faults(client: SharedClient) -> TestClient {
        TestClient::real(client, Arc::new(NoFaults))
    }

    /// A session of the in-memory ensemble.
    pub fn memory_session(client: Arc<MemoryClient>) -> TestClient {
        TestClient {
            client: client.clone(),
            faults: Arc::new(MemoryFaults(client.clone())),
            memory: Some(client),
        }
    }

    /// The in-memory client (suspend, resume, exact faults), on the in-memory ensemble.
    pub fn memory(&self) -> Option<&MemoryClient> {
        self.memory.as_deref()
    }

    /// Ends this session as a crash of its process would, seen from a lock: on the in-memory
    /// ensemble the server expires it (the client then gets a new one); on a real server the
    /// client is closed (its ephemeral nodes go at once, as after an expiry). Returns at once.
    pub fn kill(&self) {
        match &self.memory {
            Some(memory) => memory.expire(),
            None => self.client.close(),
        }
    }
}

impl Deref for TestClient {
    type Target = dyn ZkClient;

    fn deref(&self) -> &(dyn ZkClient + 'static) {
        self.client.as_ref()
    }
}

impl AsRef<dyn ZkClient> for TestClient {
    fn as_ref(&self) -> &(dyn ZkClient + 'static) {
        self.client.as_ref()
    }
}

/// Where a test runs: the in-memory ensemble ([`Memory`]) or a real server
/// ([`Real`](super::Real)). Object-safe: test bodies take `&dyn Backend`.
pub trait Backend: Sync {
    /// A new session, as a separate process would have; an error when the ensemble cannot
    /// be reached.
    fn try_connect(&self) -> Result<TestClient>;
    /// A new session; panics when the ensemble cannot be reached (tests).
    fn connect(&self) -> TestClient {
        self.try_connect()
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.describe()))
    }
    /// A fresh path no other test uses (not created).
    fn root(&self) -> String;
    /// Watches registered on the server on paths that are `root` or below it, all sessions
    /// (a real server is shared by tests running in parallel, so counts are taken per test
    /// root).
    fn watches_under(&self, root: &str) -> usize;
    /// A deadline generous enough for this backend on a loaded machine.
    fn patience(&self) -> Duration {
        // A loaded 2-core machine can stall a thread for seconds.
        Duration::from_secs(30)
    }
    /// What this is, for a log line.
    fn describe(&self) -> String;
    /// The connect string of a real ensemble; `None` for the in-memory one.
    fn connect_string(&self) -> Option<String> {
        None
    }
}

static NEXT_ROOT: AtomicU64 = AtomicU64::new(0);

/// A path no other caller in any process gets: `/{prefix}-{process id}-{counter}`.
pub fn unique_root(prefix: &str) -> String {
    format!(
        "/{prefix}-{}-{}",
        std::process::id(),
        NEXT_ROOT.fetch_add(1, Ordering::SeqCst)
    )
}

/// The in-memory ensemble (`client::memory`): one per value, faults exact and synchronous.
pub struct Memory {
    /// The ensemble itself (server-side views, `reap_containers`, ...).
    pub ensemble: MemoryEnsemble,
}

impl Memory {
    /// A fresh ensemble.
    pub fn new() -> Memory {
        Memory {
            ensemble: MemoryEnsemble::new(),
        }
    }

    /// A new session as its in-memory client, for fault injection beyond [`Faults`].
    pub fn connect_memory(&self) -> Arc<MemoryClient> {
        self.ensemble.connect()
    }
}

impl Default for Memory {
    fn default() -> Memory {
        Memory::new()
    }
}

impl Backend for Memory {
    fn try_connect(&self) -> Result<TestClient> {
        Ok(TestClient::memory_session(self.ensemble.connect()))
    }

    fn root(&self) -> String {
        unique_root("mem")
    }

    fn watches_under(&self, _root: &str) -> usize {
        // One ensemble per test: every watch is the test's.
        self.ensemble.watch_count()
    }

    fn describe(&self) -> String {
        "the embedded in-memory ensemble".into()
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

/// The faults of a session without a fault proxy: there is nothing to aim them with.
struct NoFaults;

impl Faults for NoFaults {
    fn expire(&self) {
        panic!("no fault proxy in front of this session: use Real::shared");
    }

    fn blip(&self) {
        panic!("no fault proxy in front of this session: use Real::shared");
    }
}
