//! Who is in a lock's queue and who holds it: [`Participant`], and the one listing that every
//! recipe's `participants()` runs. The holder flag is the recipe's own
//! [`LockDriver::holds`], the rule the engine grants by, so a listing never disagrees with
//! the lock about who holds it.

use crate::client::{Request, Response, SharedClient, ZkError};
use crate::error::{Error, Result};
use crate::paths;

use super::driver::{sort_children, LockDriver};
use super::layout::LockLayout;

// The kind of node is named by the observer's events too: it lives beneath the client and
// the locks (`primitives/observer.rs`).
pub use crate::primitives::observer::ParticipantKind;

/// One node in a lock's queue, as `participants()` lists it: every recipe has one
/// ([`super::InterProcessMutex::participants`], [`super::InterProcessReadWriteLock::participants`]
/// and its sides', [`super::InterProcessSemaphoreV2::participants`],
/// [`super::InterProcessSemaphoreMutex::participants`]). The queue is in the order every
/// contender sorts it, and `is_holder` is the recipe's own rule (the rule the recipe grants by).
///
/// ```
/// use std::sync::Arc;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::{InterProcessLock, InterProcessMutex, ParticipantKind};
///
/// let ensemble = MemoryEnsemble::new();
/// let holder = InterProcessMutex::new(ensemble.connect(), "/locks/report")?.with_data("host-a 17");
/// let waiter = Arc::new(InterProcessMutex::new(ensemble.connect(), "/locks/report")?);
/// let guard = holder.lock()?;
/// let waiting = {
///     let waiter = waiter.clone();
///     std::thread::spawn(move || waiter.lock().map(drop))
/// };
/// // Another process would simply look; here we wait until the waiter has queued.
/// while holder.participants()?.len() < 2 {
///     std::thread::yield_now();
/// }
/// let queue = holder.participants()?;
/// assert_eq!(queue[0].path, guard.node_path().unwrap());
/// assert!(queue[0].is_holder && !queue[1].is_holder);
/// assert_eq!(queue[0].kind, ParticipantKind::Mutex);
/// assert_eq!(queue[0].data, b"host-a 17");
/// drop(guard);
/// waiting.join().unwrap()?;
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Participant {
    /// The node's name in its directory (`_c_<uuid>-lock-0000000007`).
    pub name: String,
    /// The node's full path.
    pub path: String,
    /// Which kind of node it is.
    pub kind: ParticipantKind,
    /// The node's data: who queued (zk-locks stores `<host> <pid>` unless told otherwise,
    /// Curator the participant's IP address; a revocable lock's node is empty).
    pub data: Vec<u8>,
    /// True when the recipe's rule grants this node the lock (or a lease) in this listing.
    pub is_holder: bool,
    /// The session that owns the node (its `ephemeralOwner`; 0 for a node that is not
    /// ephemeral). ZooKeeper prints it in hex: `format!("0x{:x}", p.session_id)`.
    pub session_id: i64,
}

impl Participant {
    /// The node's data as text: in a leader election, the participant id (Curator's
    /// `Participant.getId()`, which decodes it as UTF-8; bytes that are not are replaced).
    pub fn id(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.data)
    }
}

/// The queue of the lock directory `dir`: its children sorted by `order`, each with its data
/// (read in one pipeline), and its kind and holder flag from `rule(sorted, index)`.
///
/// A node deleted between the listing and the read of its data has left the queue: it is
/// left out, and the flags are decided over the nodes that remain (as Curator's
/// `LeaderSelector.getParticipants` makes the first remaining node the leader). A missing
/// directory is an empty queue. Nodes of another recipe (`LockLayout::of_child`) are left
/// out.
pub(crate) fn list(
    client: &SharedClient,
    dir: &str,
    order: &dyn LockDriver,
    rule: impl Fn(&[String], usize) -> (ParticipantKind, bool),
) -> Result<Vec<Participant>> {
    let mut children = match client.get_children(dir, None) {
        Ok(children) => children,
        Err(ZkError::NoNode) => return Ok(Vec::new()),
        Err(code) => return Err(Error::zk("get_children", dir, code)),
    };
    // Each node is listed by its own recipe: a node of another kind in the directory is not
    // this recipe's participant (and is refused by ours, or refuses ours: `layout`).
    if let Some(own) = LockLayout::of_child(order.lock_name()) {
        children.retain(|c| LockLayout::of_child(c).is_none_or(|kind| kind == own));
    }
    sort_children(order, &mut children);
    let reads: Vec<Request> = children
        .iter()
        .map(|name| Request::GetData {
            path: paths::join(dir, name),
        })
        .collect();
    let mut present = Vec::with_capacity(children.len());
    let mut data = Vec::with_capacity(children.len());
    for (name, reply) in children.into_iter().zip(client.pipeline(&reads)) {
        match reply {
            Ok(Response::GetData(bytes, stat)) => {
                present.push(name);
                data.push((bytes, stat.ephemeral_owner));
            }
            Ok(other) => {
                let path = paths::join(dir, &name);
                log::warn!("get_data {path} answered {other:?}");
                return Err(Error::zk("get_data", path, ZkError::MarshallingError));
            }
            Err(ZkError::NoNode) => {}
            Err(code) => return Err(Error::zk("get_data", paths::join(dir, &name), code)),
        }
    }
    let participants = data
        .into_iter()
        .enumerate()
        .map(|(index, (data, session_id))| {
            let (kind, is_holder) = rule(&present, index);
            let name = present[index].clone();
            Participant {
                path: paths::join(dir, &name),
                name,
                kind,
                data,
                is_holder,
                session_id,
            }
        })
        .collect();
    Ok(participants)
}
