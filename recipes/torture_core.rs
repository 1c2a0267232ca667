//! The torture core, shared by `recipes/torture.rs` (the soak program) and `tests/torture.rs`
//! (its CI-sized run): sessions loop on every recipe while a fault thread breaks their
//! connections, sessions and servers; a checker then proves exclusion, fencing, and that
//! nothing (node or watch) is left behind.
//!
//! Each session runs one worker thread per recipe, every iteration being
//! acquire → `is_valid()` → enter → fenced write → tiny section → exit → `is_valid()` → release.
//! Sections are recorded with `Instant`s (one process, one monotonic clock), and only sections
//! whose holder was valid at both ends count for exclusion. To stay sound on a loaded machine
//! the enter time is taken *after* the validity check and the exit time *before* the second
//! one: a holder valid at both checks held the lock during the whole recorded interval
//! (a session never comes back once lost, and a node found deleted stays lost).
//!
//! The environment ([`Env`]) is either a real 3-node cluster with one [`FaultProxy`] per
//! (session, server) — so a cut, a freeze or an expiry hits exactly one session — or the
//! in-memory ensemble, whose faults are exact and fast.
// Included by the example and by the test, each of which uses a different part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zk_locks::client::memory::{Fault, MemoryClient, MemoryEnsemble, Op};
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::client::zookeeper::{ZkOptions, ZookeeperClient};
use zk_locks::locks::{
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease,
    SharedCount,
};
use zk_locks::testing::{FaultProxy, TestingCluster};
use zk_locks::{
    ConnectionState, Error, InterProcessLock, InterProcessMutex, LockGuard, SharedClient, ZkClient,
};

/// Leases of the semaphore recipe.
pub const SEMAPHORE_MAX: usize = 3;

/// The recipes under torture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Recipe {
    /// `InterProcessMutex`.
    Mutex,
    /// `InterProcessReadWriteLock` (each worker alternates: one write in four).
    ReadWrite,
    /// `InterProcessSemaphoreMutex`.
    SemaphoreMutex,
    /// `InterProcessSemaphoreV2` whose maximum is a `SharedCount` of [`SEMAPHORE_MAX`] or one
    /// less (changed by the count-blip fault).
    Semaphore,
}

impl Recipe {
    /// Every recipe, in worker order.
    pub const ALL: [Recipe; 4] = [
        Recipe::Mutex,
        Recipe::ReadWrite,
        Recipe::SemaphoreMutex,
        Recipe::Semaphore,
    ];

    /// Short name for the summary.
    pub fn name(self) -> &'static str {
        match self {
            Recipe::Mutex => "mutex",
            Recipe::ReadWrite => "rw",
            Recipe::SemaphoreMutex => "semmutex",
            Recipe::Semaphore => "sem",
        }
    }

    /// The lock path under `root`.
    pub fn path(self, root: &str) -> String {
        format!("{root}/{}", self.name())
    }

    /// The directories that hold this recipe's contender nodes (checked for orphans).
    pub fn node_dirs(self, root: &str) -> Vec<String> {
        let p = self.path(root);
        match self {
            Recipe::Mutex | Recipe::ReadWrite => vec![p],
            Recipe::SemaphoreMutex | Recipe::Semaphore => {
                vec![format!("{p}/locks"), format!("{p}/leases")]
            }
        }
    }
}

/// The faults the fault thread cycles through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// Every connection of one session is closed (the session survives).
    Cut,
    /// One session's links go silent for longer than the session timeout (the server expires it).
    Freeze,
    /// One session is expired on the server (a second connection closes it).
    Expire,
    /// One non-leader server is killed and restarted.
    ServerRestart,
    /// The leader is killed (a new one is elected) and restarted.
    LeaderRestart,
    /// One session is expired while its read/write worker holds the write lock and is about to
    /// take the read lock (a downgrade).
    DowngradeExpiry,
    /// One session's connections are cut (every watch dropped), then the semaphore's maximum
    /// (a `SharedCount`) is changed by another session: the victim's count must follow.
    CountBlip,
    /// One session's next lock-node create is applied but its reply lost, and so is the next
    /// listing of that directory, normally the look-up for the lost create (memory backend).
    CreateLookupLoss,
    /// One session expires just as it sends its next semaphore lease create, between
    /// admission and lease (memory backend).
    AdmissionLeaseLoss,
}

impl FaultKind {
    /// Every kind, in cycle order.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Cut,
        FaultKind::Freeze,
        FaultKind::Expire,
        FaultKind::ServerRestart,
        FaultKind::LeaderRestart,
        FaultKind::DowngradeExpiry,
        FaultKind::CountBlip,
        FaultKind::CreateLookupLoss,
        FaultKind::AdmissionLeaseLoss,
    ];

    /// The kinds a real ensemble can inject (the others need request-level injection).
    pub const REAL: [FaultKind; 7] = [
        FaultKind::Cut,
        FaultKind::Freeze,
        FaultKind::Expire,
        FaultKind::ServerRestart,
        FaultKind::LeaderRestart,
        FaultKind::DowngradeExpiry,
        FaultKind::CountBlip,
    ];

    /// True for the kinds meant to end the victim's session (the rest must not: a session lost
    /// to them is a spurious loss).
    pub fn ends_session(self) -> bool {
        match self {
            FaultKind::Freeze
            | FaultKind::Expire
            | FaultKind::DowngradeExpiry
            | FaultKind::AdmissionLeaseLoss => true,
            FaultKind::Cut
            | FaultKind::ServerRestart
            | FaultKind::LeaderRestart
            | FaultKind::CountBlip
            | FaultKind::CreateLookupLoss => false,
        }
    }

    /// Short name for the summary.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Cut => "cut",
            FaultKind::Freeze => "freeze",
            FaultKind::Expire => "expire",
            FaultKind::ServerRestart => "server-restart",
            FaultKind::LeaderRestart => "leader-restart",
            FaultKind::DowngradeExpiry => "downgrade-expiry",
            FaultKind::CountBlip => "count-blip",
            FaultKind::CreateLookupLoss => "create-lookup-loss",
            FaultKind::AdmissionLeaseLoss => "admission-lease-loss",
        }
    }
}

/// Where the torture runs: sessions, faults, and the server-side views the checker needs.
pub trait Env: Sync {
    /// Backend name for the summary.
    fn name(&self) -> &'static str;
    /// One client per session.
    fn clients(&self) -> Vec<SharedClient>;
    /// Injects `kind` (on session `victim` for per-session faults); returns once the fault is
    /// over (a frozen link thawed, a server serving again). `Err` explains a skipped fault.
    fn inject(&self, kind: FaultKind, victim: usize) -> Result<(), String>;
    /// Undoes anything a fault may have left (thaw, accept connections).
    fn heal(&self);
    /// The children of every directory in `dirs` as the ensemble sees them now, as full
    /// paths (a missing directory has none).
    fn nodes_under(&self, dirs: &[String]) -> Vec<String>;
    /// Watches registered on the servers on paths under `prefix`.
    fn watches_under(&self, prefix: &str) -> usize;
    /// Watches registered on the servers, all paths, all sessions.
    fn total_watches(&self) -> usize;
    /// Closes every session's client.
    fn close_clients(&self);
    /// The session timeout of the clients.
    fn session_timeout(&self) -> Duration;
    /// How long the last injected fault left the ensemble without a leader (zero for faults
    /// that keep a quorum serving).
    fn last_outage(&self) -> Duration {
        Duration::ZERO
    }
    /// The watches under `prefix`, one line each: server, path, watching session, and what
    /// the path is now (for a report on leaked watches).
    fn describe_watches_under(&self, _prefix: &str) -> Vec<String> {
        Vec::new()
    }
}

/// Parameters of a run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Lock paths live under this root.
    pub root: String,
    /// How long faults are injected and workers loop.
    pub duration: Duration,
    /// Timeout of each acquisition attempt (a timed-out attempt is a normal outcome).
    pub acquire_timeout: Duration,
    /// Pause between two faults (the system works undisturbed meanwhile).
    pub fault_gap: Duration,
    /// Fault kinds to cycle through.
    pub faults: Vec<FaultKind>,
    /// Past `duration`, finish the current cycle of faults (every kind at least once per run),
    /// for at most this much longer.
    pub finish_cycle_within: Duration,
}

/// Pacing between and within faults (how long a link stays frozen, the undisturbed time
/// between two faults). Not a synchronisation: every wait for a *state* polls that state.
fn pause(d: Duration) {
    thread::sleep(d);
}

/// One critical section as a worker saw it (public for the checker's own tests).
#[derive(Debug, Clone)]
pub struct Section {
    pub recipe: Recipe,
    pub exclusive: bool,
    pub worker: usize,
    pub enter: Instant,
    pub exit: Instant,
    pub valid_at_enter: bool,
    pub valid_at_exit: bool,
}

impl Section {
    fn counts(&self) -> bool {
        self.valid_at_enter && self.valid_at_exit
    }
}

/// A resource that accepts a write only with a token at least as high as the highest it saw
/// (fencing). It also knows the highest token any holder *acquired* so far (a ground truth the
/// store itself does not use), so the checker can tell a stale write that got through.
#[derive(Default)]
pub struct FencedStore {
    inner: Mutex<StoreState>,
}

#[derive(Default)]
struct StoreState {
    highest_written: Option<i64>,
    highest_acquired: Option<i64>,
    accepted: u64,
    rejected: u64,
    stale_accepted: u64,
}

/// A write refused by the [`FencedStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleToken {
    /// The token of the refused write.
    pub token: i64,
    /// The highest token the store had seen.
    pub highest: i64,
}

impl FencedStore {
    /// A holder acquired with `token` (recorded before its first write).
    pub fn acquired(&self, token: i64) {
        let mut s = self.inner.lock();
        s.highest_acquired = Some(s.highest_acquired.map_or(token, |h| h.max(token)));
    }

    /// Writes with `token`: refused when a higher token was already written.
    pub fn write(&self, token: i64) -> Result<(), StaleToken> {
        let mut s = self.inner.lock();
        if let Some(highest) = s.highest_written.filter(|&h| token < h) {
            s.rejected += 1;
            return Err(StaleToken { token, highest });
        }
        s.highest_written = Some(token);
        s.accepted += 1;
        if s.highest_acquired.is_some_and(|h| token < h) {
            // A newer holder had acquired already: this write came from a superseded holder.
            s.stale_accepted += 1;
        }
        Ok(())
    }

    /// (accepted, rejected, stale accepted).
    pub fn counts(&self) -> (u64, u64, u64) {
        let s = self.inner.lock();
        (s.accepted, s.rejected, s.stale_accepted)
    }
}

/// Outcome counters, shared by the workers.
#[derive(Default)]
struct Tally {
    acquisitions: BTreeMap<Recipe, u64>,
    timeouts: u64,
    errors: BTreeMap<String, u64>,
    release_errors: BTreeMap<String, u64>,
    token_errors: u64,
    invalid_sections: u64,
    rejected_valid_writes: u64,
    panics: u64,
    stale_counts: u64,
    downgrade_violations: u64,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Backend name.
    pub backend: &'static str,
    /// Sessions.
    pub sessions: usize,
    /// Wall time of the fault phase.
    pub duration: Duration,
    /// Successful acquisitions per recipe.
    pub acquisitions: BTreeMap<Recipe, u64>,
    /// Attempts that timed out (`Ok(false)` / `None`).
    pub timeouts: u64,
    /// Attempts that failed, by typed error.
    pub errors: BTreeMap<String, u64>,
    /// Releases that failed, by typed error.
    pub release_errors: BTreeMap<String, u64>,
    /// Fencing tokens that could not be read (typed error).
    pub token_errors: u64,
    /// Sections whose holder was not valid at one end (not counted for exclusion).
    pub invalid_sections: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// Faults skipped (with the reason of the last one).
    pub faults_skipped: u64,
    /// Exclusion violations (overlapping valid sections; more than max on the semaphore).
    pub violations: u64,
    /// Human-readable description of the first violations.
    pub violation_details: Vec<String>,
    /// Fenced writes accepted / rejected / accepted although stale.
    pub fencing: (u64, u64, u64),
    /// Rejected writes from holders valid at both ends (tokens out of acquisition order).
    pub rejected_valid_writes: u64,
    /// Fencing probes completed (one per freeze when the probe lock could be taken).
    pub probes: u64,
    /// Probes whose superseded holder's write was refused (must equal `probes`).
    pub probes_refused: u64,
    /// Probes whose frozen holder's guard did not report `Lost` afterwards.
    pub probe_holders_not_lost: u64,
    /// Count blips after which the victim's `SharedCount` never showed the new maximum.
    pub stale_counts: u64,
    /// Caught panics in workers.
    pub panics: u64,
    /// Workers that did not finish after the stop.
    pub hung: u64,
    /// Nodes left under the lock directories once every session is closed (and expired).
    pub orphans: usize,
    /// Their names.
    pub orphan_names: Vec<String>,
    /// Watches left on lock paths once workers stopped, sessions still open.
    pub watches_live: usize,
    /// Watches left on the servers after every session closed.
    pub watches_closed: usize,
    /// The watches left on lock paths (when `watches_live` > 0), described.
    pub leaked_watch_details: Vec<String>,
    /// Sessions lost beyond those the faults were meant to end (a freeze past the session
    /// timeout or a targeted expiry of that session, or every session during an election that
    /// left the ensemble without a leader for a session timeout or more): every lock of such a
    /// session was lost although no fault longer than the session timeout hit it. 0 is
    /// required of a client that keeps its session through cuts and server restarts.
    pub spurious_losses: u64,
    /// Leader restarts after which no leader served for a session timeout or more (faults
    /// longer than the session timeout for every session).
    pub long_elections: u64,
}

impl Summary {
    /// True when nothing went wrong.
    pub fn is_clean(&self) -> bool {
        self.violations == 0
            && self.fencing.2 == 0
            && self.rejected_valid_writes == 0
            && self.probes_refused == self.probes
            && self.probe_holders_not_lost == 0
            && self.stale_counts == 0
            && self.panics == 0
            && self.hung == 0
            && self.orphans == 0
            && self.watches_live == 0
            && self.watches_closed == 0
    }

    /// The single summary line.
    pub fn line(&self) -> String {
        let map = |m: &BTreeMap<String, u64>| {
            if m.is_empty() {
                "none".to_string()
            } else {
                m.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            }
        };
        let total: u64 = self.acquisitions.values().sum();
        let per: Vec<String> = self
            .acquisitions
            .iter()
            .map(|(r, n)| format!("{}={n}", r.name()))
            .collect();
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, n)| format!("{}={n}", k.name()))
            .collect();
        format!(
            "torture backend={} sessions={} duration={:.0}s acquisitions={total} ({}) timeouts={} \
             errors={{{}}} release-errors={{{}}} token-errors={} invalid-sections={} \
             faults={{{} skipped={}}} violations={} fencing={{accepted={} rejected={} \
             stale-accepted={} rejected-valid={} probes={} probes-refused={} \
             probe-holders-not-lost={}}} stale-counts={} panics={} hung={} orphans={} \
             leaked-watches={{live={} closed={}}} spurious-losses={} long-elections={}",
            self.backend,
            self.sessions,
            self.duration.as_secs_f64(),
            per.join(" "),
            self.timeouts,
            map(&self.errors),
            map(&self.release_errors),
            self.token_errors,
            self.invalid_sections,
            faults.join(" "),
            self.faults_skipped,
            self.violations,
            self.fencing.0,
            self.fencing.1,
            self.fencing.2,
            self.rejected_valid_writes,
            self.probes,
            self.probes_refused,
            self.probe_holders_not_lost,
            self.stale_counts,
            self.panics,
            self.hung,
            self.orphans,
            self.watches_live,
            self.watches_closed,
            self.spurious_losses,
            self.long_elections,
        )
    }
}

/// A typed error as a short counter key (`Zk:create:ConnectionLoss`, `SessionLost`, ...).
fn error_key(e: &Error) -> String {
    match e {
        Error::Zk { op, code, .. } => format!("Zk:{op}:{code:?}"),
        Error::RetriesExhausted { last, .. } => format!("RetriesExhausted:{last:?}"),
        other => {
            let debug = format!("{other:?}");
            debug
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or("?")
                .to_string()
        }
    }
}

/// What a holder can tell about its lock: a guard or a lease.
trait Holding {
    fn valid(&self) -> bool;
    fn token(&self) -> zk_locks::Result<i64>;
}

impl<L: InterProcessLock> Holding for LockGuard<'_, L> {
    fn valid(&self) -> bool {
        self.is_valid()
    }
    fn token(&self) -> zk_locks::Result<i64> {
        self.fencing_token()
    }
}

impl Holding for Lease {
    fn valid(&self) -> bool {
        self.is_valid()
    }
    fn token(&self) -> zk_locks::Result<i64> {
        self.fencing_token()
    }
}

/// Shared state of one run.
struct Run {
    config: Config,
    sections: Mutex<Vec<Section>>,
    tally: Mutex<Tally>,
    stores: BTreeMap<Recipe, FencedStore>,
    stop: AtomicBool,
    /// The semaphore workers' maximum, per session.
    counts: Mutex<BTreeMap<usize, SharedCount>>,
    /// A pending downgrade-expiry fault (for one session's read/write worker).
    downgrade: Mutex<Option<DowngradeRequest>>,
}

/// Asks the read/write worker of session `worker` to stop between taking the write lock and
/// asking for the read lock, so that the fault thread can expire its session right there.
struct DowngradeRequest {
    worker: usize,
    /// The worker is there (holding the write lock).
    reached: mpsc::Sender<()>,
    /// The fault is over (or abandoned: the sender is dropped).
    resume: mpsc::Receiver<()>,
    /// Whether the read lock was then granted (and valid).
    read: mpsc::Sender<bool>,
}

impl Run {
    fn error(&self, e: &Error) {
        *self.tally.lock().errors.entry(error_key(e)).or_default() += 1;
    }

    fn release_result(&self, r: zk_locks::Result<()>) {
        if let Err(e) = r {
            *self
                .tally
                .lock()
                .release_errors
                .entry(error_key(&e))
                .or_default() += 1;
        }
    }

    /// The critical section of one holder.
    fn section(&self, recipe: Recipe, exclusive: bool, worker: usize, held: &dyn Holding) {
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
            (Some(store), Some(t)) => Some(store.write(t)),
            _ => None,
        };
        for _ in 0..3 {
            thread::yield_now();
        }
        let exit = Instant::now();
        let valid_at_exit = held.valid();
        let s = Section {
            recipe,
            exclusive,
            worker,
            enter,
            exit,
            valid_at_enter,
            valid_at_exit,
        };
        {
            let mut tally = self.tally.lock();
            if !s.counts() {
                tally.invalid_sections += 1;
            } else if matches!(write, Some(Err(_))) {
                tally.rejected_valid_writes += 1;
            }
        }
        self.sections.lock().push(s);
    }

    /// One acquire → section → release of a guard-based lock.
    fn iterate_lock<L: InterProcessLock>(
        &self,
        recipe: Recipe,
        exclusive: bool,
        worker: usize,
        lock: &L,
    ) {
        match lock.try_lock_for(self.config.acquire_timeout) {
            Ok(Some(guard)) => {
                self.section(recipe, exclusive, worker, &guard);
                self.release_result(guard.unlock());
            }
            Ok(None) => self.tally.lock().timeouts += 1,
            Err(e) => self.error(&e),
        }
    }

    /// Write → section → downgrade (the read lock while writing) → release the write → shared
    /// section → release the read. A pending [`DowngradeRequest`] for this session stops it
    /// just before the downgrade.
    fn iterate_downgrade(&self, worker: usize, rw: &InterProcessReadWriteLock) {
        let recipe = Recipe::ReadWrite;
        let write = match rw.write_lock().try_lock_for(self.config.acquire_timeout) {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                self.tally.lock().timeouts += 1;
                return;
            }
            Err(e) => return self.error(&e),
        };
        self.section(recipe, true, worker, &write);
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
        let read = rw.read_lock().try_lock_for(self.config.acquire_timeout);
        if let Some(reply) = read_reply {
            let _ = reply.send(matches!(&read, Ok(Some(g)) if g.is_valid()));
        }
        self.release_result(write.unlock());
        match read {
            Ok(Some(guard)) => {
                self.section(recipe, false, worker, &guard);
                self.release_result(guard.unlock());
            }
            Ok(None) => self.tally.lock().timeouts += 1,
            Err(e) => self.error(&e),
        }
    }

    fn worker(&self, recipe: Recipe, worker: usize, client: SharedClient) {
        let path = recipe.path(&self.config.root);
        let built: zk_locks::Result<Box<dyn FnMut(u64) + '_>> = (|| {
            Ok(match recipe {
                Recipe::Mutex => {
                    let m = InterProcessMutex::new(client.clone(), &path)?;
                    Box::new(move |_| self.iterate_lock(recipe, true, worker, &m))
                        as Box<dyn FnMut(u64)>
                }
                Recipe::ReadWrite => {
                    let rw = InterProcessReadWriteLock::new(client.clone(), &path)?;
                    Box::new(move |i| {
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
                    let s =
                        InterProcessSemaphoreV2::with_shared_count(client.clone(), &path, count)?;
                    Box::new(
                        move |_| match s.acquire_timeout(self.config.acquire_timeout) {
                            Ok(Some(lease)) => {
                                self.section(recipe, false, worker, &lease);
                                self.release_result(lease.close());
                            }
                            Ok(None) => self.tally.lock().timeouts += 1,
                            Err(e) => self.error(&e),
                        },
                    )
                }
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

/// Exclusion violations (count, first descriptions) among sections that count: overlapping exclusive sections (with
/// anything), or more than `max` concurrent holders.
pub fn check_exclusion(sections: &[Section], max: i64) -> (u64, Vec<String>) {
    let mut valid: Vec<&Section> = sections.iter().filter(|s| s.counts()).collect();
    valid.sort_by_key(|s| s.enter);
    let mut violations = 0;
    let mut details = Vec::new();
    // Exclusive sections against every other section; sorted by enter, so only the sections
    // that enter before `a` exits can overlap it.
    for (i, a) in valid.iter().enumerate() {
        for b in valid[i + 1..].iter().take_while(|b| b.enter < a.exit) {
            if a.exclusive || b.exclusive {
                violations += 1;
                if details.len() < 5 {
                    details.push(format!(
                        "{}: worker {} ({}, {:?}) overlaps worker {} ({}, {:?})",
                        a.recipe.name(),
                        a.worker,
                        if a.exclusive { "exclusive" } else { "shared" },
                        a.exit - a.enter,
                        b.worker,
                        if b.exclusive { "exclusive" } else { "shared" },
                        b.exit - b.enter
                    ));
                }
            }
        }
    }
    // Concurrency bound: sweep over enter (+1) and exit (-1) events.
    let mut events: Vec<(Instant, i32)> = valid
        .iter()
        .flat_map(|s| [(s.enter, 1), (s.exit, -1)])
        .collect();
    // Exits before enters at the same instant: touching intervals do not overlap.
    events.sort_by_key(|&(t, d)| (t, d));
    let mut holders = 0i64;
    for (_, d) in events {
        holders += i64::from(d);
        if holders > max {
            violations += 1;
            if details.len() < 5 {
                details.push(format!("{} holders at once (max {max})", holders));
            }
        }
    }
    (violations, details)
}

/// Runs the torture on `env` and returns what it found.
pub fn run(env: &dyn Env, config: &Config) -> Summary {
    let clients = env.clients();
    let sessions = clients.len();
    let run = Arc::new(Run {
        config: config.clone(),
        sections: Mutex::new(Vec::new()),
        tally: Mutex::new(Tally::default()),
        stores: [Recipe::Mutex, Recipe::ReadWrite, Recipe::SemaphoreMutex]
            .into_iter()
            .map(|r| (r, FencedStore::default()))
            .collect(),
        stop: AtomicBool::new(false),
        counts: Mutex::new(BTreeMap::new()),
        downgrade: Mutex::new(None),
    });
    let probe = Probe::default();
    let mut faults: BTreeMap<FaultKind, u64> = BTreeMap::new();
    let mut skipped = 0u64;
    // Per session: the losses the injected faults were meant to cause.
    let mut expected_losses = vec![0u64; sessions];
    let mut long_elections = 0u64;
    let losses_before: Vec<u64> = clients
        .iter()
        .map(|c| c.session().snapshot().losses)
        .collect();
    let started = Instant::now();
    let mut hung = 0u64;
    {
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let mut workers = 0;
        for (worker, client) in clients.iter().enumerate() {
            for recipe in Recipe::ALL {
                let (run, client, done) = (run.clone(), client.clone(), done_tx.clone());
                workers += 1;
                thread::Builder::new()
                    .name(format!("torture-{}-{worker}", recipe.name()))
                    .spawn(move || {
                        run.worker(recipe, worker, client);
                        let _ = done.send(());
                    })
                    .expect("spawning a worker");
            }
        }
        drop(done_tx);
        // The fault thread is this one: cycle kinds and victims until the duration is over.
        let end = started + config.duration;
        let hard_end = end + config.finish_cycle_within;
        let mut n = 0usize;
        let cycle_open = |n: usize| n % config.faults.len().max(1) != 0;
        let go_on = |n: usize| {
            let now = Instant::now();
            now < end || (cycle_open(n) && now < hard_end)
        };
        while !config.faults.is_empty() && go_on(n) {
            let until = if cycle_open(n) { hard_end } else { end };
            pause(
                config
                    .fault_gap
                    .min(until.saturating_duration_since(Instant::now())),
            );
            if !go_on(n) {
                break;
            }
            let kind = config.faults[n % config.faults.len()];
            let victim = (n / config.faults.len() + n) % clients.len();
            n += 1;
            let injected = match kind {
                FaultKind::Freeze => fence_probe(env, &clients, victim, config, &probe),
                FaultKind::DowngradeExpiry => expire_during_downgrade(env, &clients, &run, victim),
                FaultKind::CountBlip => count_blip(env, &run, victim),
                _ => env.inject(kind, victim),
            };
            match injected {
                Ok(()) => {
                    *faults.entry(kind).or_default() += 1;
                    if kind.ends_session() {
                        expected_losses[victim] += 1;
                    }
                    if env.last_outage() >= env.session_timeout() {
                        long_elections += 1;
                        expected_losses.iter_mut().for_each(|e| *e += 1);
                    }
                }
                Err(why) => {
                    eprintln!(
                        "torture: skipped {} on session {victim}: {why}",
                        kind.name()
                    );
                    skipped += 1;
                }
            }
        }
        if config.faults.is_empty() {
            pause(end.saturating_duration_since(Instant::now()));
        }
        env.heal();
        run.stop.store(true, Ordering::SeqCst);
        // Every attempt is bounded by its timeout plus the retry policy; a worker still running
        // long after that is hung.
        let bound = Instant::now() + config.acquire_timeout + env.session_timeout() * 8;
        for _ in 0..workers {
            if done_rx
                .recv_timeout(bound.saturating_duration_since(Instant::now()))
                .is_err()
            {
                hung += 1;
            }
        }
        // A hung worker is reported (and left running, detached), never waited for.
    }
    let duration = started.elapsed();

    // Quiescence: every worker released; watches on lock paths must all have fired or been
    // removed (a waiter that timed out leaves its predecessor watch until that node goes).
    let patience = env.session_timeout() * 4 + Duration::from_secs(5);
    // The semaphore's counts keep a data watch while they live; with every count dropped, a
    // write fires those watches for the last time (nobody re-arms them).
    run.counts.lock().clear();
    let watches_live = settle(patience, || {
        let n = env.watches_under(&config.root);
        if n > 0 {
            let max = (SEMAPHORE_MAX as i32).to_be_bytes();
            let _ = clients[0].set_data(&count_path(&config.root), &max, None);
        }
        n
    });
    let leaked_watch_details = if watches_live > 0 {
        env.describe_watches_under(&config.root)
    } else {
        Vec::new()
    };
    let spurious_losses = clients
        .iter()
        .zip(&losses_before)
        .zip(&expected_losses)
        .map(|((c, before), expected)| {
            (c.session().snapshot().losses - before).saturating_sub(*expected)
        })
        .sum();
    env.close_clients();
    drop(clients);
    // Abandoned sessions (frozen, expired) lose their nodes when the server expires them.
    let dirs: Vec<String> = Recipe::ALL
        .iter()
        .flat_map(|r| r.node_dirs(&config.root))
        .chain([probe_path(&config.root)])
        .collect();
    let orphan_names = {
        let deadline = Instant::now() + patience;
        loop {
            let left = env.nodes_under(&dirs);
            if left.is_empty() || Instant::now() >= deadline {
                break left;
            }
            thread::sleep(Duration::from_millis(50));
        }
    };
    let watches_closed = settle(patience, || env.total_watches());

    let sections = std::mem::take(&mut *run.sections.lock());
    let mut violations = 0;
    let mut violation_details = Vec::new();
    for recipe in Recipe::ALL {
        let of: Vec<Section> = sections
            .iter()
            .filter(|s| s.recipe == recipe)
            .cloned()
            .collect();
        let max = match recipe {
            Recipe::Semaphore => SEMAPHORE_MAX as i64,
            Recipe::ReadWrite => i64::MAX, // readers share; writers are checked pairwise
            Recipe::Mutex | Recipe::SemaphoreMutex => 1,
        };
        let (v, d) = check_exclusion(&of, max);
        violations += v;
        violation_details.extend(d);
    }
    let tally = std::mem::take(&mut *run.tally.lock());
    if tally.downgrade_violations > 0 {
        violations += tally.downgrade_violations;
        violation_details.push(format!(
            "rw: {} read lock(s) granted to a session whose write lock expired, beside another writer",
            tally.downgrade_violations
        ));
    }
    let mut fencing = (0, 0, 0);
    for store in run.stores.values().chain([&probe.store]) {
        let (a, r, s) = store.counts();
        fencing = (fencing.0 + a, fencing.1 + r, fencing.2 + s);
    }
    let probes = *probe.runs.lock();
    let probes_refused = *probe.refused.lock();
    let probe_holders_not_lost = *probe.not_lost.lock();
    Summary {
        backend: env.name(),
        sessions,
        duration,
        acquisitions: tally.acquisitions,
        timeouts: tally.timeouts,
        errors: tally.errors,
        release_errors: tally.release_errors,
        token_errors: tally.token_errors,
        invalid_sections: tally.invalid_sections,
        faults,
        faults_skipped: skipped,
        violations,
        violation_details,
        fencing,
        rejected_valid_writes: tally.rejected_valid_writes,
        probes,
        probes_refused,
        probe_holders_not_lost,
        stale_counts: tally.stale_counts,
        panics: tally.panics,
        hung,
        orphans: orphan_names.len(),
        orphan_names,
        watches_live,
        watches_closed,
        spurious_losses,
        long_elections,
        leaked_watch_details,
    }
}

/// The fencing probe's lock path.
fn probe_path(root: &str) -> String {
    format!("{root}/fence-probe")
}

/// What the fencing probes saw.
#[derive(Default)]
struct Probe {
    store: FencedStore,
    runs: Mutex<u64>,
    refused: Mutex<u64>,
    not_lost: Mutex<u64>,
}

/// A freeze with a fencing probe around it: the victim session holds `<root>/fence-probe` and
/// writes; its links freeze past the session timeout (a long GC pause, as far as the server
/// can tell); another session takes the lock and writes; then the victim, "waking up", writes
/// with its old token without looking at its guard — the store must refuse it, and the guard
/// must say `Lost`. Without the probe lock (contention, faults), it is a plain freeze.
fn fence_probe(
    env: &dyn Env,
    clients: &[SharedClient],
    victim: usize,
    config: &Config,
    probe: &Probe,
) -> Result<(), String> {
    let path = probe_path(&config.root);
    let holder =
        InterProcessMutex::new(clients[victim].clone(), &path).map_err(|e| e.to_string())?;
    let guard = holder.try_lock_for(config.acquire_timeout).ok().flatten();
    let old = guard.as_ref().and_then(|g| g.fencing_token().ok());
    if let Some(old) = old {
        probe.store.acquired(old);
        let _ = probe.store.write(old);
    }
    env.inject(FaultKind::Freeze, victim)?;
    let (Some(guard), Some(old)) = (guard, old) else {
        return Ok(());
    };
    let successor_client = clients[(victim + 1) % clients.len()].clone();
    let successor = InterProcessMutex::new(successor_client, &path).map_err(|e| e.to_string())?;
    let timeout = config.acquire_timeout + env.session_timeout() * 2;
    if let Ok(Some(g)) = successor.try_lock_for(timeout) {
        if let Ok(new) = g.fencing_token() {
            probe.store.acquired(new);
            let _ = probe.store.write(new);
            *probe.runs.lock() += 1;
            if probe.store.write(old).is_err() {
                *probe.refused.lock() += 1;
            }
            if guard.state() != zk_locks::LockState::Lost {
                *probe.not_lost.lock() += 1;
            }
        }
    }
    drop(guard);
    Ok(())
}

/// The semaphore's maximum.
fn count_path(root: &str) -> String {
    format!("{root}/sem-max")
}

/// Expires the victim's session while its read/write worker holds the write lock and is about
/// to downgrade; the worker then asks for the read lock, which must not be granted as a
/// downgrade of the lost write lock (the checker sees a reader beside the next writer).
///
/// To make the check sharp, the fault thread then takes the write lock through another session
/// and holds it while the victim asks for the read lock: a read granted meanwhile is a
/// violation, whatever the other workers do.
fn expire_during_downgrade(
    env: &dyn Env,
    clients: &[SharedClient],
    run: &Run,
    victim: usize,
) -> Result<(), String> {
    let (reached_tx, reached) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel();
    let (read_tx, read) = mpsc::channel();
    *run.downgrade.lock() = Some(DowngradeRequest {
        worker: victim,
        reached: reached_tx,
        resume: resume_rx,
        read: read_tx,
    });
    let patience = run.config.acquire_timeout * 4 + env.session_timeout() * 4;
    if reached.recv_timeout(patience).is_err() {
        run.downgrade.lock().take();
        return Err("the read/write worker never reached a downgrade".into());
    }
    env.inject(FaultKind::Expire, victim)?;
    let path = Recipe::ReadWrite.path(&run.config.root);
    let other = clients[(victim + 1) % clients.len()].clone();
    let rw = InterProcessReadWriteLock::new(other, &path).map_err(|e| e.to_string())?;
    let write = rw
        .write_lock()
        .try_lock_for(run.config.acquire_timeout)
        .map_err(|e| e.to_string())?;
    drop(resume); // the victim asks for the read lock now
    let Some(write) = write else { return Ok(()) };
    // A wrongly granted read comes at once; a correct one waits behind our write lock, which
    // is released after this pause (a slow wrong grant then goes unseen, never the reverse).
    let early = read.recv_timeout(env.session_timeout() / 4);
    if matches!(early, Ok(true)) && write.is_valid() {
        let mut tally = run.tally.lock();
        tally.downgrade_violations += 1;
    }
    drop(write);
    let _ = read.recv_timeout(run.config.acquire_timeout * 2);
    Ok(())
}

/// Cuts the victim's connections (its watches go), then changes the semaphore's maximum from
/// another session; the victim's `SharedCount` must show the new value within the patience.
fn count_blip(env: &dyn Env, run: &Run, victim: usize) -> Result<(), String> {
    env.inject(FaultKind::Cut, victim)?;
    let counts = run.counts.lock().clone();
    let watcher = counts
        .get(&victim)
        .ok_or("no semaphore worker on the victim")?;
    let setter = counts
        .iter()
        .find(|(w, _)| **w != victim)
        .map(|(_, c)| c)
        .ok_or("no other semaphore worker")?;
    let max = SEMAPHORE_MAX as i32;
    let next = if setter.get_count() == max {
        max - 1
    } else {
        max
    };
    setter.set_count(next).map_err(|e| e.to_string())?;
    let patience = env.session_timeout() * 4;
    if settle(patience, || usize::from(watcher.get_count() != next)) != 0 {
        run.tally.lock().stale_counts += 1;
    }
    Ok(())
}

/// Polls `count` until it is 0 or `patience` passes; returns the last count.
fn settle(patience: Duration, mut count: impl FnMut() -> usize) -> usize {
    let deadline = Instant::now() + patience;
    loop {
        let n = count();
        if n == 0 || Instant::now() >= deadline {
            return n;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------------
// Real cluster

/// A 3-node cluster; every session reaches every member through its own [`FaultProxy`], so
/// a cut, freeze or expiry hits one session only, and server faults hit every session.
pub struct RealEnv {
    cluster: TestingCluster,
    proxies: Vec<Vec<FaultProxy>>,
    clients: Mutex<Vec<SharedClient>>,
    client_kind: ClientKind,
    session_timeout: Duration,
    next_member: Mutex<usize>,
    last_outage: Mutex<Duration>,
}

fn member_addr(cluster: &TestingCluster, i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], cluster.port(i)))
}

/// Which client the sessions of a [`RealEnv`] use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// Our own client (`client::native`).
    Native,
    /// The `zookeeper`-crate backend.
    Crate,
}

impl RealEnv {
    /// Starts the cluster, the proxies and `sessions` clients of `kind`.
    pub fn start(
        sessions: usize,
        session_timeout: Duration,
        kind: ClientKind,
    ) -> zk_locks::Result<RealEnv> {
        let cluster = TestingCluster::start(3)?;
        let mut proxies = Vec::new();
        let mut clients = Vec::new();
        for s in 0..sessions {
            let mine = (0..cluster.len())
                .map(|i| FaultProxy::start(member_addr(&cluster, i)))
                .collect::<zk_locks::Result<Vec<_>>>()?;
            // Rotated so the sessions' first choices spread over the members.
            let n = mine.len();
            let hosts: Vec<String> = (0..n).map(|k| mine[(k + s) % n].connect_string()).collect();
            let client: SharedClient = match kind {
                ClientKind::Native => NativeClient::connect_with(
                    NativeOptions::new(hosts.join(","))
                        .session_timeout(session_timeout)
                        .connect_timeout(Duration::from_secs(30)),
                )?,
                ClientKind::Crate => ZookeeperClient::connect_with(
                    ZkOptions::new(hosts.join(","))
                        .session_timeout(session_timeout)
                        .connect_timeout(Duration::from_secs(30)),
                )?,
            };
            proxies.push(mine);
            clients.push(client);
        }
        Ok(RealEnv {
            cluster,
            proxies,
            clients: Mutex::new(clients),
            client_kind: kind,
            session_timeout,
            next_member: Mutex::new(0),
            last_outage: Mutex::new(Duration::ZERO),
        })
    }

    /// The cluster (for four-letter words in tests).
    pub fn cluster(&self) -> &TestingCluster {
        &self.cluster
    }

    fn client(&self, i: usize) -> SharedClient {
        self.clients.lock()[i].clone()
    }

    /// Waits (bounded) until `client` has reported a session loss since `losses`.
    fn wait_for_loss(&self, client: &dyn ZkClient, losses: u64, patience: Duration) -> bool {
        let deadline = Instant::now() + patience;
        loop {
            let s = client.session().snapshot();
            if s.losses > losses {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            client.session().wait_for_change(s.epoch, Some(deadline));
        }
    }

    fn restart_member(&self, i: usize) -> Result<(), String> {
        self.cluster.kill(i);
        self.cluster.restart(i).map_err(|e| e.to_string())?;
        self.cluster
            .wait_for_quorum(Duration::from_secs(90))
            .map_err(|e| e.to_string())
    }
}

impl Env for RealEnv {
    fn name(&self) -> &'static str {
        match self.client_kind {
            ClientKind::Native => "native-3-node",
            ClientKind::Crate => "crate-3-node",
        }
    }

    fn clients(&self) -> Vec<SharedClient> {
        self.clients.lock().clone()
    }

    fn inject(&self, kind: FaultKind, victim: usize) -> Result<(), String> {
        *self.last_outage.lock() = Duration::ZERO;
        let proxies = &self.proxies[victim];
        let client = self.client(victim);
        match kind {
            FaultKind::Cut | FaultKind::CountBlip => {
                proxies.iter().for_each(FaultProxy::cut);
                Ok(())
            }
            FaultKind::Freeze => {
                let losses = client.session().snapshot().losses;
                let started = Instant::now();
                proxies.iter().for_each(FaultProxy::freeze);
                // Frozen until the client gives its session up, and at least 1.5 session
                // timeouts, so the server expires it as well.
                let noticed = self.wait_for_loss(&client, losses, self.session_timeout * 4);
                let min = self.session_timeout * 3 / 2;
                pause(min.saturating_sub(started.elapsed()));
                proxies.iter().for_each(FaultProxy::thaw);
                if noticed {
                    Ok(())
                } else {
                    Err("the frozen client never reported its session lost".into())
                }
            }
            FaultKind::Expire | FaultKind::DowngradeExpiry => {
                let snapshot = client.session().snapshot();
                let id = snapshot.session_id.ok_or("no session id")?;
                let proxy = proxies
                    .iter()
                    .find(|p| p.session_ids().contains(&id) && p.session_id() == Some(id))
                    .ok_or("no open connection of the current session")?;
                proxy.expire_session().map_err(|e| e.to_string())?;
                if self.wait_for_loss(&client, snapshot.losses, self.session_timeout * 4) {
                    Ok(())
                } else {
                    Err(format!(
                        "session 0x{id:x} expired but the client never noticed"
                    ))
                }
            }
            FaultKind::ServerRestart => {
                let leader = self.cluster.leader();
                let i = {
                    let mut next = self.next_member.lock();
                    let mut i = *next % self.cluster.len();
                    if Some(i) == leader {
                        i = (i + 1) % self.cluster.len();
                    }
                    *next = i + 1;
                    i
                };
                self.restart_member(i)
            }
            FaultKind::LeaderRestart => {
                let leader = self.cluster.leader().ok_or("no leader")?;
                let killed = Instant::now();
                self.cluster.kill(leader);
                // Let the other two elect a leader before the old one comes back.
                let deadline = Instant::now() + Duration::from_secs(60);
                while self.cluster.leader().is_none_or(|l| l == leader) {
                    if Instant::now() >= deadline {
                        break;
                    }
                    pause(Duration::from_millis(100));
                }
                *self.last_outage.lock() = killed.elapsed();
                self.cluster.restart(leader).map_err(|e| e.to_string())?;
                self.cluster
                    .wait_for_quorum(Duration::from_secs(90))
                    .map_err(|e| e.to_string())
            }
            FaultKind::CreateLookupLoss | FaultKind::AdmissionLeaseLoss => {
                Err("needs request-level injection (memory backend only)".into())
            }
        }
    }

    fn heal(&self) {
        for p in self.proxies.iter().flatten() {
            p.thaw();
            p.refuse(false);
        }
    }

    fn nodes_under(&self, dirs: &[String]) -> Vec<String> {
        // A fresh observer each time, straight to the members: the proxies are the clients'.
        let observer =
            match NativeClient::connect(&self.cluster.connect_string(), Duration::from_secs(10)) {
                Ok(o) => o,
                Err(e) => return vec![format!("<observer could not connect: {e}>")],
            };
        let mut left = Vec::new();
        for d in dirs {
            match observer.get_children(d, None) {
                Ok(children) => left.extend(children.into_iter().map(|c| format!("{d}/{c}"))),
                Err(zk_locks::ZkError::NoNode) => {}
                Err(e) => left.push(format!("<listing {d} failed: {e}>")),
            }
        }
        observer.close();
        left
    }

    fn watches_under(&self, prefix: &str) -> usize {
        (0..self.cluster.len())
            .map(|i| {
                let out = self.cluster.four_letter(i, "wchp").unwrap_or_default();
                count_wchp(&out, prefix)
            })
            .sum()
    }

    fn total_watches(&self) -> usize {
        (0..self.cluster.len())
            .map(|i| {
                let out = self.cluster.four_letter(i, "wchs").unwrap_or_default();
                out.lines()
                    .find_map(|l| l.trim().strip_prefix("Total watches:"))
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(0)
            })
            .sum()
    }

    fn close_clients(&self) {
        for c in self.clients.lock().iter() {
            c.close();
        }
    }

    fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    fn last_outage(&self) -> Duration {
        *self.last_outage.lock()
    }

    fn describe_watches_under(&self, prefix: &str) -> Vec<String> {
        let observer =
            match NativeClient::connect(&self.cluster.connect_string(), Duration::from_secs(10)) {
                Ok(o) => o,
                Err(e) => return vec![format!("<observer could not connect: {e}>")],
            };
        let sessions: Vec<String> = self
            .clients
            .lock()
            .iter()
            .map(|c| format!("{:?}", c.session().snapshot()))
            .collect();
        let mut out = Vec::new();
        for i in 0..self.cluster.len() {
            let wchp = self.cluster.four_letter(i, "wchp").unwrap_or_default();
            let mut path: Option<&str> = None;
            for line in wchp.lines() {
                if line.starts_with('/') {
                    path =
                        Some(line).filter(|p| *p == prefix || p.starts_with(&format!("{prefix}/")));
                } else if let (Some(p), true) = (path, line.trim_start().starts_with("0x")) {
                    let node = match observer.exists(p) {
                        Ok(Some(stat)) => format!(
                            "exists (owner 0x{:x}, children {}, mzxid 0x{:x}, pzxid 0x{:x})",
                            stat.ephemeral_owner, stat.num_children, stat.mzxid, stat.pzxid
                        ),
                        Ok(None) => "gone".into(),
                        Err(e) => format!("<exists failed: {e}>"),
                    };
                    out.push(format!(
                        "server {i}: {p} watched by {}: {node}",
                        line.trim()
                    ));
                }
            }
        }
        out.push(format!("sessions: {}", sessions.join("; ")));
        observer.close();
        out
    }
}

/// Counts (path, session) pairs under `prefix` in a `wchp` reply (paths, each followed by the
/// sessions watching it).
fn count_wchp(out: &str, prefix: &str) -> usize {
    let mut count = 0;
    let mut counting = false;
    for line in out.lines() {
        if line.starts_with('/') {
            counting = line == prefix || line.starts_with(&format!("{prefix}/"));
        } else if counting && line.trim_start().starts_with("0x") {
            count += 1;
        }
    }
    count
}

// ---------------------------------------------------------------------------------------------
// In-memory ensemble

/// The in-memory ensemble: exact, fast faults. A "server restart" drops every session's link
/// at once (each reconnects to the same session), which is what a client sees of it.
pub struct MemoryEnv {
    ensemble: MemoryEnsemble,
    clients: Vec<Arc<MemoryClient>>,
}

impl MemoryEnv {
    /// `sessions` clients on a fresh ensemble.
    pub fn new(sessions: usize) -> MemoryEnv {
        let ensemble = MemoryEnsemble::new();
        let clients = (0..sessions).map(|_| ensemble.connect()).collect();
        MemoryEnv { ensemble, clients }
    }
}

impl Env for MemoryEnv {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn clients(&self) -> Vec<SharedClient> {
        self.clients
            .iter()
            .map(|c| c.clone() as SharedClient)
            .collect()
    }

    fn inject(&self, kind: FaultKind, victim: usize) -> Result<(), String> {
        let c = &self.clients[victim];
        match kind {
            FaultKind::Cut | FaultKind::CountBlip => {
                c.suspend();
                c.resume();
            }
            FaultKind::Freeze => {
                // The link goes down, the server expires the session meanwhile, and the client
                // learns it when the link comes back.
                c.suspend();
                pause(Duration::from_millis(20));
                c.expire();
                c.resume();
            }
            FaultKind::Expire | FaultKind::DowngradeExpiry => c.expire(),
            FaultKind::CreateLookupLoss => {
                let (fired, client) = (AtomicBool::new(false), Arc::downgrade(c));
                c.on_request(Some(Box::new(move |op, path| {
                    let Some((dir, _)) = path.rsplit_once('/') else {
                        return;
                    };
                    if op == Op::Create && path.contains("/_c_") && !fired.swap(true, SeqCst) {
                        if let Some(c) = client.upgrade() {
                            c.inject(Fault::after(Op::Create).on_path(path));
                            c.inject(Fault::before(Op::GetChildren).on_path(dir));
                        }
                    }
                })));
            }
            FaultKind::AdmissionLeaseLoss => {
                let (fired, client) = (AtomicBool::new(false), Arc::downgrade(c));
                c.on_request(Some(Box::new(move |op, path| {
                    if op == Op::Create && path.contains("/leases/") && !fired.swap(true, SeqCst) {
                        if let Some(c) = client.upgrade() {
                            // Expired from another thread, as the server would do it.
                            let _ = thread::spawn(move || c.expire()).join();
                        }
                    }
                })));
            }
            FaultKind::ServerRestart | FaultKind::LeaderRestart => {
                for c in &self.clients {
                    c.suspend();
                }
                pause(Duration::from_millis(20));
                for c in &self.clients {
                    c.resume();
                }
            }
        }
        if c.session().state() == ConnectionState::Closed {
            return Err("client closed".into());
        }
        Ok(())
    }

    fn heal(&self) {
        for c in &self.clients {
            c.resume();
        }
    }

    fn nodes_under(&self, dirs: &[String]) -> Vec<String> {
        dirs.iter()
            .flat_map(|d| {
                let children = self.ensemble.children(d).unwrap_or_default();
                children.into_iter().map(move |c| format!("{d}/{c}"))
            })
            .collect()
    }

    fn watches_under(&self, _prefix: &str) -> usize {
        self.ensemble.watch_count()
    }

    fn total_watches(&self) -> usize {
        self.ensemble.watch_count()
    }

    fn close_clients(&self) {
        for c in &self.clients {
            c.close();
        }
    }

    fn session_timeout(&self) -> Duration {
        Duration::from_secs(1)
    }
}
