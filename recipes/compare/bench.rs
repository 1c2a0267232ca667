//! The core of the zk-locks / Curator comparison: the same scenarios run by our recipes (in
//! this process, on our own client and on the `zookeeper`-crate backend) and by Curator 5.4
//! (a JVM running `CuratorBench.java`), against one server,
//! with the server's own request counter (`mntr` `zk_packets_received`) read around each run.
//!
//! Shared by `recipes/compare.rs` (the program) and `tests/compare_smoke.rs` (a tiny run so
//! it cannot rot), through `#[path]`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::client::CountingClient;
use zk_locks::locks::{InterProcessReadWriteLock, InterProcessSemaphoreMutex};
use zk_locks::testing::curator;
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

/// The session timeout of every client on both sides.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The recipes measured uncontended, by their names in the table and on the Java side.
pub const RECIPES: &[&str] = &["mutex", "semaphore-mutex", "write", "read"];

/// How much work each scenario does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `exists` calls of the round-trip baseline.
    pub roundtrips: usize,
    /// Acquire+release cycles per uncontended recipe.
    pub uncontended: usize,
    /// Acquisitions (all sessions together) per contended scenario.
    pub contended: usize,
    /// Session counts of the contended scenarios.
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
        self.sessions.iter().copied().max().unwrap_or(1).max(1)
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
}

impl Run {
    fn per_second(&self) -> f64 {
        self.n as f64 / (self.elapsed_ns.max(1) as f64 / 1e9)
    }

    fn requests_per_op(&self) -> f64 {
        self.packets as f64 / self.n.max(1) as f64
    }

    fn round_trips_per_op(&self) -> f64 {
        self.round_trips.unwrap_or(self.packets) as f64 / self.n.max(1) as f64
    }
}

/// What a scenario is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scenario {
    /// One `exists` per operation: the cost of a bare request through each client.
    RoundTrip,
    /// Acquire + release in a loop, one session.
    Uncontended(&'static str),
    /// N sessions, one thread each, zero hold time, on one mutex.
    Contended(usize),
}

impl Scenario {
    fn title(&self) -> String {
        match self {
            Scenario::RoundTrip => "request round trip (exists)".into(),
            Scenario::Uncontended(r) => format!("uncontended {r}"),
            Scenario::Contended(n) => format!("contended mutex, {n} sessions"),
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
    fn roundtrip(&mut self, path: &str, n: usize) -> Result<Run, String>;
    fn uncontended(&mut self, recipe: &str, path: &str, n: usize) -> Result<Run, String>;
    fn contended(&mut self, path: &str, sessions: usize, count: usize) -> Result<Run, String>;
}

/// Runs every scenario of `plan` on both sides against the server at `connect` (a
/// `host:port` list, no chroot). `class_dir` receives the compiled Java driver.
pub fn run(connect: &str, plan: &Plan, class_dir: &Path) -> Result<Report, String> {
    let mntr_addr = first_address(connect)?;
    let mut curator = CuratorSide::start(connect, plan.max_sessions(), class_dir)?;
    let mut ours = OurSide::connect(connect, plan.max_sessions(), Backend::Native)?;
    let mut ours_crate = OurSide::connect(connect, plan.max_sessions(), Backend::Crate)?;
    let machine = machine(mntr_addr)?;
    let mut machine = Machine {
        idle_packets_per_s: idle_rate(mntr_addr)?,
        load_before: load_average(),
        ..machine
    };
    let root = format!("/zk-locks-compare-{}", std::process::id());
    let mut scenarios = vec![Scenario::RoundTrip];
    scenarios.extend(RECIPES.iter().map(|r| Scenario::Uncontended(r)));
    scenarios.extend(plan.sessions.iter().map(|&n| Scenario::Contended(n)));
    let mut rows = Vec::new();
    for (i, scenario) in scenarios.into_iter().enumerate() {
        let ours_path = format!("{root}/ours-{i}");
        let crate_path = format!("{root}/crate-{i}");
        let curator_path = format!("{root}/curator-{i}");
        warm_up(&mut ours, &scenario, plan, &ours_path)?;
        warm_up(&mut ours_crate, &scenario, plan, &crate_path)?;
        warm_up(&mut curator, &scenario, plan, &curator_path)?;
        let (mut ours_runs, mut crate_runs, mut curator_runs) =
            (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..plan.rounds.max(1) {
            ours_runs.push(measure(&mut ours, &scenario, plan, &ours_path, mntr_addr)?);
            crate_runs.push(measure(
                &mut ours_crate,
                &scenario,
                plan,
                &crate_path,
                mntr_addr,
            )?);
            curator_runs.push(measure(
                &mut curator,
                &scenario,
                plan,
                &curator_path,
                mntr_addr,
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
fn once(side: &mut dyn Side, scenario: &Scenario, path: &str, n: usize) -> Result<Run, String> {
    match scenario {
        Scenario::RoundTrip => side.roundtrip("/", n),
        Scenario::Uncontended(recipe) => side.uncontended(recipe, path, n),
        Scenario::Contended(sessions) => side.contended(path, *sessions, n),
    }
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

/// One measured round between two `mntr` readings.
fn measure(
    side: &mut dyn Side,
    scenario: &Scenario,
    plan: &Plan,
    path: &str,
    mntr_addr: SocketAddr,
) -> Result<Run, String> {
    let total = match scenario {
        Scenario::RoundTrip => plan.roundtrips,
        Scenario::Uncontended(_) => plan.uncontended,
        Scenario::Contended(_) => plan.contended,
    };
    let n = (total / plan.rounds.max(1)).max(1);
    let before = packets_received(mntr_addr)?;
    let mut run = once(side, scenario, path, n)?;
    let after = packets_received(mntr_addr)?;
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
    }
}

/// Renders the report as a markdown table (ratios are ours / Curator).
pub fn render(report: &Report) -> String {
    let m = &report.machine;
    let rounds = report.rounds;
    let mut out = format!(
        "Machine: {} CPUs ({}), ZooKeeper {}, standalone on loopback; idle background {:.1} \
         packets/s; load average {:.1} at the start, {:.1} at the end. Percentiles are medians \
         of {} alternating rounds per side; \"zk-locks\" is our own client, \"crate backend\" \
         the same recipes over the `zookeeper` crate; ratios are zk-locks / Curator.\n\n",
        m.nproc, m.cpu, m.zookeeper, m.idle_packets_per_s, m.load_before, m.load_after, rounds
    );
    out.push_str(
        "| scenario | metric | zk-locks | crate backend | Curator 5.4 | zk-locks / Curator |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|\n");
    let us = |ns: u64| ns as f64 / 1e3;
    for row in &report.rows {
        let title = row.scenario.title();
        let (o, k, c) = (&row.ours, &row.ours_crate, &row.curator);
        let mut line = |metric: &str, ours: f64, via_crate: f64, theirs: f64, digits: usize| {
            let ratio = if theirs > 0.0 {
                format!("{:.2}", ours / theirs)
            } else {
                "–".into()
            };
            out.push_str(&format!(
                "| {title} | {metric} | {ours:.digits$} | {via_crate:.digits$} | {theirs:.digits$} \
                 | {ratio} |\n"
            ));
        };
        match row.scenario {
            Scenario::RoundTrip | Scenario::Uncontended(_) => {
                line("p50 µs", us(o.p50_ns), us(k.p50_ns), us(c.p50_ns), 0);
                line("p99 µs", us(o.p99_ns), us(k.p99_ns), us(c.p99_ns), 0);
                line("ops/s", o.per_second(), k.per_second(), c.per_second(), 0);
                line(
                    "requests/op",
                    o.requests_per_op(),
                    k.requests_per_op(),
                    c.requests_per_op(),
                    2,
                );
                line(
                    "round trips/op",
                    o.round_trips_per_op(),
                    k.round_trips_per_op(),
                    c.round_trips_per_op(),
                    2,
                );
            }
            Scenario::Contended(_) => {
                line(
                    "acquisitions/s",
                    o.per_second(),
                    k.per_second(),
                    c.per_second(),
                    0,
                );
                line(
                    "hand-off p50 µs",
                    us(o.p50_ns),
                    us(k.p50_ns),
                    us(c.p50_ns),
                    0,
                );
                line(
                    "hand-off p99 µs",
                    us(o.p99_ns),
                    us(k.p99_ns),
                    us(c.p99_ns),
                    0,
                );
                line(
                    "requests/acquisition",
                    o.requests_per_op(),
                    k.requests_per_op(),
                    c.requests_per_op(),
                    2,
                );
                line(
                    "round trips/acquisition",
                    o.round_trips_per_op(),
                    k.round_trips_per_op(),
                    c.round_trips_per_op(),
                    2,
                );
            }
        }
    }
    out
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
        packets: 0,
        round_trips: None,
    }
}

/// Which client our recipes run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// `client::native`.
    Native,
    /// `client::zookeeper` (the `zookeeper` crate).
    Crate,
}

/// zk-locks, in this process: one client (one session) per contender.
struct OurSide {
    clients: Vec<SharedClient>,
    /// The same clients, for their round-trip counts (native client only: the crate backend
    /// waits for every request, so its round trips are its requests).
    counting: Vec<Arc<CountingClient<SharedClient>>>,
}

impl OurSide {
    fn connect(connect: &str, sessions: usize, backend: Backend) -> Result<OurSide, String> {
        let clients = (0..sessions)
            .map(|_| {
                let client = match backend {
                    Backend::Native => {
                        NativeClient::connect(connect, SESSION_TIMEOUT).map(|c| c as SharedClient)
                    }
                    Backend::Crate => ZookeeperClient::connect(connect, SESSION_TIMEOUT)
                        .map(|c| c as SharedClient),
                };
                client.map_err(|e| format!("connecting to {connect}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if backend == Backend::Crate {
            return Ok(OurSide {
                clients,
                counting: Vec::new(),
            });
        }
        let counting: Vec<_> = clients
            .into_iter()
            .map(|c| Arc::new(CountingClient::new(c)))
            .collect();
        let clients = counting.iter().map(|c| c.clone() as SharedClient).collect();
        Ok(OurSide { clients, counting })
    }

    /// Round trips counted so far on every client (`None` when not counted).
    fn round_trips(&self) -> Option<u64> {
        (!self.counting.is_empty())
            .then(|| self.counting.iter().map(|c| c.counters().round_trips).sum())
    }

    /// `run` with the round trips made since `before`.
    fn with_round_trips(&self, mut run: Run, before: Option<u64>) -> Run {
        run.round_trips = self
            .round_trips()
            .zip(before)
            .map(|(after, before)| after - before);
        run
    }
}

/// A recipe's lock object (the read/write lock owns the pair its halves borrow from).
enum OurLock {
    Plain(Box<dyn InterProcessLock>),
    Write(InterProcessReadWriteLock),
    Read(InterProcessReadWriteLock),
}

impl OurLock {
    fn new(client: SharedClient, recipe: &str, path: &str) -> Result<OurLock, String> {
        let e = |e: zk_locks::Error| e.to_string();
        Ok(match recipe {
            "mutex" => OurLock::Plain(Box::new(InterProcessMutex::new(client, path).map_err(e)?)),
            "semaphore-mutex" => OurLock::Plain(Box::new(
                InterProcessSemaphoreMutex::new(client, path).map_err(e)?,
            )),
            "write" => OurLock::Write(InterProcessReadWriteLock::new(client, path).map_err(e)?),
            "read" => OurLock::Read(InterProcessReadWriteLock::new(client, path).map_err(e)?),
            other => return Err(format!("unknown recipe {other}")),
        })
    }

    fn get(&self) -> &dyn InterProcessLock {
        match self {
            OurLock::Plain(l) => l.as_ref(),
            OurLock::Write(rw) => rw.write_lock(),
            OurLock::Read(rw) => rw.read_lock(),
        }
    }
}

impl Side for OurSide {
    fn roundtrip(&mut self, path: &str, n: usize) -> Result<Run, String> {
        let client = &self.clients[0];
        let mut samples = Vec::with_capacity(n);
        let before = self.round_trips();
        let start = Instant::now();
        for _ in 0..n {
            let t = Instant::now();
            client.exists(path).map_err(|e| format!("exists: {e}"))?;
            samples.push(t.elapsed().as_nanos() as u64);
        }
        Ok(self.with_round_trips(summary(samples, start.elapsed()), before))
    }

    fn uncontended(&mut self, recipe: &str, path: &str, n: usize) -> Result<Run, String> {
        let lock = OurLock::new(self.clients[0].clone(), recipe, path)?;
        let lock = lock.get();
        let mut samples = Vec::with_capacity(n);
        let before = self.round_trips();
        let start = Instant::now();
        for _ in 0..n {
            let t = Instant::now();
            lock.acquire()
                .map_err(|e| format!("acquire {recipe}: {e}"))?;
            lock.release()
                .map_err(|e| format!("release {recipe}: {e}"))?;
            samples.push(t.elapsed().as_nanos() as u64);
        }
        Ok(self.with_round_trips(summary(samples, start.elapsed()), before))
    }

    /// Mirrors `CuratorBench.contended`: the hand-off runs from the moment a holder calls
    /// release to the moment the next holder's acquire returns.
    fn contended(&mut self, path: &str, sessions: usize, count: usize) -> Result<Run, String> {
        let clients = self
            .clients
            .get(..sessions)
            .ok_or_else(|| format!("{sessions} sessions: only {} connected", self.clients.len()))?;
        let base = Instant::now();
        let taken = Arc::new(AtomicU64::new(0));
        let released_at = Arc::new(AtomicU64::new(u64::MAX));
        let go = Arc::new(Barrier::new(sessions + 1));
        let threads: Vec<_> = clients
            .iter()
            .map(|client| {
                let lock = InterProcessMutex::new(client.clone(), path);
                let (taken, released_at, go) = (taken.clone(), released_at.clone(), go.clone());
                thread::spawn(move || -> Result<Vec<u64>, String> {
                    let lock = lock.map_err(|e| e.to_string())?;
                    let mut handoffs = Vec::with_capacity(count);
                    go.wait();
                    loop {
                        lock.acquire().map_err(|e| format!("acquire: {e}"))?;
                        let now = base.elapsed().as_nanos() as u64;
                        let prev = released_at.load(Ordering::SeqCst);
                        if prev != u64::MAX {
                            handoffs.push(now.saturating_sub(prev));
                        }
                        let total = taken.fetch_add(1, Ordering::SeqCst) + 1;
                        released_at.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                        lock.release().map_err(|e| format!("release: {e}"))?;
                        if total >= count as u64 {
                            return Ok(handoffs);
                        }
                    }
                })
            })
            .collect();
        let before = self.round_trips();
        go.wait();
        let start = Instant::now();
        let mut all = Vec::new();
        for t in threads {
            all.extend(t.join().map_err(|_| "a contender panicked".to_string())??);
        }
        let mut run = self.with_round_trips(summary(all, start.elapsed()), before);
        run.n = taken.load(Ordering::SeqCst);
        Ok(run)
    }
}

/// Curator 5.4 in a JVM, driven line by line over stdin/stdout.
struct CuratorSide {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl CuratorSide {
    fn start(connect: &str, sessions: usize, class_dir: &Path) -> Result<CuratorSide, String> {
        let source =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("recipes/compare/CuratorBench.java");
        curator::compile(&[source], class_dir).map_err(|e| e.to_string())?;
        let mut child = curator::java(class_dir, "CuratorBench")
            .map_err(|e| e.to_string())?
            .arg(connect)
            .arg(sessions.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting java: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut side = CuratorSide {
            child,
            stdin,
            stdout,
        };
        match side.read_line()?.as_str() {
            "READY" => Ok(side),
            other => Err(format!("CuratorBench did not start: {other}")),
        }
    }

    fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("CuratorBench exited".into()),
            Ok(_) => Ok(line.trim().to_string()),
            Err(e) => Err(format!("reading from CuratorBench: {e}")),
        }
    }

    fn command(&mut self, command: &str) -> Result<Run, String> {
        writeln!(self.stdin, "{command}").map_err(|e| format!("writing to CuratorBench: {e}"))?;
        self.stdin.flush().map_err(|e| e.to_string())?;
        let line = self.read_line()?;
        parse_result(&line).ok_or_else(|| format!("CuratorBench, on {command:?}: {line}"))
    }

    fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

impl Drop for CuratorSide {
    fn drop(&mut self) {
        // After `quit` the child has exited and this is a no-op; on an error path it is not.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Side for CuratorSide {
    fn roundtrip(&mut self, path: &str, n: usize) -> Result<Run, String> {
        self.command(&format!("roundtrip {path} {n}"))
    }

    fn uncontended(&mut self, recipe: &str, path: &str, n: usize) -> Result<Run, String> {
        self.command(&format!("uncontended {recipe} {path} {n}"))
    }

    fn contended(&mut self, path: &str, sessions: usize, count: usize) -> Result<Run, String> {
        self.command(&format!("contended {path} {sessions} {count}"))
    }
}

/// Parses `RESULT kind=.. n=.. p50_ns=.. p99_ns=.. elapsed_ns=..`.
fn parse_result(line: &str) -> Option<Run> {
    let rest = line.strip_prefix("RESULT ")?;
    let field = |key: &str| -> Option<u64> {
        rest.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    Some(Run {
        n: field("n")?,
        p50_ns: field("p50_ns")?,
        p99_ns: field("p99_ns")?,
        elapsed_ns: field("elapsed_ns")?,
        packets: 0,
        round_trips: None,
    })
}

/// The first server of a connect string (for the four-letter words).
fn first_address(connect: &str) -> Result<SocketAddr, String> {
    let hosts = connect.split('/').next().unwrap_or(connect);
    let first = hosts.split(',').next().unwrap_or(hosts);
    let first = if first.contains(':') {
        first.to_string()
    } else {
        format!("{first}:2181")
    };
    first
        .to_socket_addrs()
        .map_err(|e| format!("resolving {first}: {e}"))?
        .next()
        .ok_or_else(|| format!("{first} resolves to nothing"))
}

fn four_letter(addr: SocketAddr, cmd: &str) -> Result<String, String> {
    let err = |e: std::io::Error| format!("{cmd} to {addr}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(err)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(err)?;
    stream.write_all(cmd.as_bytes()).map_err(err)?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).map_err(err)?;
    Ok(reply)
}

/// The server's `zk_packets_received`: every request any client sent (pings included).
fn packets_received(addr: SocketAddr) -> Result<u64, String> {
    let reply = four_letter(addr, "mntr")?;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("zk_packets_received")?.trim().parse().ok())
        .ok_or_else(|| format!("no zk_packets_received in mntr (is mntr whitelisted?): {reply}"))
}

/// Packets per second while nothing runs: sessions' pings and heartbeats.
fn idle_rate(addr: SocketAddr) -> Result<f64, String> {
    let window = Duration::from_millis(1500);
    let before = packets_received(addr)?;
    let start = Instant::now();
    thread::sleep(window); // measuring a rate over wall time, not synchronising
    let after = packets_received(addr)?;
    Ok(after.saturating_sub(before) as f64 / start.elapsed().as_secs_f64())
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn machine(addr: SocketAddr) -> Result<Machine, String> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let srvr = four_letter(addr, "srvr")?;
    let zookeeper = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version:"))
        .map(|v| v.split(',').next().unwrap_or(v).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    Ok(Machine {
        nproc: thread::available_parallelism().map_or(1, |n| n.get()),
        cpu,
        zookeeper,
        ..Machine::default()
    })
}
