//! The in-memory ensemble's own behaviour (not the locks'): its fault injection and session
//! transitions (`faults`), event delivery and request hooks (`delivery`), its model of the
//! server's data tree, containers, sequence numbers and counters (`model`), and its
//! transactions (`multi`).

mod delivery;
mod faults;
mod model;
mod multi;

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::client::{EventType, Watcher};
use zk_locks::{ConnectionState, CreateMode, WatchedEvent, ZkClient, ZkError};

pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) type Transitions = Arc<Mutex<Vec<(ConnectionState, Option<i64>)>>>;

/// Records every transition of a client's session.
pub(crate) fn record(client: &MemoryClient) -> Transitions {
    let log: Transitions = Arc::default();
    let sink = log.clone();
    client.session().subscribe(move |s| {
        sink.lock().unwrap().push((s.state, s.session_id));
    });
    log
}

pub(crate) fn states(log: &Transitions) -> Vec<ConnectionState> {
    log.lock().unwrap().iter().map(|(s, _)| *s).collect()
}

pub(crate) struct Events {
    tx: mpsc::Sender<WatchedEvent>,
    rx: mpsc::Receiver<WatchedEvent>,
}

impl Events {
    pub(crate) fn new() -> Events {
        let (tx, rx) = mpsc::channel();
        Events { tx, rx }
    }

    pub(crate) fn watcher(&self) -> Watcher {
        let tx = self.tx.clone();
        Box::new(move |e| {
            let _ = tx.send(e);
        })
    }

    pub(crate) fn next(&self) -> WatchedEvent {
        self.rx.recv_timeout(TIMEOUT).expect("no event in time")
    }

    pub(crate) fn assert_none(&self) {
        if let Ok(e) = self.rx.try_recv() {
            panic!("unexpected event {e:?}");
        }
    }
}

pub(crate) fn ev(event_type: EventType, path: &str) -> WatchedEvent {
    WatchedEvent {
        event_type,
        path: path.to_string(),
    }
}

/// Returns once every event fired so far for `client` was delivered (events are in order).
pub(crate) fn barrier(ensemble: &MemoryEnsemble, client: &MemoryClient) {
    let writer = ensemble.connect();
    match writer.create("/barrier", b"", CreateMode::Persistent) {
        Ok(_) | Err(ZkError::NodeExists) => {}
        Err(e) => panic!("{e}"),
    }
    let events = Events::new();
    client.get_data("/barrier", Some(events.watcher())).unwrap();
    writer.set_data("/barrier", b"", None).unwrap();
    assert_eq!(events.next().path, "/barrier");
}

pub(crate) fn setup() -> (MemoryEnsemble, Arc<MemoryClient>) {
    let ensemble = MemoryEnsemble::new();
    let client = ensemble.connect();
    client.create("/d", b"", CreateMode::Persistent).unwrap();
    (ensemble, client)
}
