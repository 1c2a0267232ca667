//! What proving a session to the quorum costs: sessions that hold locks send a `sync` every
//! `T/24` (the leader must answer it) and a write every `T/6` (a `multi` of one `check`: a
//! quorum commits it), whatever the number of locks they hold; idle sessions ping as before.
//! Measured on the servers: the requests they received (`mntr` `zk_packets_received`, summed
//! over the members), the transactions the leader committed (its zxid, from `srvr`), and the
//! CPU time of the leader's JVM and of
//! every member (`/proc/<pid>/stat`), over windows in which the same sessions are idle, hold
//! one lock each, hold many locks, and are idle again (`T` after the last release, when the
//! proof stops). The program is `measurements/holder_cost.rs`; `tests/holder_cost_smoke.rs`
//! runs it tiny.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::testing::harness::four_letter;
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

use crate::compare::cpu::{listening_pid, process_cpu_ns};

/// What a run does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Client sessions (each a `NativeClient`).
    pub sessions: usize,
    /// Locks held in the "many locks" window, spread over the sessions (lock `k` on session
    /// `k mod sessions`).
    pub locks: usize,
    /// The session timeout asked for (`T`; the servers may negotiate another).
    pub session_timeout: Duration,
    /// Each measured window.
    pub window: Duration,
    /// Time after the locks are taken and before the window opens (the acquisitions'
    /// requests stay out of it).
    pub settle: Duration,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            sessions: 20,
            locks: 1000,
            session_timeout: Duration::from_secs(10),
            window: Duration::from_secs(60),
            settle: Duration::from_secs(3),
        }
    }
}

/// Where the servers are.
#[derive(Debug, Clone)]
pub struct Servers {
    /// The clients' connect string.
    pub connect: String,
    /// Every member's client address (for `mntr` and the CPU time of its process).
    pub members: Vec<SocketAddr>,
    /// The leader's index in `members` (a standalone server is its own leader).
    pub leader: usize,
}

/// One measured window.
#[derive(Debug, Clone)]
pub struct Window {
    /// What the sessions were doing.
    pub label: String,
    /// Locks held through the window.
    pub locks: usize,
    /// Its length.
    pub elapsed: Duration,
    /// Requests the members received (pings included), summed.
    pub packets: u64,
    /// Transactions the leader committed (its zxid's advance within the epoch).
    pub writes: u64,
    /// The leader's process CPU time, if it could be read.
    pub leader_cpu_ns: Option<u64>,
    /// Every member's process CPU time summed, if each could be read.
    pub members_cpu_ns: Option<u64>,
    /// The one-minute load average at the window's end.
    pub load: f64,
}

impl Window {
    /// Requests per second received by the members.
    pub fn packets_per_second(&self) -> f64 {
        self.packets as f64 / self.elapsed.as_secs_f64()
    }

    /// Transactions per second committed by the ensemble.
    pub fn writes_per_second(&self) -> f64 {
        self.writes as f64 / self.elapsed.as_secs_f64()
    }

    /// CPU time per wall time (1.0 = one core busy).
    fn cores(ns: Option<u64>, elapsed: Duration) -> Option<f64> {
        ns.map(|ns| ns as f64 / elapsed.as_nanos() as f64)
    }

    /// The leader's CPU, in cores.
    pub fn leader_cores(&self) -> Option<f64> {
        Self::cores(self.leader_cpu_ns, self.elapsed)
    }

    /// Every member's CPU, in cores.
    pub fn members_cores(&self) -> Option<f64> {
        Self::cores(self.members_cpu_ns, self.elapsed)
    }
}

/// A run's windows, in order: idle, one lock per session, `plan.locks` locks, idle again.
#[derive(Debug, Clone)]
pub struct Report {
    /// The plan run.
    pub plan: Plan,
    /// The timeout the servers granted (the syncs' period is a 24th of it).
    pub negotiated: Duration,
    /// The measured windows.
    pub windows: Vec<Window>,
}

impl Report {
    /// Requests per second of a held window above the first idle one.
    pub fn extra_per_second(&self, held: &Window) -> f64 {
        held.packets_per_second() - self.windows[0].packets_per_second()
    }

    /// What the design sends on top of an idle session's pings: `24/T` syncs and `6/T`
    /// writes per session, any number of locks (less the pings they make unnecessary).
    pub fn expected_syncs_per_second(&self) -> f64 {
        (24.0 + 6.0) / self.negotiated.as_secs_f64() * self.plan.sessions as f64
    }

    /// The writes the design sends: `6/T` per proving session.
    pub fn expected_writes_per_second(&self) -> f64 {
        6.0 / self.negotiated.as_secs_f64() * self.plan.sessions as f64
    }
}

/// The leader's last committed zxid's counter (its low 32 bits), from `srvr`.
fn leader_zxid_counter(addr: SocketAddr) -> Result<u64, String> {
    let reply = four_letter(addr, "srvr").map_err(|e| format!("srvr on {addr}: {e}"))?;
    let zxid = reply
        .lines()
        .find_map(|l| l.strip_prefix("Zxid:")?.trim().strip_prefix("0x"))
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| format!("no Zxid in srvr of {addr}"))?;
    Ok(zxid & 0xffff_ffff)
}

fn packets_received(addr: SocketAddr) -> Result<u64, String> {
    let reply = four_letter(addr, "mntr").map_err(|e| format!("mntr on {addr}: {e}"))?;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("zk_packets_received")?.trim().parse().ok())
        .ok_or_else(|| format!("no zk_packets_received in mntr of {addr}"))
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Reads the counters around one window of `length`.
fn measure(
    servers: &Servers,
    pids: &[Option<u32>],
    label: &str,
    locks: usize,
    length: Duration,
) -> Result<Window, String> {
    let cpu = || -> Vec<Option<u64>> {
        pids.iter()
            .map(|p| p.and_then(process_cpu_ns))
            .collect::<Vec<_>>()
    };
    let count =
        || -> Result<u64, String> { servers.members.iter().map(|&m| packets_received(m)).sum() };
    let leader = servers.members[servers.leader];
    let (zxid_before, packets_before) = (leader_zxid_counter(leader)?, count()?);
    let (cpu_before, start) = (cpu(), Instant::now());
    std::thread::sleep(length); // a rate over wall time: nothing to wait for
    let (packets_after, cpu_after, elapsed) = (count()?, cpu(), start.elapsed());
    let zxid_after = leader_zxid_counter(leader)?;
    let spent: Vec<Option<u64>> = cpu_before
        .iter()
        .zip(&cpu_after)
        .map(|(b, a)| Some(a.as_ref()?.saturating_sub(*b.as_ref()?)))
        .collect();
    let window = Window {
        label: label.into(),
        locks,
        elapsed,
        packets: packets_after.saturating_sub(packets_before),
        writes: zxid_after.saturating_sub(zxid_before),
        leader_cpu_ns: spent.get(servers.leader).copied().flatten(),
        members_cpu_ns: spent.iter().copied().sum(),
        load: load_average(),
    };
    eprintln!(
        "{label}: {:.1} requests/s, {:.1} writes/s, leader {:?} cores, load {:.2}",
        window.packets_per_second(),
        window.writes_per_second(),
        window.leader_cores(),
        window.load
    );
    Ok(window)
}

/// Takes `count` mutexes under `root`, lock `k` on session `k mod sessions`.
fn hold(
    clients: &[Arc<NativeClient>],
    root: &str,
    count: usize,
) -> Result<Vec<InterProcessMutex>, String> {
    (0..count)
        .map(|k| {
            let client = clients[k % clients.len()].clone() as SharedClient;
            let lock = InterProcessMutex::new(client, &format!("{root}/lock-{k}"))
                .map_err(|e| e.to_string())?;
            lock.acquire().map_err(|e| format!("lock {k}: {e}"))?;
            Ok(lock)
        })
        .collect()
}

fn release(locks: Vec<InterProcessMutex>) -> Result<(), String> {
    for lock in locks {
        lock.release().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Runs the windows against `servers`, under the path `root`.
pub fn run(servers: &Servers, plan: &Plan, root: &str) -> Result<Report, String> {
    if plan.sessions == 0 {
        return Err("at least one session".into());
    }
    let pids: Vec<Option<u32>> = servers.members.iter().map(|&m| listening_pid(m)).collect();
    let clients = (0..plan.sessions)
        .map(|_| {
            NativeClient::connect_with(
                NativeOptions::new(servers.connect.as_str()).session_timeout(plan.session_timeout),
            )
            .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    let negotiated = clients[0].negotiated_timeout();
    let mut windows = Vec::new();
    std::thread::sleep(plan.settle); // the connects' requests stay out of the idle window
    windows.push(measure(servers, &pids, "idle", 0, plan.window)?);

    let one_each = hold(&clients, root, plan.sessions)?;
    std::thread::sleep(plan.settle);
    let label = "one lock per session";
    windows.push(measure(servers, &pids, label, plan.sessions, plan.window)?);
    release(one_each)?;

    let many = hold(&clients, root, plan.locks)?;
    std::thread::sleep(plan.settle);
    let label = format!("{} locks over {} sessions", plan.locks, plan.sessions);
    windows.push(measure(servers, &pids, &label, plan.locks, plan.window)?);
    release(many)?;

    // Proving goes on for `T` after the last lock is let go.
    std::thread::sleep(negotiated + plan.settle);
    windows.push(measure(servers, &pids, "idle again", 0, plan.window)?);
    for client in clients {
        client.close();
    }
    Ok(Report {
        plan: plan.clone(),
        negotiated,
        windows,
    })
}

/// The report as a markdown table.
pub fn render(report: &Report) -> String {
    let mut out = format!(
        "{} sessions, T = {} ms negotiated (a sync every T/24 = {:.0} ms and a write every \
         T/6 per proving session: {:.1} requests/s, {:.1} of them writes, over all of them)\n\n",
        report.plan.sessions,
        report.negotiated.as_millis(),
        report.negotiated.as_secs_f64() * 1000.0 / 24.0,
        report.expected_syncs_per_second(),
        report.expected_writes_per_second()
    );
    out.push_str(
        "| window | locks held | requests/s (all members) | above idle | above idle per session \
         | writes/s | leader CPU | all members' CPU | load |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let cores = |c: Option<f64>| c.map_or("–".into(), |c| format!("{:.1}%", c * 100.0));
    for w in &report.windows {
        let extra = report.extra_per_second(w);
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:+.1} | {:+.2} | {:.1} | {} | {} | {:.2} |\n",
            w.label,
            w.locks,
            w.packets_per_second(),
            extra,
            extra / report.plan.sessions as f64,
            w.writes_per_second(),
            cores(w.leader_cores()),
            cores(w.members_cores()),
            w.load
        ));
    }
    out
}
