//! Cooperative revocation, as Curator's: anyone may ask a holder to release by writing
//! `__REVOKE__` to its node; a holder that made its lock revocable gets its listener called
//! and is expected to release. Wire-compatible in both directions with Curator's `Revoker`.

use std::sync::Arc;

use crate::client::{EventType, SharedClient, ZkError};
use crate::error::{Error, Result};

use super::rearm::{spawn, OnReconnect};

/// The exact bytes Curator writes to ask for revocation.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Asks holders to release (Curator's `Revoker`).
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::Revoker;
/// use zk_locks::{InterProcessLock, InterProcessMutex};
///
/// let ensemble = MemoryEnsemble::new();
/// let holder = InterProcessMutex::new(ensemble.connect(), "/locks/batch")?;
/// let (asked, revoked) = mpsc::channel();
/// holder.make_revocable(move || { let _ = asked.send(()); }); // should lead to a release
/// let guard = holder.lock()?;
///
/// let other: zk_locks::SharedClient = ensemble.connect(); // any session may ask
/// let nodes = holder.participant_nodes()?;
/// Revoker::attempt_revoke(&other, &nodes[0])?;
/// revoked.recv_timeout(Duration::from_secs(5)).expect("the holder was asked");
/// drop(guard);
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Revoker;

impl Revoker {
    /// Writes `__REVOKE__` to `node_path` (from `participant_nodes()`). A node that is already
    /// gone is not an error.
    pub fn attempt_revoke(client: &SharedClient, node_path: &str) -> Result<()> {
        crate::paths::validate_path(node_path)?;
        match client.set_data(node_path, REVOKE_MESSAGE, None) {
            Ok(_) | Err(ZkError::NoNode) => Ok(()),
            Err(code) => Err(Error::zk("set_data", node_path, code)),
        }
    }
}

/// The listener called when a revocation request arrives.
pub(crate) type RevocationListener = Arc<dyn Fn() + Send + Sync>;

/// Keeps a revocation watch on a held node for as long as it lives: armed now, and armed again
/// after every reconnect. Dropping it stops the re-arming.
#[derive(Debug)]
pub(crate) struct RevocationWatch {
    _rearm: OnReconnect,
}

impl RevocationWatch {
    /// Arms the watch on `node_path` (on the caller's thread, or on a thread of its own when
    /// `in_background`: a timed acquire past its deadline starts no request) and re-arms it
    /// after each reconnect.
    pub(crate) fn start(
        client: SharedClient,
        node_path: String,
        listener: RevocationListener,
        in_background: bool,
    ) -> Self {
        let (c, p, l) = (client.clone(), node_path.clone(), listener.clone());
        let rearm = OnReconnect::start(
            client.clone(),
            THREAD_NAME,
            Arc::new(move || watch_for_revocation(c.clone(), p.clone(), l.clone())),
        );
        match in_background {
            true => spawn(THREAD_NAME, move || {
                watch_for_revocation(client, node_path, listener)
            }),
            false => watch_for_revocation(client, node_path, listener),
        }
        RevocationWatch { _rearm: rearm }
    }
}

const THREAD_NAME: &str = "zk-locks-revocation";

/// Watches `node_path` for `__REVOKE__`. The watch callback only hands off to a short-lived
/// thread, which re-reads the data (watch callbacks must never call the client) and re-arms
/// the watch until the node is gone.
fn watch_for_revocation(client: SharedClient, node_path: String, listener: RevocationListener) {
    let c = client.clone();
    let p = node_path.clone();
    let l = listener.clone();
    let watcher = Box::new(move |event: crate::client::WatchedEvent| {
        if event.event_type == EventType::NodeDeleted {
            return;
        }
        spawn(THREAD_NAME, move || watch_for_revocation(c, p, l));
    });
    match client.get_data(&node_path, Some(watcher)) {
        Ok((data, _)) if data == REVOKE_MESSAGE => {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener())).is_err() {
                log::error!("revocation listener for {node_path} panicked");
            }
        }
        Ok(_) | Err(ZkError::NoNode) => {}
        Err(code) => log::warn!("revocation watch on {node_path}: {code}"),
    }
}
