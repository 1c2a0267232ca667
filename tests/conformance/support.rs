//! What the conformance bodies share: a test's world ([`Ctx`]: a client, a fresh directory,
//! a barrier on watch delivery) and watch events collected on a channel ([`Events`]).

use std::sync::mpsc;
use std::time::Duration;

use zk_locks::client::{EventType, Watcher};
use zk_locks::testing::harness::{Backend, TestClient};
use zk_locks::{CreateMode, SharedClient, WatchedEvent, ZkClient, ZkError};

/// How long to wait for a watch event before failing.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Watch events collected through a channel.
pub struct Events {
    tx: mpsc::Sender<WatchedEvent>,
    pub(super) rx: mpsc::Receiver<WatchedEvent>,
}

impl Events {
    /// An empty collector.
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

/// The event `event_type` on `path`, as a watcher receives it.
pub fn event(event_type: EventType, path: &str) -> WatchedEvent {
    WatchedEvent {
        event_type,
        path: path.to_string(),
    }
}

/// One test's world: a client and a fresh empty directory.
pub struct Ctx {
    /// Keeps the session's fault proxy (real backends) alive.
    _session: TestClient,
    /// The test's own client.
    pub client: SharedClient,
    /// Empty persistent directory for the test's nodes.
    pub dir: String,
    /// Node used by [`Ctx::barrier`].
    flush: String,
}

impl Ctx {
    /// A new session of `backend` and a fresh directory (with its ancestors) for the test.
    pub fn new(backend: &dyn Backend) -> Ctx {
        let session = backend.connect();
        let client = session.client.clone();
        let root = backend.root();
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
            _session: session,
            client,
            dir,
            flush,
        }
    }

    /// The path of `name` in the test's directory.
    pub fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.dir)
    }

    /// Creates `name` in the test's directory, empty and persistent; returns its path.
    pub fn persistent(&self, name: &str) -> String {
        let path = self.path(name);
        self.client
            .create(&path, b"", CreateMode::Persistent)
            .unwrap();
        path
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

/// `names`, sorted (a listing's order is the server's).
pub fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}
