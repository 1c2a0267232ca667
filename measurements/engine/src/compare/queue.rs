//! The long queue, side by side: one mutex held by a holder session, `waiters` threads over
//! `sessions` sessions of their own queued behind it; the holder releases and the queue
//! drains (each waiter acquires once and releases at once). Both sides run the same steps
//! (`OurQueue` here, `CuratorQueue.java` there): open the sessions, hold the lock, start the
//! waiters; the driver waits until the server shows every waiter queued and watching, reads
//! the side's resident memory, then releases the holder between two readings of the server's
//! counters (requests received, watches triggered) and of the CPU time spent.
//!
//! Run by `measurements/compare.rs` with `--queue` (after the other scenarios) or
//! `--queue-only`; `tests/compare_queue_smoke.rs` runs a tiny one.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zk_locks::client::native::NativeClient;
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

use super::cpu;
use super::curator_side::CuratorSide;
use super::probes::{first_address, load_average, machine, packets_received};
use super::{summary, Machine, Run, SESSION_TIMEOUT};

/// One long queue: `waiters` threads spread over `sessions` sessions (plus the holder's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queue {
    /// Waiting threads.
    pub waiters: usize,
    /// Sessions the waiters are spread over (waiter `i` on session `i % sessions`).
    pub sessions: usize,
}

impl Queue {
    /// The scenario's name in the table.
    pub fn title(&self) -> String {
        format!(
            "queue of {} waiters over {} sessions",
            self.waiters, self.sessions
        )
    }
}

/// Which queues, how many rounds.
#[derive(Debug, Clone)]
pub struct QueuePlan {
    /// The queues, in the order they run.
    pub queues: Vec<Queue>,
    /// Rounds per queue and side, alternating between the sides.
    pub rounds: usize,
}

impl QueuePlan {
    /// 1,000 waiters over 20 sessions, 200 over 200; 3 rounds (about 2 minutes on 2 cores).
    pub fn full() -> QueuePlan {
        QueuePlan {
            queues: vec![
                Queue {
                    waiters: 1000,
                    sessions: 20,
                },
                Queue {
                    waiters: 200,
                    sessions: 200,
                },
            ],
            rounds: 3,
        }
    }

    /// The same queues, one round.
    pub fn quick() -> QueuePlan {
        QueuePlan {
            rounds: 1,
            ..QueuePlan::full()
        }
    }

    /// A smoke run: 20 waiters over 4 sessions, one round.
    pub fn tiny() -> QueuePlan {
        QueuePlan {
            queues: vec![Queue {
                waiters: 20,
                sessions: 4,
            }],
            rounds: 1,
        }
    }
}

/// One drain of one side.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueRun {
    /// Acquisitions (`n`), hand-off p50/p99 (from a release's call to the next holder's
    /// acquire returning), the drain's wall time (from the holder's release to the last
    /// waiter's release), requests received by the server, server and client CPU.
    pub drain: Run,
    /// Watches the server triggered during the drain (`mntr`: the sums of
    /// `node_{created,deleted,changed,children}_watch_count`); `None` when the server does
    /// not report them.
    pub notifications: Option<u64>,
    /// Growth of the side's resident memory from before its sessions were opened to every
    /// waiter queued and watching, bytes.
    pub rss_growth: u64,
}

impl QueueRun {
    /// Watch notifications per release (the holder's and every waiter's but the last one's,
    /// whose release nobody watches: one per acquisition).
    pub fn notifications_per_release(&self) -> f64 {
        self.notifications
            .map_or(f64::NAN, |n| n as f64 / self.drain.n.max(1) as f64)
    }
}

/// Every round of both sides of one queue.
#[derive(Debug, Clone)]
pub struct QueueRow {
    /// The queue.
    pub queue: Queue,
    /// zk-locks on its own client, one entry per round.
    pub ours: Vec<QueueRun>,
    /// Curator 5.4, one entry per round.
    pub curator: Vec<QueueRun>,
}

/// The long queues.
#[derive(Debug, Clone)]
pub struct QueueReport {
    /// The machine (load average before and after the queues).
    pub machine: Machine,
    /// One row per queue.
    pub rows: Vec<QueueRow>,
}

/// One side of the long queue.
trait QueueSide {
    /// The process whose memory and CPU time are this side's.
    fn pid(&self) -> u32;
    /// Opens the sessions, takes the lock and starts the waiters (they go on queueing).
    fn start(&mut self, connect: &str, path: &str, queue: Queue) -> Result<(), String>;
    /// Releases the holder's lock and waits for every waiter.
    fn drain(&mut self) -> Result<Run, String>;
    /// Closes the queue's sessions (after the drain's counters were read).
    fn close(&mut self) -> Result<(), String>;
}

/// Runs every queue of `plan` on our client and on Curator against the server at `connect`.
pub fn run_queues(
    connect: &str,
    plan: &QueuePlan,
    class_dir: &std::path::Path,
) -> Result<QueueReport, String> {
    let mntr = first_address(connect)?;
    let server_pid = cpu::listening_pid(mntr);
    let probe = NativeClient::connect(connect, SESSION_TIMEOUT)
        .map_err(|e| format!("connecting to {connect}: {e}"))?;
    let mut curator = CuratorSide::start(connect, 1, class_dir)?;
    let mut ours = OurQueue::default();
    let mut machine = Machine {
        load_before: load_average(),
        ..machine(mntr)?
    };
    let root = format!("/zk-locks-queue-{}", std::process::id());
    let mut rows = Vec::new();
    for (i, &queue) in plan.queues.iter().enumerate() {
        let mut row = QueueRow {
            queue,
            ours: Vec::new(),
            curator: Vec::new(),
        };
        for round in 0..plan.rounds.max(1) {
            let at = Where {
                connect,
                mntr,
                server_pid,
                probe: &probe,
            };
            let path = format!("{root}/ours-{i}-{round}");
            row.ours.push(at.measure(&mut ours, &path, queue)?);
            let path = format!("{root}/curator-{i}-{round}");
            row.curator.push(at.measure(&mut curator, &path, queue)?);
        }
        rows.push(row);
    }
    machine.load_after = load_average();
    curator.quit();
    probe.close();
    Ok(QueueReport { machine, rows })
}

/// Where a round runs and what it reads.
struct Where<'a> {
    connect: &'a str,
    mntr: SocketAddr,
    server_pid: Option<u32>,
    probe: &'a NativeClient,
}

impl Where<'_> {
    fn measure(
        &self,
        side: &mut dyn QueueSide,
        path: &str,
        queue: Queue,
    ) -> Result<QueueRun, String> {
        let rss_before = rss_bytes(side.pid()).unwrap_or(0);
        side.start(self.connect, path, queue)?;
        self.wait_queued(path, queue.waiters)?;
        let rss_growth = rss_bytes(side.pid())
            .unwrap_or(0)
            .saturating_sub(rss_before);
        let cpu = |pid: Option<u32>| pid.and_then(cpu::process_cpu_ns);
        let client_pid = Some(side.pid());
        let (server_before, client_before) = (cpu(self.server_pid), cpu(client_pid));
        let (packets_before, watches_before) =
            (packets_received(self.mntr)?, watches_triggered(self.mntr)?);
        let mut drain = side.drain()?;
        let (packets_after, watches_after) =
            (packets_received(self.mntr)?, watches_triggered(self.mntr)?);
        let (server_after, client_after) = (cpu(self.server_pid), cpu(client_pid));
        side.close()?;
        let spent = |before: Option<u64>, after: Option<u64>| Some(after?.saturating_sub(before?));
        drain.server_cpu_ns = spent(server_before, server_after);
        drain.client_cpu_ns = spent(client_before, client_after);
        drain.packets = packets_after.saturating_sub(packets_before);
        Ok(QueueRun {
            drain,
            notifications: spent(watches_before, watches_after),
            rss_growth,
        })
    }

    /// Polls the server until the lock directory holds the holder's node and every waiter's,
    /// and the server holds a watch for each waiter (`wchs`).
    fn wait_queued(&self, path: &str, waiters: usize) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let children = match self.probe.exists(path) {
                Ok(Some(stat)) => stat.num_children as usize,
                Ok(None) => 0,
                Err(e) => return Err(format!("exists {path}: {e}")),
            };
            if children > waiters && total_watches(self.mntr)? >= waiters as u64 {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("{waiters} waiters did not queue on {path}"));
            }
            // Polling a state other processes build, not synchronising with our own threads.
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The server's `wchs` total: watches held for every session.
fn total_watches(addr: SocketAddr) -> Result<u64, String> {
    let reply = zk_locks::testing::harness::four_letter(addr, "wchs").map_err(|e| e.to_string())?;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("Total watches:")?.trim().parse().ok())
        .ok_or_else(|| format!("no total in wchs: {reply}"))
}

/// Watches the server has triggered so far (every kind), `None` when `mntr` does not say.
fn watches_triggered(addr: SocketAddr) -> Result<Option<u64>, String> {
    let reply = zk_locks::testing::harness::four_letter(addr, "mntr").map_err(|e| e.to_string())?;
    let sums: Vec<u64> = reply
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("zk_sum_node_")?;
            let (name, value) = rest.split_once(char::is_whitespace)?;
            name.ends_with("_watch_count")
                .then(|| value.trim().parse::<f64>().ok())?
                .map(|v| v as u64)
        })
        .collect();
    Ok((!sums.is_empty()).then(|| sums.iter().sum()))
}

/// Resident memory of process `pid`, bytes.
fn rss_bytes(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    Some(pages * page)
}

impl QueueSide for CuratorSide {
    fn pid(&self) -> u32 {
        super::Side::pid(self)
    }

    fn start(&mut self, connect: &str, path: &str, queue: Queue) -> Result<(), String> {
        let Queue { waiters, sessions } = queue;
        self.send_line(&format!("queue {connect} {path} {waiters} {sessions}"))?;
        match self.read_line()?.as_str() {
            "STARTED" => Ok(()),
            other => Err(format!("CuratorBench, on queue: {other}")),
        }
    }

    fn drain(&mut self) -> Result<Run, String> {
        self.command("drain")
    }

    fn close(&mut self) -> Result<(), String> {
        self.send_line("queue-close")?;
        match self.read_line()?.as_str() {
            "CLOSED" => Ok(()),
            other => Err(format!("CuratorBench, on queue-close: {other}")),
        }
    }
}

/// Our side: the holder's session and the waiters' own, on `NativeClient`.
#[derive(Default)]
struct OurQueue {
    clients: Vec<SharedClient>,
    holder: Option<InterProcessMutex>,
    threads: Vec<JoinHandle<Result<(), String>>>,
    handoffs: Arc<Mutex<Vec<u64>>>,
    taken: Arc<AtomicUsize>,
    released_at: Arc<AtomicU64>,
    base: Option<Instant>,
}

impl QueueSide for OurQueue {
    fn pid(&self) -> u32 {
        std::process::id()
    }

    fn start(&mut self, connect: &str, path: &str, queue: Queue) -> Result<(), String> {
        if self.holder.is_some() {
            return Err("a queue is already running".into());
        }
        self.clients = (0..=queue.sessions)
            .map(|_| {
                NativeClient::connect(connect, SESSION_TIMEOUT)
                    .map(|c| c as SharedClient)
                    .map_err(|e| format!("connecting to {connect}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        let e = |e: zk_locks::Error| e.to_string();
        let holder = InterProcessMutex::new(self.clients[0].clone(), path).map_err(e)?;
        holder.acquire().map_err(e)?;
        self.holder = Some(holder);
        let base = *self.base.get_or_insert_with(Instant::now);
        self.handoffs = Arc::new(Mutex::new(Vec::with_capacity(queue.waiters)));
        self.taken = Arc::new(AtomicUsize::new(0));
        self.released_at = Arc::new(AtomicU64::new(0));
        for i in 0..queue.waiters {
            let client = self.clients[1 + i % queue.sessions.max(1)].clone();
            let lock = InterProcessMutex::new(client, path).map_err(e)?;
            let (handoffs, taken, released_at) = (
                self.handoffs.clone(),
                self.taken.clone(),
                self.released_at.clone(),
            );
            self.threads.push(thread::spawn(move || {
                lock.acquire().map_err(|e| format!("acquire: {e}"))?;
                let now = base.elapsed().as_nanos() as u64;
                let prev = released_at.load(Ordering::SeqCst);
                handoffs.lock().push(now.saturating_sub(prev));
                taken.fetch_add(1, Ordering::SeqCst);
                released_at.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                lock.release().map_err(|e| format!("release: {e}"))
            }));
        }
        Ok(())
    }

    fn drain(&mut self) -> Result<Run, String> {
        let holder = self.holder.take().ok_or("no queue")?;
        let base = self.base.ok_or("no queue")?;
        let start = Instant::now();
        self.released_at
            .store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
        holder.release().map_err(|e| format!("release: {e}"))?;
        let mut failure = None;
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failure = Some(e),
                Err(_) => failure = Some("a waiter panicked".into()),
            }
        }
        let elapsed = start.elapsed();
        if let Some(e) = failure {
            return Err(e);
        }
        let mut run = summary(std::mem::take(&mut *self.handoffs.lock()), elapsed);
        run.n = self.taken.load(Ordering::SeqCst) as u64;
        Ok(run)
    }

    fn close(&mut self) -> Result<(), String> {
        for client in self.clients.drain(..) {
            client.close();
        }
        Ok(())
    }
}

/// The long queues as rows of the compare table (the crate backend is not run here: "–").
/// Rates and memory are medians of the rounds; per-acquisition figures are over all rounds.
pub fn render_queues(report: &QueueReport) -> String {
    let m = &report.machine;
    let mut out = format!(
        "Long queues: load average {:.1} at the start, {:.1} at the end; medians of the \
         rounds' rates and percentiles, requests and notifications over all rounds, resident \
         memory per waiter the largest of the rounds.\n\n",
        m.load_before, m.load_after
    );
    out.push_str(
        "| scenario | metric | zk-locks | crate backend | Curator 5.4 | zk-locks / Curator |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|\n");
    for row in &report.rows {
        let title = row.queue.title();
        let mut line = |metric: &str, f: &dyn Fn(&[QueueRun]) -> f64, digits: usize| {
            let (ours, theirs) = (f(&row.ours), f(&row.curator));
            let cell = |v: f64| match v.is_nan() {
                true => "–".to_string(),
                false => format!("{v:.digits$}"),
            };
            let ratio = match theirs > 0.0 && !ours.is_nan() {
                true => format!("{:.2}", ours / theirs),
                false => "–".into(),
            };
            out.push_str(&format!(
                "| {title} | {metric} | {} | – | {} | {ratio} |\n",
                cell(ours),
                cell(theirs)
            ));
        };
        let waiters = row.queue.waiters as f64;
        line(
            "drain acquisitions/s",
            &|r| median(r, |q| q.drain.per_second()),
            0,
        );
        line(
            "hand-off p50 µs",
            &|r| median(r, |q| q.drain.p50_ns as f64 / 1e3),
            0,
        );
        line(
            "hand-off p99 µs",
            &|r| median(r, |q| q.drain.p99_ns as f64 / 1e3),
            0,
        );
        line(
            "requests/acquisition",
            &|r| total(r, |q| q.drain.packets as f64) / total(r, |q| q.drain.n as f64),
            2,
        );
        line(
            "notifications/release",
            &|r| match r.iter().all(|q| q.notifications.is_some()) {
                true => {
                    total(r, |q| q.notifications.unwrap_or(0) as f64)
                        / total(r, |q| q.drain.n as f64)
                }
                false => f64::NAN,
            },
            2,
        );
        line(
            "server CPU µs/acquisition",
            &|r| median(r, |q| q.drain.server_cpu_us_per_op()),
            0,
        );
        line(
            "client CPU µs/acquisition",
            &|r| median(r, |q| q.drain.client_cpu_us_per_op()),
            0,
        );
        line(
            "resident KiB/waiter",
            &|r| {
                r.iter()
                    .map(|q| q.rss_growth as f64 / 1024.0 / waiters)
                    .fold(f64::NAN, f64::max)
            },
            1,
        );
    }
    out
}

/// The median of `f` over the rounds (NaN when there are none).
pub(super) fn median(runs: &[QueueRun], f: impl Fn(&QueueRun) -> f64) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn total(runs: &[QueueRun], f: impl Fn(&QueueRun) -> f64) -> f64 {
    runs.iter().map(f).sum()
}
