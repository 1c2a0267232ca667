//! The workers: one thread per (session, recipe), each looping acquire → check → fenced
//! write → release, and the shared state of a run they report to (the election workers are
//! in `elections`). The mutex and semaphore workers take every other hold through the async
//! API (`try_lock_owned_async`, `acquire_with_async`, awaited on a runtime of the worker's
//! own thread): one engine, held to the same checks.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::checks::{error_key, FencedStore, Revocations, Section, Tally};
use super::config::{Config, NodeOracle, Recipe, SEMAPHORE_MAX};
use super::faults::count_path;
use super::timeline::FaultLog;
use zk_locks::locks::{
    Acquire, HeldNode, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2, Lease, OwnedLockGuard, SharedCount,
};
use zk_locks::{Error, InterProcessLock, InterProcessMutex, LockGuard, SharedClient, ZkClient};

/// What a holder can tell about its lock: a guard or a lease.
pub(super) trait Holding {
    fn valid(&self) -> bool;
    fn token(&self) -> zk_locks::Result<i64>;
    /// The nodes held through: path and owning session.
    fn nodes(&self) -> Vec<(String, Option<i64>)>;
}

fn node_of(n: &HeldNode) -> (String, Option<i64>) {
    (n.path().to_string(), n.session_id())
}

impl<L: InterProcessLock> Holding for LockGuard<'_, L> {
    fn valid(&self) -> bool {
        self.is_valid()
    }
    fn token(&self) -> zk_locks::Result<i64> {
        self.fencing_token()
    }
    fn nodes(&self) -> Vec<(String, Option<i64>)> {
        LockGuard::nodes(self).iter().map(|n| node_of(n)).collect()
    }
}

impl<L: InterProcessLock + ?Sized> Holding for OwnedLockGuard<L> {
    fn valid(&self) -> bool {
        self.is_valid()
    }
    fn token(&self) -> zk_locks::Result<i64> {
        self.fencing_token()
    }
    fn nodes(&self) -> Vec<(String, Option<i64>)> {
        OwnedLockGuard::nodes(self)
            .iter()
            .map(|n| node_of(n))
            .collect()
    }
}

impl Holding for Lease {
    fn valid(&self) -> bool {
        self.is_valid()
    }
    fn token(&self) -> zk_locks::Result<i64> {
        self.fencing_token()
    }
    fn nodes(&self) -> Vec<(String, Option<i64>)> {
        vec![node_of(self.held_node())]
    }
}

/// Shared state of one run.
pub(super) struct Run {
    pub(super) config: Config,
    pub(super) sections: Mutex<Vec<Section>>,
    pub(super) tally: Mutex<Tally>,
    pub(super) stores: BTreeMap<Recipe, FencedStore>,
    pub(super) stop: AtomicBool,
    /// The semaphore workers' maximum, per session.
    pub(super) counts: Mutex<BTreeMap<usize, SharedCount>>,
    /// A pending downgrade-expiry fault (for one session's read/write worker).
    pub(super) downgrade: Mutex<Option<DowngradeRequest>>,
    /// Every fault injected so far.
    pub(super) log: FaultLog,
    /// The environment's view of which nodes exist, when it has one without requests.
    pub(super) oracle: Option<NodeOracle>,
    /// Revocation requests to the mutex's holders and their listeners' calls.
    pub(super) revocations: Arc<Revocations>,
    /// Per session: the locks and leases it holds now, from acquisition to the end of their
    /// release (see [`Run::holding`]).
    pub(super) holds: Vec<AtomicUsize>,
}

/// One lock or lease held by a session, counted in [`Run::holds`] while it lives.
pub(super) struct HoldMark<'a> {
    count: &'a AtomicUsize,
}

impl Drop for HoldMark<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Asks the read/write worker of session `worker` to stop between taking the write lock and
/// asking for the read lock, so that the fault thread can expire its session right there.
pub(super) struct DowngradeRequest {
    pub(super) worker: usize,
    /// The worker is there (holding the write lock).
    pub(super) reached: mpsc::Sender<()>,
    /// The fault is over (or abandoned: the sender is dropped).
    pub(super) resume: mpsc::Receiver<()>,
    /// Whether the read lock was then granted (and valid).
    pub(super) read: mpsc::Sender<bool>,
}

impl Run {
    /// Counts a lock or lease `session` holds until the mark is dropped (after its release).
    pub(super) fn hold(&self, session: usize) -> HoldMark<'_> {
        let count = &self.holds[session];
        count.fetch_add(1, Ordering::SeqCst);
        HoldMark { count }
    }

    /// Whether `session` (any session for `None`) holds a lock or lease now.
    pub(super) fn holding(&self, session: Option<usize>) -> bool {
        let held = |h: &AtomicUsize| h.load(Ordering::SeqCst) > 0;
        match session {
            Some(s) => held(&self.holds[s]),
            None => self.holds.iter().any(held),
        }
    }

    pub(super) fn error(&self, e: &Error) {
        *self.tally.lock().errors.entry(error_key(e)).or_default() += 1;
    }

    pub(super) fn release_result(&self, r: zk_locks::Result<()>) {
        if let Err(e) = r {
            *self
                .tally
                .lock()
                .release_errors
                .entry(error_key(&e))
                .or_default() += 1;
        }
    }

    /// The critical section of one holder, who asked for the lock at `asked`.
    pub(super) fn section(
        &self,
        recipe: Recipe,
        exclusive: bool,
        worker: usize,
        asked: Instant,
        held: &dyn Holding,
    ) {
        *self.tally.lock().acquisitions.entry(recipe).or_default() += 1;
        // Fencing applies to the exclusive recipes (concurrent semaphore holders or readers
        // would legitimately interleave tokens).
        let store = self.stores.get(&recipe).filter(|_| exclusive);
        let token = match held.token() {
            Ok(t) => Some(t),
            Err(_) => {
                self.tally.lock().token_errors += 1;
                None
            }
        };
        if let (Some(store), Some(t)) = (store, token) {
            store.acquired(t);
        }
        let valid_at_enter = held.valid();
        let enter = Instant::now();
        // The holder writes without looking at its validity: fencing must stop a holder that
        // did not notice it lost the lock.
        let write = match (store, token) {
            (Some(store), Some(t)) => Some(store.write_noting_stale(t)),
            _ => None,
        };
        if self.config.hold.is_zero() {
            for _ in 0..3 {
                thread::yield_now();
            }
        } else {
            thread::sleep(self.config.hold);
        }
        let exit = Instant::now();
        let valid_at_exit = held.valid();
        let checked = Instant::now();
        let nodes = held.nodes();
        let nodes_alive = self
            .oracle
            .as_ref()
            .map(|exists| nodes.iter().all(|(path, _)| exists(path)));
        let s = Section {
            recipe,
            exclusive,
            worker,
            token,
            asked,
            enter,
            exit,
            checked,
            valid_at_enter,
            valid_at_exit,
            nodes,
            nodes_alive,
            write_refused: matches!(write, Some(Err(_))),
            write_stale: matches!(write, Some(Ok(true))),
        };
        self.sections.lock().push(s);
    }

    /// One acquire → section → release of a guard-based lock.
    pub(super) fn iterate_lock<L: InterProcessLock>(
        &self,
        recipe: Recipe,
        exclusive: bool,
        worker: usize,
        lock: &L,
    ) {
        let asked = Instant::now();
        match lock.try_lock_for(self.config.acquire_timeout) {
            Ok(Some(guard)) => {
                let _held = self.hold(worker);
                self.section(recipe, exclusive, worker, asked, &guard);
                self.release_result(guard.unlock());
            }
            Ok(None) => self.tally.lock().timeouts += 1,
            Err(e) => self.error(&e),
        }
    }

    /// [`Self::iterate_lock`] through the async API: the acquire and the release awaited on
    /// `runtime` (a runtime of this worker's thread).
    pub(super) fn iterate_owned_async<L: InterProcessLock + 'static>(
        &self,
        recipe: Recipe,
        worker: usize,
        lock: &Arc<L>,
        runtime: &tokio::runtime::Runtime,
    ) {
        let asked = Instant::now();
        let how = Acquire::new().timeout(self.config.acquire_timeout);
        match runtime.block_on(lock.try_lock_owned_async(how)) {
            Ok(Some(guard)) => {
                let _held = self.hold(worker);
                self.section(recipe, true, worker, asked, &guard);
                self.release_result(runtime.block_on(guard.unlock_async()));
            }
            Ok(None) => self.tally.lock().timeouts += 1,
            Err(e) => self.error(&e),
        }
    }

    /// Write → section → downgrade (the read lock while writing) → release the write → shared
    /// section → release the read. A pending [`DowngradeRequest`] for this session stops it
    /// just before the downgrade.
    pub(super) fn iterate_downgrade(&self, worker: usize, rw: &InterProcessReadWriteLock) {
        let recipe = Recipe::ReadWrite;
        let asked = Instant::now();
        let write = match rw.write_lock().try_lock_for(self.config.acquire_timeout) {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                self.tally.lock().timeouts += 1;
                return;
            }
            Err(e) => return self.error(&e),
        };
        let write_held = self.hold(worker);
        self.section(recipe, true, worker, asked, &write);
        let request = {
            let mut pending = self.downgrade.lock();
            match pending.as_ref() {
                Some(r) if r.worker == worker => pending.take(),
                _ => None,
            }
        };
        let read_reply = request.map(|r| {
            let _ = r.reached.send(());
            // Bounded: the fault thread answers, or drops the sender when it gives up.
            let _ = r.resume.recv_timeout(self.config.finish_cycle_within);
            r.read
        });
        let asked = Instant::now();
        let read = rw.read_lock().try_lock_for(self.config.acquire_timeout);
        if let Some(reply) = read_reply {
            let _ = reply.send(matches!(&read, Ok(Some(g)) if g.is_valid()));
        }
        let read_held = matches!(read, Ok(Some(_))).then(|| self.hold(worker));
        self.release_result(write.unlock());
        drop(write_held);
        match read {
            Ok(Some(guard)) => {
                self.section(recipe, false, worker, asked, &guard);
                self.release_result(guard.unlock());
                drop(read_held);
            }
            Ok(None) => self.tally.lock().timeouts += 1,
            Err(e) => self.error(&e),
        }
    }

    pub(super) fn worker(self: &Arc<Self>, recipe: Recipe, worker: usize, client: SharedClient) {
        let path = recipe.path(&self.config.root);
        let built: zk_locks::Result<Box<dyn FnMut(u64) + '_>> = (|| {
            Ok(match recipe {
                Recipe::Mutex => {
                    let m = Arc::new(InterProcessMutex::new(client.clone(), &path)?);
                    let acquirer = thread::current().id();
                    let runtime = worker_runtime();
                    Box::new(move |i: u64| {
                        // Revocable: the fault thread asks holders to release (Curator's
                        // `__REVOKE__`); the listener only counts, and must run once per
                        // request, never on this (the acquiring) thread.
                        let tally = self.revocations.clone();
                        m.make_revocable(move || {
                            tally.calls.fetch_add(1, Ordering::SeqCst);
                            if thread::current().id() == acquirer {
                                tally.on_acquirer.fetch_add(1, Ordering::SeqCst);
                            }
                        });
                        match i % 2 {
                            0 => self.iterate_lock(recipe, true, worker, m.as_ref()),
                            _ => self.iterate_owned_async(recipe, worker, &m, &runtime),
                        }
                    }) as Box<dyn FnMut(u64)>
                }
                Recipe::ReadWrite => {
                    let rw = InterProcessReadWriteLock::new(client.clone(), &path)?;
                    Box::new(move |i: u64| {
                        let asked =
                            matches!(&*self.downgrade.lock(), Some(r) if r.worker == worker);
                        match (i + worker as u64) % 8 {
                            _ if asked => self.iterate_downgrade(worker, &rw),
                            0 => self.iterate_downgrade(worker, &rw),
                            4 => self.iterate_lock(recipe, true, worker, rw.write_lock()),
                            _ => self.iterate_lock(recipe, false, worker, rw.read_lock()),
                        }
                    })
                }
                Recipe::SemaphoreMutex => {
                    let m = InterProcessSemaphoreMutex::new(client.clone(), &path)?;
                    Box::new(move |_| self.iterate_lock(recipe, true, worker, &m))
                }
                Recipe::Semaphore => {
                    let count = SharedCount::new(
                        client.clone(),
                        &count_path(&self.config.root),
                        SEMAPHORE_MAX as i32,
                    )?;
                    self.counts.lock().insert(worker, count.clone());
                    let s = Arc::new(InterProcessSemaphoreV2::with_shared_count(
                        client.clone(),
                        &path,
                        count,
                    )?);
                    let runtime = worker_runtime();
                    Box::new(move |i: u64| {
                        let asked = Instant::now();
                        let timeout = self.config.acquire_timeout;
                        let acquired = match i % 2 {
                            0 => s.acquire_timeout(timeout),
                            _ => runtime
                                .block_on(s.acquire_with_async(Acquire::new().timeout(timeout))),
                        };
                        match acquired {
                            Ok(Some(lease)) => {
                                let _held = self.hold(worker);
                                self.section(recipe, false, worker, asked, &lease);
                                self.release_result(lease.close());
                            }
                            Ok(None) => self.tally.lock().timeouts += 1,
                            Err(e) => self.error(&e),
                        }
                    })
                }
                Recipe::Latch => {
                    let (client, path) = (client.clone(), path.clone());
                    Box::new(move |_| self.iterate_latch(worker, &client, &path))
                }
                Recipe::Selector => self.selector_worker(worker, &client, &path)?,
            })
        })();
        let mut iterate = match built {
            Ok(f) => f,
            Err(e) => {
                self.error(&e);
                return;
            }
        };
        let mut i = 0u64;
        while !self.stop.load(Ordering::SeqCst) {
            if catch_unwind(AssertUnwindSafe(|| iterate(i))).is_err() {
                self.tally.lock().panics += 1;
            }
            i += 1;
            if !client.session().state().is_connected() {
                // Do not spin on a dead link: wait (bounded) for the session to come back.
                client
                    .session()
                    .wait_until_connected(Some(Instant::now() + Duration::from_secs(1)));
            }
        }
    }
}

/// A runtime for one worker's async holds, polled on the worker's own thread.
fn worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}
