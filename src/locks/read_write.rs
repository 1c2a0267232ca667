//! `InterProcessReadWriteLock`: many readers or one writer, across processes, wire-compatible
//! with Curator's (`_c_<uuid>-__READ__<seq>` and `_c_<uuid>-__WRIT__<seq>` nodes in one
//! directory, one shared queue).
//!
//! Reentrant per thread on each side. A write holder may take the read lock and then release
//! the write lock (**downgrade**): the read node then takes the write node's sequence, so a
//! writer already queued stays behind it (Curator 5.5, CURATOR-621). A read holder asking for
//! the write lock gets [`Error::UpgradeNotSupported`] at once (Curator waits forever).
//!
//! Owned guards ([`InterProcessLock::lock_owned`] on [`InterProcessReadWriteLock::read_lock_arc`]
//! or [`InterProcessReadWriteLock::write_lock_arc`]) belong to the guard, not to a thread:
//! each queues a node of its own, with no downgrade nor upgrade (an owned reader waits for an
//! owned writer as any reader does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::SharedClient;
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::RetryPolicy;

use super::held::{HeldNode, LockState};
use super::internals::{past, NodeKind, Wait};
use super::layout::{READ_LOCK_NAME, WRITE_LOCK_NAME};
use super::mutex::InterProcessMutex;
use super::observe::LockObserver;
use super::participants::{self as queue, Participant, ParticipantKind};
use super::{cancel, Acquire, HoldFuture, InterProcessLock, ReleaseFuture};

mod drivers;
use drivers::{held_write_node, is_writer, ReadDriver, WriteDriver};

/// A read/write lock across processes (Curator's `InterProcessReadWriteLock`).
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::{InterProcessLock, InterProcessReadWriteLock};
///
/// let ensemble = MemoryEnsemble::new();
/// let rw = InterProcessReadWriteLock::new(ensemble.connect(), "/locks/catalog")?;
/// let w = rw.write_lock().lock()?;        // exclusive
/// let r = rw.read_lock().lock()?;         // downgrade: take read while holding write...
/// drop(w);                                // ...then let the write lock go
/// assert!(r.is_valid());
/// # drop(r);
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Debug)]
pub struct InterProcessReadWriteLock {
    read: Arc<ReadLock>,
    write: Arc<WriteLock>,
}

/// The shared side of an [`InterProcessReadWriteLock`].
#[derive(Debug)]
pub struct ReadLock {
    read: Arc<InterProcessMutex>,
    write: Arc<InterProcessMutex>,
}

/// The exclusive side of an [`InterProcessReadWriteLock`].
#[derive(Debug)]
pub struct WriteLock {
    read: Arc<InterProcessMutex>,
    write: Arc<InterProcessMutex>,
}

impl InterProcessReadWriteLock {
    /// A read/write lock at `path`.
    pub fn new(client: SharedClient, path: &str) -> Result<Self> {
        Self::build(client, path, None, None, None)
    }

    /// Stores `data` in the lock's nodes (of both kinds) instead of the default
    /// (`<host> <pid>`), as [`InterProcessMutex::with_data`] does.
    pub fn with_data(self, data: impl Into<Vec<u8>>) -> Self {
        let retry = self.write.write.retry_policy().clone();
        let observer = self.write.write.observer();
        self.rebuild(Some(data.into()), retry, observer)
    }

    /// Reports both sides' events to `observer` instead of the client's (see
    /// [`LockObserver`]; read and write holds are told apart by [`LockEvent::kind`]).
    ///
    /// [`LockEvent::kind`]: crate::locks::LockEvent::kind
    pub fn with_observer(self, observer: Arc<dyn LockObserver>) -> Self {
        let data = self.write.write.data().map(<[u8]>::to_vec);
        let retry = self.write.write.retry_policy().clone();
        self.rebuild(data, retry, Some(observer))
    }

    /// Replaces the retry policy of both sides (default: exponential backoff, 50 ms base, 10
    /// retries), as [`InterProcessMutex::with_retry_policy`] does.
    pub fn with_retry_policy(self, retry: Arc<dyn RetryPolicy>) -> Self {
        let data = self.write.write.data().map(<[u8]>::to_vec);
        let observer = self.write.write.observer();
        self.rebuild(data, retry, observer)
    }

    /// The same lock with other settings: nothing is held yet (the builders take `self` before
    /// any acquire), so both sides are made anew.
    fn rebuild(
        self,
        data: Option<Vec<u8>>,
        retry: Arc<dyn RetryPolicy>,
        observer: Option<Arc<dyn LockObserver>>,
    ) -> Self {
        let write = &self.write.write;
        Self::build(
            write.client().clone(),
            write.path(),
            data,
            Some(retry),
            observer,
        )
        .expect("the path was validated when the lock was made")
    }

    fn build(
        client: SharedClient,
        path: &str,
        data: Option<Vec<u8>>,
        retry: Option<Arc<dyn RetryPolicy>>,
        observer: Option<Arc<dyn LockObserver>>,
    ) -> Result<Self> {
        let configure = |mut side: InterProcessMutex| {
            if let Some(d) = &data {
                side = side.with_data(d.clone());
            }
            if let Some(r) = &retry {
                side = side.with_retry_policy(r.clone());
            }
            if let Some(o) = &observer {
                side = side.with_observer(o.clone());
            }
            side
        };
        let write = Arc::new(configure(InterProcessMutex::with_driver(
            client.clone(),
            path,
            Arc::new(WriteDriver),
        )?));
        let read = Arc::new(configure(InterProcessMutex::with_driver(
            client,
            path,
            Arc::new(ReadDriver {
                write: write.clone(),
            }),
        )?));
        Ok(InterProcessReadWriteLock {
            read: Arc::new(ReadLock {
                read: read.clone(),
                write: write.clone(),
            }),
            write: Arc::new(WriteLock { read, write }),
        })
    }

    /// The drivers of both sides, (read, write), for the hand-off model
    /// (`locks::handoff_model`).
    #[cfg(test)]
    pub(in crate::locks) fn side_drivers(
        &self,
    ) -> (
        Arc<dyn super::driver::LockDriver>,
        Arc<dyn super::driver::LockDriver>,
    ) {
        (
            self.read.read.driver().clone(),
            self.write.write.driver().clone(),
        )
    }

    /// The read (shared) lock.
    pub fn read_lock(&self) -> &ReadLock {
        &self.read
    }

    /// The write (exclusive) lock.
    pub fn write_lock(&self) -> &WriteLock {
        &self.write
    }

    /// The read lock as an `Arc`, for [`InterProcessLock::lock_owned`] (the same lock as
    /// [`Self::read_lock`]).
    pub fn read_lock_arc(&self) -> Arc<ReadLock> {
        self.read.clone()
    }

    /// The write lock as an `Arc`, for [`InterProcessLock::lock_owned`] (the same lock as
    /// [`Self::write_lock`]).
    pub fn write_lock_arc(&self) -> Arc<WriteLock> {
        self.write.clone()
    }

    /// The whole queue, readers and writers, in queue order, with each node's data and
    /// whether it holds its side of the lock (see [`Participant`]).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        read_write_queue(&self.write.read, &self.write.write)
    }
}

/// The one queue of both sides; each node's flag from its own side's driver.
fn read_write_queue(
    read: &InterProcessMutex,
    write: &InterProcessMutex,
) -> Result<Vec<Participant>> {
    let (reader, writer) = (read.driver(), write.driver());
    queue::list(
        write.client(),
        write.path(),
        writer.as_ref(),
        |sorted, i| {
            if is_writer(&sorted[i]) {
                (ParticipantKind::Write, writer.holds(sorted, i))
            } else {
                (ParticipantKind::Read, reader.holds(sorted, i))
            }
        },
    )
}

/// The participants of one kind, flagged over the whole queue.
fn side_of_queue(
    read: &InterProcessMutex,
    write: &InterProcessMutex,
    kind: ParticipantKind,
) -> Result<Vec<Participant>> {
    let mut all = read_write_queue(read, write)?;
    all.retain(|p| p.kind == kind);
    Ok(all)
}

fn participants(mutex: &InterProcessMutex, lock_name: &str) -> Result<Vec<String>> {
    let all = mutex.participant_nodes()?;
    Ok(all
        .into_iter()
        .filter(|p| paths::node_name(p).contains(lock_name))
        .collect())
}

impl ReadLock {
    /// Read nodes in queue order, as full paths.
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        participants(&self.read, READ_LOCK_NAME)
    }

    /// The read nodes in queue order, with their data and holder flags (decided over the
    /// whole queue: a reader holds when no writer is ahead of it).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        side_of_queue(&self.read, &self.write, ParticipantKind::Read)
    }

    /// True when the calling thread holds the read lock.
    pub fn is_owned_by_current_thread(&self) -> bool {
        self.read.is_owned_by_current_thread()
    }

    fn acquire_with(&self, timeout: Option<Duration>) -> Result<bool> {
        let Some(seq) = self.downgrade_sequence()? else {
            return self.read.acquire_with(timeout, NodeKind::Sequential);
        };
        let deadline = timeout.and_then(super::deadline_after);
        if !self
            .read
            .acquire_with(timeout, NodeKind::WithSequence(seq))?
        {
            return Ok(false);
        }
        // The read node borrowed the write node's place in the queue; that is only right when
        // the write node lived until the read node existed. If the write lock was lost in
        // between (its session with it), a writer may hold the lock now: give the place back
        // and queue as any reader. Asked of the server, not of the client's belief: a client
        // can run requests in a new session before it reports the old one lost, and the read
        // node, created in the new session, would sort ahead of the writer that took over.
        // Nodes do not come back, so a write node that exists now existed then.
        match self.write_node_exists(deadline) {
            Some(true) => return Ok(true),
            Some(false) => {}
            None => {
                // Unknown by the deadline: not granted (keeping the place could put a reader
                // beside a writer; giving it back while the write node lives would queue this
                // thread behind writers that wait for its own write lock). The link failed
                // past the deadline: the read node's delete makes no request on this thread.
                if let Err(e) = self.read.release_within(Wait::Background) {
                    log::info!("downgrade of {} timed out: {e}", self.read.path());
                }
                return Ok(false);
            }
        }
        // The place is given back within the deadline; past it, the call queues no more.
        let released = self.read.release_within(Wait::Until(deadline));
        if past(deadline, Instant::now()) {
            if let Err(e) = released {
                log::info!("downgrade of {} timed out: {e}", self.read.path());
            }
            return Ok(false);
        }
        released?;
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        self.read.acquire_with(left, NodeKind::Sequential)
    }

    /// Whether the calling thread's write node exists on the server (`Some(false)`: gone),
    /// asked again after each session change while the answer is unknown (a link down, a
    /// timed-out read); `None` when `deadline` passed first.
    fn write_node_exists(&self, deadline: Option<Instant>) -> Option<bool> {
        let Some(write) = self.write.held_node() else {
            return Some(false);
        };
        loop {
            let session = write.client().session();
            let epoch = session.epoch();
            match write.confirm() {
                LockState::Held => return Some(true),
                LockState::Lost => return Some(false),
                LockState::Suspect => {}
            }
            let now = Instant::now();
            if past(deadline, now) {
                return None;
            }
            // A failed read while connected has no transition to wait for: ask again soon.
            let soon = now + Duration::from_millis(250);
            session.wait_for_change(epoch, Some(deadline.map_or(soon, |d| d.min(soon))));
        }
    }

    /// When this thread holds the write lock, not lost (and not yet the read lock), the read
    /// node takes the write node's sequence.
    fn downgrade_sequence(&self) -> Result<Option<i32>> {
        if self.read.is_owned_by_current_thread() {
            return Ok(None);
        }
        let Some(name) = held_write_node(&self.write, true) else {
            return Ok(None);
        };
        let name = name.as_str();
        match paths::sequence_after(name, WRITE_LOCK_NAME) {
            Some(seq) => Ok(Some(seq)),
            None => Err(Error::InvalidArgument {
                name: "write node",
                reason: format!("{name:?} has no sequence to downgrade with"),
            }),
        }
    }
}

impl InterProcessLock for ReadLock {
    fn acquire(&self) -> Result<()> {
        match self.acquire_with(None)? {
            true => Ok(()),
            false => Err(Error::Closed),
        }
    }

    fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        self.acquire_with(Some(timeout))
    }

    fn try_acquire_with(&self, how: &Acquire) -> Result<bool> {
        let held = cancel::run(how, self.read.path(), self.read.client(), |timeout| {
            Ok(self.acquire_with(timeout)?.then_some(()))
        })?;
        Ok(held.is_some())
    }

    fn release(&self) -> Result<()> {
        self.read.release()
    }

    fn release_within(&self, wait: Wait) -> Result<()> {
        self.read.release_within(wait)
    }

    fn release_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        self.read.release_hold(nodes)
    }

    fn is_acquired_in_this_process(&self) -> bool {
        self.read.is_acquired_in_this_process()
    }

    fn acquire_owned_hold(&self, how: &Acquire) -> Result<Option<Vec<Arc<HeldNode>>>> {
        self.read.acquire_owned_hold(how)
    }

    fn acquire_owned_hold_async<'a>(&'a self, how: &'a Acquire) -> HoldFuture<'a> {
        self.read.acquire_owned_hold_async(how)
    }

    fn release_owned_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        self.read.release_owned_hold(nodes)
    }

    fn release_owned_hold_async<'a>(&'a self, nodes: &'a [Arc<HeldNode>]) -> ReleaseFuture<'a> {
        self.read.release_owned_hold_async(nodes)
    }

    fn release_owned_hold_within(&self, nodes: &[Arc<HeldNode>], wait: Wait) -> Result<()> {
        self.read.release_owned_hold_within(nodes, wait)
    }

    fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
        self.read.held_nodes()
    }

    fn lock_paths(&self) -> Vec<String> {
        self.read.lock_paths()
    }
}

impl WriteLock {
    /// Write nodes in queue order, as full paths.
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        participants(&self.write, WRITE_LOCK_NAME)
    }

    /// The write nodes in queue order, with their data and holder flags (decided over the
    /// whole queue: a writer holds when it is first).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        side_of_queue(&self.read, &self.write, ParticipantKind::Write)
    }

    /// True when the calling thread holds the write lock.
    pub fn is_owned_by_current_thread(&self) -> bool {
        self.write.is_owned_by_current_thread()
    }

    fn check_upgrade(&self) -> Result<()> {
        // Our own read node is ahead of any write node we would create: waiting would never
        // end. Re-entering a write lock we hold (after a downgrade too) is fine.
        if self.read.is_owned_by_current_thread() && !self.write.is_owned_by_current_thread() {
            return Err(Error::UpgradeNotSupported {
                path: self.write.path().to_string(),
            });
        }
        Ok(())
    }
}

impl InterProcessLock for WriteLock {
    fn acquire(&self) -> Result<()> {
        self.check_upgrade()?;
        self.write.acquire()
    }

    fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        self.check_upgrade()?;
        self.write.acquire_timeout(timeout)
    }

    fn try_acquire_with(&self, how: &Acquire) -> Result<bool> {
        self.check_upgrade()?;
        self.write.try_acquire_with(how)
    }

    fn release(&self) -> Result<()> {
        self.write.release()
    }

    fn release_within(&self, wait: Wait) -> Result<()> {
        self.write.release_within(wait)
    }

    fn release_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        self.write.release_hold(nodes)
    }

    fn is_acquired_in_this_process(&self) -> bool {
        self.write.is_acquired_in_this_process()
    }

    fn acquire_owned_hold(&self, how: &Acquire) -> Result<Option<Vec<Arc<HeldNode>>>> {
        self.write.acquire_owned_hold(how)
    }

    fn acquire_owned_hold_async<'a>(&'a self, how: &'a Acquire) -> HoldFuture<'a> {
        self.write.acquire_owned_hold_async(how)
    }

    fn release_owned_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        self.write.release_owned_hold(nodes)
    }

    fn release_owned_hold_async<'a>(&'a self, nodes: &'a [Arc<HeldNode>]) -> ReleaseFuture<'a> {
        self.write.release_owned_hold_async(nodes)
    }

    fn release_owned_hold_within(&self, nodes: &[Arc<HeldNode>], wait: Wait) -> Result<()> {
        self.write.release_owned_hold_within(nodes, wait)
    }

    fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
        self.write.held_nodes()
    }

    fn lock_paths(&self) -> Vec<String> {
        self.write.lock_paths()
    }
}
