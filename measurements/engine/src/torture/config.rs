//! What a run is made of: the recipes under torture, the fault kinds, the environment a run
//! talks to ([`Env`]), and the run's parameters ([`Config`]).

use std::thread;
use std::time::Duration;

use super::timeline::FaultLog;
use zk_locks::SharedClient;

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
    /// `LeaderLatch`: each iteration a new latch joins the election, leads once, and closes.
    Latch,
    /// `LeaderSelector` with auto requeue: each leadership is one callback, which returns at
    /// once (leadership moves on).
    Selector,
}

impl Recipe {
    /// Every recipe, in worker order.
    pub const ALL: [Recipe; 6] = [
        Recipe::Mutex,
        Recipe::ReadWrite,
        Recipe::SemaphoreMutex,
        Recipe::Semaphore,
        Recipe::Latch,
        Recipe::Selector,
    ];

    /// The leader elections among them (checked for one leader per term).
    pub const ELECTIONS: [Recipe; 2] = [Recipe::Latch, Recipe::Selector];

    /// True for a leader election.
    pub fn is_election(self) -> bool {
        Recipe::ELECTIONS.contains(&self)
    }

    /// Short name for the summary.
    pub fn name(self) -> &'static str {
        match self {
            Recipe::Mutex => "mutex",
            Recipe::ReadWrite => "rw",
            Recipe::SemaphoreMutex => "semmutex",
            Recipe::Semaphore => "sem",
            Recipe::Latch => "latch",
            Recipe::Selector => "selector",
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
            Recipe::Mutex | Recipe::ReadWrite | Recipe::Latch | Recipe::Selector => vec![p],
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
    /// One session's client moves to a new session without reporting it (as the `zookeeper`
    /// crate can) while its read/write worker holds the write lock and is about to downgrade;
    /// another session takes the write lock; the change is reported after the worker asked for
    /// the read lock (memory backend).
    DowngradeSilentSession,
    /// The follower one session is connected to is cut off from the other members (its
    /// clients still reach it) for 1.5 session timeouts, then healed: the session must move to
    /// the majority side before the leader can expire it (real cluster in network namespaces).
    MemberPartition,
}

impl FaultKind {
    /// Every kind the memory ensemble can inject, in cycle order (all but
    /// [`FaultKind::MemberPartition`], which needs a real cluster in network namespaces).
    pub const ALL: [FaultKind; 10] = [
        FaultKind::Cut,
        FaultKind::Freeze,
        FaultKind::Expire,
        FaultKind::ServerRestart,
        FaultKind::LeaderRestart,
        FaultKind::DowngradeExpiry,
        FaultKind::CountBlip,
        FaultKind::CreateLookupLoss,
        FaultKind::AdmissionLeaseLoss,
        FaultKind::DowngradeSilentSession,
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

    /// [`FaultKind::REAL`] and the member partition: what a real cluster in network namespaces
    /// can inject.
    pub const PARTITIONED: [FaultKind; 8] = [
        FaultKind::Cut,
        FaultKind::Freeze,
        FaultKind::Expire,
        FaultKind::ServerRestart,
        FaultKind::LeaderRestart,
        FaultKind::DowngradeExpiry,
        FaultKind::CountBlip,
        FaultKind::MemberPartition,
    ];

    /// True for the kinds meant to end the victim's session (the rest must not: a session lost
    /// to them is a spurious loss).
    pub fn ends_session(self) -> bool {
        match self {
            FaultKind::Freeze
            | FaultKind::Expire
            | FaultKind::DowngradeExpiry
            | FaultKind::AdmissionLeaseLoss
            | FaultKind::DowngradeSilentSession => true,
            FaultKind::Cut
            | FaultKind::ServerRestart
            | FaultKind::LeaderRestart
            | FaultKind::CountBlip
            | FaultKind::CreateLookupLoss
            | FaultKind::MemberPartition => false,
        }
    }

    /// True for the kinds that end the victim's session on the server while its client is
    /// connected, so others can see its nodes gone before it hears of it (see
    /// [`expired_unannounced`](super::expired_unannounced)). `admission-lease-loss` is one
    /// too, recorded when its hook fires.
    pub fn expires_unannounced(self) -> bool {
        matches!(
            self,
            FaultKind::Expire | FaultKind::DowngradeExpiry | FaultKind::DowngradeSilentSession
        )
    }

    /// True for the kinds that strike every session at once.
    pub fn strikes_all(self) -> bool {
        matches!(self, FaultKind::ServerRestart | FaultKind::LeaderRestart)
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
            FaultKind::DowngradeSilentSession => "downgrade-silent-session",
            FaultKind::MemberPartition => "member-partition",
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
    /// over (a frozen link thawed, a server serving again, an expired session reported lost by
    /// its client). `Err` explains a skipped fault. A fault that strikes later (from a request
    /// hook) records itself in `log` when it does.
    fn inject(&self, kind: FaultKind, victim: usize, log: &FaultLog) -> Result<(), String>;
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
    /// Members of the ensemble that exited on their own and were restarted (a server's bug,
    /// not the client's; zero where members cannot crash).
    fn member_crashes(&self) -> u64 {
        0
    }
    /// Whether the ensemble has a node at this path now, when the environment can tell without
    /// a request (the memory ensemble can). Lets the checker tell a holder whose node the
    /// server ended from one whose node lives.
    fn node_oracle(&self) -> Option<NodeOracle> {
        None
    }
    /// Reports a session change that a fault made silently (no-op where none can be).
    fn report_session_change(&self, _victim: usize) {}
    /// The watches under `prefix`, one line each: server, path, watching session, and what
    /// the path is now (for a report on leaked watches).
    fn describe_watches_under(&self, _prefix: &str) -> Vec<String> {
        Vec::new()
    }
}

/// Whether a node exists now (see [`Env::node_oracle`]).
pub type NodeOracle = std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>;

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
    /// The recipes that get workers (every recipe: [`Recipe::ALL`]).
    pub recipes: Vec<Recipe>,
    /// How long a holder stays in its critical section (zero: a few yields). Longer sections
    /// widen every overlap a defect could cause.
    pub hold: Duration,
    /// Varies the run: which session each fault strikes first, and the pauses between faults
    /// (up to twice `fault_gap`). Seed 0 keeps the plain rotation and gap.
    pub seed: u64,
}

impl Config {
    /// Every recipe, every kind in `faults`, short sections, seed 0.
    pub fn new(
        root: impl Into<String>,
        faults: &[FaultKind],
        duration: Duration,
        acquire_timeout: Duration,
        fault_gap: Duration,
    ) -> Config {
        Config {
            root: root.into(),
            duration,
            acquire_timeout,
            fault_gap,
            faults: faults.to_vec(),
            finish_cycle_within: Duration::from_secs(90),
            recipes: Recipe::ALL.to_vec(),
            hold: Duration::ZERO,
            seed: 0,
        }
    }

    /// The session the `n`th fault strikes among `sessions`.
    pub(super) fn victim(&self, n: usize, sessions: usize) -> usize {
        let cycle = self.faults.len().max(1);
        (n / cycle + n + self.seed as usize) % sessions.max(1)
    }

    /// The pause before the `n`th fault: `fault_gap`, stretched by up to as much again per
    /// the seed.
    pub(super) fn gap(&self, n: usize) -> Duration {
        if self.seed == 0 {
            return self.fault_gap;
        }
        // splitmix64 of (seed, n): a well-spread fraction in [0, 1).
        let mut z = self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n as u64;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        self.fault_gap
            + self
                .fault_gap
                .mul_f64((z >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// Pacing between and within faults (how long a link stays frozen, the undisturbed time
/// between two faults). Not a synchronisation: every wait for a *state* polls that state.
pub(super) fn pause(d: Duration) {
    thread::sleep(d);
}
