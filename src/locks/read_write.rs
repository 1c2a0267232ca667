//! `InterProcessReadWriteLock`: many readers or one writer, across processes, wire-compatible
//! with Curator's (`_c_<uuid>-__READ__<seq>` and `_c_<uuid>-__WRIT__<seq>` nodes in one
//! directory, one shared queue).
//!
//! Reentrant per thread on each side. A write holder may take the read lock and then release
//! the write lock (**downgrade**): the read node then takes the write node's sequence, so a
//! writer already queued stays behind it (Curator 5.5, CURATOR-621). A read holder asking for
//! the write lock gets [`Error::UpgradeNotSupported`] at once (Curator waits forever).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::SharedClient;
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::RetryPolicy;

use super::driver::{standard_sort_key, Decision, LockDriver};
use super::held::{HeldNode, LockState};
use super::internals::{past, NodeKind, Wait};
use super::layout::{READ_LOCK_NAME, WRITE_LOCK_NAME};
use super::mutex::InterProcessMutex;
use super::participants::{self as queue, Participant, ParticipantKind};
use super::{cancel, Acquire, InterProcessLock};

/// Both kinds sort by their sequence in one queue: the text after the last `__READ__`, then
/// after the last `__WRIT__` (Curator's `SortingLockInternalsDriver`).
fn rw_sort_key(child: &str) -> &str {
    standard_sort_key(standard_sort_key(child, READ_LOCK_NAME), WRITE_LOCK_NAME)
}

fn is_writer(child: &str) -> bool {
    child.contains(WRITE_LOCK_NAME)
}

/// Writers: first among all children, readers included; watch the node just ahead.
#[derive(Debug)]
struct WriteDriver;

impl LockDriver for WriteDriver {
    fn lock_name(&self) -> &str {
        WRITE_LOCK_NAME
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        rw_sort_key(child)
    }

    fn decide(&self, sorted: &[String], our_index: usize) -> Decision {
        if our_index == 0 {
            return Decision::Acquired;
        }
        let predecessor = sorted[our_index - 1].clone();
        // A writer ahead may downgrade: its read node appears with the writer's own sequence,
        // ahead of us, just before the write node goes. So only a reader as the last node
        // ahead lets us in without listing again.
        let last_ahead = our_index == 1 && !is_writer(&predecessor);
        Decision::Watch {
            predecessor,
            last_ahead,
        }
    }

    /// First in the queue; a downgrade read node of this very writer (same sequence) may
    /// sort ahead of it.
    fn holds(&self, sorted: &[String], index: usize) -> bool {
        let ours = rw_sort_key(&sorted[index]);
        sorted[..index].iter().all(|c| rw_sort_key(c) == ours)
    }
}

/// Readers: hold unless a writer is ahead (or this thread owns the write lock); watch the
/// first writer ahead.
struct ReadDriver {
    write: Arc<InterProcessMutex>,
}

impl std::fmt::Debug for ReadDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadDriver")
    }
}

impl LockDriver for ReadDriver {
    fn lock_name(&self) -> &str {
        READ_LOCK_NAME
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        rw_sort_key(child)
    }

    fn decide(&self, sorted: &[String], our_index: usize) -> Decision {
        // Called on the acquiring thread: a downgrading write holder reads at once (its own
        // write node, with the same sequence, may sort either side of its read node). Only the
        // read node that took that sequence: another read node of this thread sits where any
        // reader would, possibly behind writers that wait for this thread's write node.
        // Without a request (the wait loop may be past its deadline): the downgrade asks the
        // server about its write node once the read node is granted.
        let ours = rw_sort_key(&sorted[our_index]);
        if held_write_node(&self.write, false)
            .is_some_and(|w| sorted.contains(&w) && rw_sort_key(&w) == ours)
        {
            return Decision::Acquired;
        }
        let mut writers = sorted[..our_index].iter().filter(|c| is_writer(c));
        match writers.next() {
            None => Decision::Acquired,
            Some(first) => Decision::Watch {
                predecessor: first.clone(),
                // A downgrade of that writer adds a reader, which does not block us.
                last_ahead: writers.next().is_none(),
            },
        }
    }

    /// No writer ahead, except the one whose sequence this read node shares: the node is that
    /// writer's downgrade, which `decide` grants to the writer's thread.
    fn holds(&self, sorted: &[String], index: usize) -> bool {
        let ours = rw_sort_key(&sorted[index]);
        !sorted[..index]
            .iter()
            .any(|c| is_writer(c) && rw_sort_key(c) != ours)
    }
}

/// The name of the calling thread's write node while that node is not lost: a write node lost
/// with its session (or found deleted) is not ours, and a downgrade from it would let a reader
/// in beside the writer that took over. `Suspect` still counts: a read node created before the
/// client learns of a loss is created in the write node's session, and dies with it. Only
/// `ask`ing reads the node after a reconnect; otherwise only a loss the client knows counts.
fn held_write_node(write: &InterProcessMutex, ask: bool) -> Option<String> {
    let node = write.held_node()?;
    let lost = match ask {
        true => node.state() == LockState::Lost,
        false => node.believed_lost(),
    };
    (!lost).then(|| paths::node_name(node.path()).to_string())
}

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
    read: ReadLock,
    write: WriteLock,
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
        Self::build(client, path, None, None)
    }

    /// Stores `data` in the lock's nodes (of both kinds) instead of the default
    /// (`<host> <pid>`), as [`InterProcessMutex::with_data`] does.
    pub fn with_data(self, data: impl Into<Vec<u8>>) -> Self {
        let retry = self.write.write.retry_policy().clone();
        self.rebuild(Some(data.into()), retry)
    }

    /// Replaces the retry policy of both sides (default: exponential backoff, 50 ms base, 10
    /// retries), as [`InterProcessMutex::with_retry_policy`] does.
    pub fn with_retry_policy(self, retry: Arc<dyn RetryPolicy>) -> Self {
        let data = self.write.write.data().map(<[u8]>::to_vec);
        self.rebuild(data, retry)
    }

    /// The same lock with other settings: nothing is held yet (the builders take `self` before
    /// any acquire), so both sides are made anew.
    fn rebuild(self, data: Option<Vec<u8>>, retry: Arc<dyn RetryPolicy>) -> Self {
        let write = &self.write.write;
        Self::build(write.client().clone(), write.path(), data, Some(retry))
            .expect("the path was validated when the lock was made")
    }

    fn build(
        client: SharedClient,
        path: &str,
        data: Option<Vec<u8>>,
        retry: Option<Arc<dyn RetryPolicy>>,
    ) -> Result<Self> {
        let configure = |mut side: InterProcessMutex| {
            if let Some(d) = &data {
                side = side.with_data(d.clone());
            }
            if let Some(r) = &retry {
                side = side.with_retry_policy(r.clone());
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
            read: ReadLock {
                read: read.clone(),
                write: write.clone(),
            },
            write: WriteLock { read, write },
        })
    }

    /// The read (shared) lock.
    pub fn read_lock(&self) -> &ReadLock {
        &self.read
    }

    /// The write (exclusive) lock.
    pub fn write_lock(&self) -> &WriteLock {
        &self.write
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

    fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
        self.write.held_nodes()
    }

    fn lock_paths(&self) -> Vec<String> {
        self.write.lock_paths()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sort_key_strips_both_names() {
        assert_eq!(rw_sort_key("_c_a-__READ__0000000003"), "0000000003");
        assert_eq!(rw_sort_key("_c_a-__WRIT__0000000004"), "0000000004");
        assert_eq!(rw_sort_key("other"), "other");
    }

    /// The holder flags an observer reads: readers ahead of a writer hold, a writer ahead of
    /// readers holds alone, and a downgrade's two nodes (one sequence) hold in either order.
    #[test]
    fn holders_as_an_observer_sees_them() {
        let reader = |sorted: &[String], i| {
            ReadDriver {
                write: Arc::new(
                    InterProcessMutex::new(
                        crate::client::memory::MemoryEnsemble::new().connect(),
                        "/rw",
                    )
                    .unwrap(),
                ),
            }
            .holds(sorted, i)
        };
        let c = names(&[
            "a-__READ__0000000001",
            "b-__READ__0000000002",
            "c-__WRIT__0000000003",
        ]);
        assert!(reader(&c, 0) && reader(&c, 1) && !WriteDriver.holds(&c, 2));
        let c = names(&[
            "a-__WRIT__0000000001",
            "b-__READ__0000000002",
            "c-__READ__0000000003",
        ]);
        assert!(WriteDriver.holds(&c, 0) && !reader(&c, 1) && !reader(&c, 2));
        for c in [
            names(&[
                "a-__WRIT__0000000001",
                "a-__READ__0000000001",
                "b-__READ__0000000002",
            ]),
            names(&[
                "a-__READ__0000000001",
                "a-__WRIT__0000000001",
                "b-__READ__0000000002",
            ]),
        ] {
            let (r, w) = if is_writer(&c[0]) { (1, 0) } else { (0, 1) };
            assert!(reader(&c, r) && WriteDriver.holds(&c, w), "{c:?}");
            assert!(!reader(&c, 2), "{c:?}");
        }
    }

    #[test]
    fn writer_hand_off_only_after_a_reader() {
        let c = names(&["a-__WRIT__0000000001", "b-__WRIT__0000000002"]);
        assert_eq!(
            WriteDriver.decide(&c, 1),
            Decision::Watch {
                predecessor: c[0].clone(),
                last_ahead: false
            }
        );
        let c = names(&["a-__READ__0000000001", "b-__WRIT__0000000002"]);
        assert_eq!(
            WriteDriver.decide(&c, 1),
            Decision::Watch {
                predecessor: c[0].clone(),
                last_ahead: true
            }
        );
    }
}
