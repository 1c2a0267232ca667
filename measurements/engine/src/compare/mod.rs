//! zk-locks against Curator 5.4, side by side, against one ZooKeeper server: the same
//! scenarios run by our recipes (in this process, on our own client and on the
//! `zookeeper`-crate backend) and by Curator 5.4 (a JVM running `CuratorBench.java`, next to
//! this file), with the server's own request counter (`mntr` `zk_packets_received`) read
//! around each run. Used by the program `measurements/compare.rs` and by
//! `tests/compare_smoke.rs` (a tiny run, so that it cannot rot).
//!
//! Table of contents:
//! - this file: the plan, the scenarios, the measured runs and the loop that alternates the
//!   sides ([`run`]);
//! - `ours`: our recipes, one client (one session) per contender;
//! - `curator_side`: the JVM, driven line by line over its stdin and stdout;
//! - `mixed`: which side of a read/write lock each contender of the `read-write` scenario takes;
//! - `probes`: what is read from the server and the machine (`mntr`, `srvr`, load);
//! - `cpu`: the CPU time the server and each side's client process spent (`/proc`);
//! - `report`: the markdown table ([`render`]); [`charts`]: the same as SVG bar charts;
//! - [`queue`]: the long queue (1,000 waiters on one mutex), run on its own ([`queue::run_queues`]).

pub mod charts;
pub(crate) mod cpu;
mod curator_side;
pub mod mixed;
mod ours;
mod probes;
pub mod queue;
mod report;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use self::curator_side::CuratorSide;
use self::ours::{Backend, OurSide};
use self::probes::{first_address, idle_rate, load_average, machine, packets_received};
pub use self::report::render;

/// The session timeout of every client on both sides.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The recipes measured uncontended, by their names in the table and on the Java side.
pub const RECIPES: &[&str] = &["mutex", "semaphore-mutex", "write", "read"];

/// The contended runs of other recipes than the mutex: (recipe, sessions); `read-write` is
/// one read/write lock with writers and readers alternating ([`mixed`]).
pub const CONTENDED_OTHERS: &[(&str, usize)] = &[
    ("semaphore-mutex", 2),
    ("semaphore-mutex", 4),
    ("write", 2),
    ("write", 4),
    (mixed::READ_WRITE, 2),
    (mixed::READ_WRITE, 4),
];

/// How much work each scenario does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `exists` calls of the round-trip baseline.
    pub roundtrips: usize,
    /// Acquire+release cycles per uncontended recipe.
    pub uncontended: usize,
    /// Acquisitions (all sessions together) per contended scenario.
    pub contended: usize,
    /// Session counts of the contended mutex scenarios (the other recipes run contended at
    /// [`CONTENDED_OTHERS`]).
    pub sessions: Vec<usize>,
    /// Cycles run (and discarded) before each measurement: JIT, connection, parent nodes.
    pub warmup: usize,
    /// Each measurement is split into this many rounds, alternating between the two sides,
    /// so that a change in the machine's load hits both sides alike.
    pub rounds: usize,
}

impl Plan {
    /// About a minute on 2 cores.
    pub fn full() -> Plan {
        Plan {
            roundtrips: 3000,
            uncontended: 3000,
            contended: 5000,
            sessions: vec![2, 4, 8],
            warmup: 1000,
            rounds: 4,
        }
    }

    /// About 20 seconds.
    pub fn quick() -> Plan {
        Plan {
            roundtrips: 1000,
            uncontended: 600,
            contended: 1200,
            sessions: vec![2, 4, 8],
            warmup: 300,
            rounds: 2,
        }
    }

    /// A smoke run: every row, meaningless numbers.
    pub fn tiny() -> Plan {
        Plan {
            roundtrips: 10,
            uncontended: 10,
            contended: 20,
            sessions: vec![2, 4, 8],
            warmup: 3,
            rounds: 2,
        }
    }

    fn max_sessions(&self) -> usize {
        let others = CONTENDED_OTHERS.iter().map(|&(_, n)| n);
        self.sessions
            .iter()
            .copied()
            .chain(others)
            .max()
            .unwrap_or(1)
    }

    /// Every scenario of this plan, in the order they run.
    pub fn scenarios(&self) -> Vec<Scenario> {
        let mut scenarios = vec![Scenario::RoundTrip];
        scenarios.extend(RECIPES.iter().map(|r| Scenario::Uncontended(r)));
        scenarios.extend(self.sessions.iter().map(|&sessions| Scenario::Contended {
            recipe: "mutex",
            sessions,
        }));
        scenarios.extend(
            CONTENDED_OTHERS
                .iter()
                .map(|&(recipe, sessions)| Scenario::Contended { recipe, sessions }),
        );
        scenarios
    }
}

/// One measured run on one side.
#[derive(Debug, Clone, Copy, Default)]
pub struct Run {
    /// Operations (round trips, cycles or acquisitions) done.
    pub n: u64,
    /// Median per-operation latency (for contended runs: hand-off latency), nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile of the same, nanoseconds.
    pub p99_ns: u64,
    /// Wall time of the whole run, nanoseconds.
    pub elapsed_ns: u64,
    /// Requests the server received during the run (`zk_packets_received` delta).
    pub packets: u64,
    /// Times the clients waited for the server, as counted by our client (`None`: the side
    /// waits for every request, so its round trips are its requests).
    pub round_trips: Option<u64>,
    /// CPU time the server process spent during the run, nanoseconds (`None`: the server is
    /// not a process of this machine that we can read).
    pub server_cpu_ns: Option<u64>,
    /// CPU time the side's client process spent during the run, nanoseconds (ours: this whole
    /// process; Curator: its JVM).
    pub client_cpu_ns: Option<u64>,
}

impl Run {
    /// Operations per second of wall time.
    pub fn per_second(&self) -> f64 {
        self.n as f64 / (self.elapsed_ns.max(1) as f64 / 1e9)
    }

    /// Requests the server received per operation.
    pub fn requests_per_op(&self) -> f64 {
        self.packets as f64 / self.n.max(1) as f64
    }

    /// Round trips per operation (requests, for a side that waits for each).
    pub fn round_trips_per_op(&self) -> f64 {
        self.round_trips.unwrap_or(self.packets) as f64 / self.n.max(1) as f64
    }

    /// Server CPU microseconds per operation (NaN when not measured).
    pub fn server_cpu_us_per_op(&self) -> f64 {
        self.server_cpu_ns
            .map_or(f64::NAN, |ns| ns as f64 / 1e3 / self.n.max(1) as f64)
    }

    /// Client CPU microseconds per operation (NaN when not measured).
    pub fn client_cpu_us_per_op(&self) -> f64 {
        self.client_cpu_ns
            .map_or(f64::NAN, |ns| ns as f64 / 1e3 / self.n.max(1) as f64)
    }
}

/// What a scenario is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scenario {
    /// One `exists` per operation: the cost of a bare request through each client.
    RoundTrip,
    /// Acquire + release in a loop, one session.
    Uncontended(&'static str),
    /// `sessions` sessions, one thread each, zero hold time, on one lock of `recipe`.
    Contended {
        /// The recipe, as in [`RECIPES`].
        recipe: &'static str,
        /// Contenders.
        sessions: usize,
    },
}

impl Scenario {
    /// The scenario's name in the table.
    pub fn title(&self) -> String {
        match self {
            Scenario::RoundTrip => "request round trip (exists)".into(),
            Scenario::Uncontended(r) => format!("uncontended {r}"),
            Scenario::Contended { recipe, sessions } => {
                format!("contended {recipe}, {sessions} sessions")
            }
        }
    }
}

/// Every side of one scenario.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario.
    pub scenario: Scenario,
    /// zk-locks on its own client (`client::native`).
    pub ours: Run,
    /// zk-locks on the `zookeeper`-crate backend.
    pub ours_crate: Run,
    /// Curator 5.4.
    pub curator: Run,
}

/// Facts about where the numbers come from.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// Logical CPUs.
    pub nproc: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu: String,
    /// From the server's `srvr`.
    pub zookeeper: String,
    /// Packets/s the server receives while every session is idle (pings, heartbeats): the noise
    /// floor of the requests-per-operation figures.
    pub idle_packets_per_s: f64,
    /// 1-minute load average when the run started (other work on the machine).
    pub load_before: f64,
    /// The same when it ended.
    pub load_after: f64,
}

/// A whole comparison.
#[derive(Debug, Clone)]
pub struct Report {
    /// The machine.
    pub machine: Machine,
    /// One row per scenario.
    pub rows: Vec<Row>,
    /// Alternating rounds per side and scenario.
    pub rounds: usize,
}

/// A side of the comparison.
trait Side {
    /// The process whose CPU time is this side's.
    fn pid(&self) -> u32;
    /// `n` operations of `scenario` on the node at `path` (for a contended scenario, `n`
    /// acquisitions by all its sessions together).
    fn run(&mut self, scenario: &Scenario, path: &str, n: usize) -> Result<Run, String>;
}

/// Runs every scenario of `plan` on both sides against the server at `connect` (a
/// `host:port` list, no chroot). `class_dir` receives the compiled Java driver.
pub fn run(connect: &str, plan: &Plan, class_dir: &Path) -> Result<Report, String> {
    let mntr_addr = first_address(connect)?;
    let server_pid = cpu::listening_pid(mntr_addr);
    let mut curator = CuratorSide::start(connect, plan.max_sessions(), class_dir)?;
    let mut ours = OurSide::connect(connect, plan.max_sessions(), Backend::Native)?;
    let mut ours_crate = OurSide::connect(connect, plan.max_sessions(), Backend::Crate)?;
    let machine = machine(mntr_addr)?;
    let mut machine = Machine {
        idle_packets_per_s: idle_rate(mntr_addr)?,
        load_before: load_average(),
        ..machine
    };
    let probe = Probe {
        mntr: mntr_addr,
        server_pid,
    };
    let root = format!("/zk-locks-compare-{}", std::process::id());
    let mut rows = Vec::new();
    for (i, scenario) in plan.scenarios().into_iter().enumerate() {
        let ours_path = format!("{root}/ours-{i}");
        let crate_path = format!("{root}/crate-{i}");
        let curator_path = format!("{root}/curator-{i}");
        warm_up(&mut ours, &scenario, plan, &ours_path)?;
        warm_up(&mut ours_crate, &scenario, plan, &crate_path)?;
        warm_up(&mut curator, &scenario, plan, &curator_path)?;
        let (mut ours_runs, mut crate_runs, mut curator_runs) =
            (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..plan.rounds.max(1) {
            ours_runs.push(measure(&mut ours, &scenario, plan, &ours_path, &probe)?);
            crate_runs.push(measure(
                &mut ours_crate,
                &scenario,
                plan,
                &crate_path,
                &probe,
            )?);
            curator_runs.push(measure(
                &mut curator,
                &scenario,
                plan,
                &curator_path,
                &probe,
            )?);
        }
        rows.push(Row {
            scenario,
            ours: combine(&ours_runs),
            ours_crate: combine(&crate_runs),
            curator: combine(&curator_runs),
        });
    }
    machine.load_after = load_average();
    curator.quit();
    Ok(Report {
        machine,
        rows,
        rounds: plan.rounds.max(1),
    })
}

/// One scenario's operations: `n` of them (round trips, cycles, or acquisitions in total).
/// The round trip asks about the root, which every server has, rather than the scenario's
/// own node.
fn once(side: &mut dyn Side, scenario: &Scenario, path: &str, n: usize) -> Result<Run, String> {
    let path = match scenario {
        Scenario::RoundTrip => "/",
        _ => path,
    };
    side.run(scenario, path, n)
}

/// Discarded cycles first: JIT, connections, parent nodes.
fn warm_up(
    side: &mut dyn Side,
    scenario: &Scenario,
    plan: &Plan,
    path: &str,
) -> Result<(), String> {
    once(side, scenario, path, plan.warmup).map(drop)
}

/// Where a measured round reads the server's counters and CPU time.
struct Probe {
    mntr: SocketAddr,
    server_pid: Option<u32>,
}

/// One measured round between two readings of the server's request counter and of the
/// server's and the side's CPU time.
fn measure(
    side: &mut dyn Side,
    scenario: &Scenario,
    plan: &Plan,
    path: &str,
    probe: &Probe,
) -> Result<Run, String> {
    let total = match scenario {
        Scenario::RoundTrip => plan.roundtrips,
        Scenario::Uncontended(_) => plan.uncontended,
        Scenario::Contended { .. } => plan.contended,
    };
    let n = (total / plan.rounds.max(1)).max(1);
    let cpu = |pid: Option<u32>| pid.and_then(cpu::process_cpu_ns);
    let client_pid = Some(side.pid());
    let (server_before, client_before) = (cpu(probe.server_pid), cpu(client_pid));
    let before = packets_received(probe.mntr)?;
    let mut run = once(side, scenario, path, n)?;
    let after = packets_received(probe.mntr)?;
    let spent = |before: Option<u64>, after: Option<u64>| Some(after?.saturating_sub(before?));
    run.server_cpu_ns = spent(server_before, cpu(probe.server_pid));
    run.client_cpu_ns = spent(client_before, cpu(client_pid));
    run.packets = after.saturating_sub(before);
    Ok(run)
}

/// Rounds of one side together: sums, and the median of the rounds' percentiles (the raw
/// samples stay on each side of the pipe).
fn combine(runs: &[Run]) -> Run {
    let median = |f: fn(&Run) -> u64| {
        let mut v: Vec<u64> = runs.iter().map(f).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    Run {
        n: runs.iter().map(|r| r.n).sum(),
        p50_ns: median(|r| r.p50_ns),
        p99_ns: median(|r| r.p99_ns),
        elapsed_ns: runs.iter().map(|r| r.elapsed_ns).sum(),
        packets: runs.iter().map(|r| r.packets).sum(),
        round_trips: runs.iter().map(|r| r.round_trips).sum(),
        server_cpu_ns: runs.iter().map(|r| r.server_cpu_ns).sum(),
        client_cpu_ns: runs.iter().map(|r| r.client_cpu_ns).sum(),
    }
}

/// `(n, p50, p99)` of durations in nanoseconds, with the Java side's percentile rule.
fn summary(mut samples: Vec<u64>, elapsed: Duration) -> Run {
    samples.sort_unstable();
    let n = samples.len();
    let pick = |i: usize| samples.get(i).copied().unwrap_or(0);
    Run {
        n: n as u64,
        p50_ns: pick(n / 2),
        p99_ns: pick((n * 99 / 100).min(n.saturating_sub(1))),
        elapsed_ns: elapsed.as_nanos() as u64,
        ..Run::default()
    }
}
