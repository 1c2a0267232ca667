//! Two holders at once? A holder whose session the leader expires while the holder still
//! hears from its member (issue 32): zk-locks against Curator 5.4, one mutex, a waiter taking
//! it as soon as the server lets it, and the overlap measured: from the waiter's acquisition
//! until the holder stopped believing it held the lock (0 when it stopped first).
//!
//! Faults (`Fault`):
//! - **partition**: a 3-member ensemble, each member in its own network namespace (tickTime
//!   2 s, syncLimit 5, as in the issue); the holder's session on a follower, with that member
//!   alone in its connect string (nowhere to go, so the session must expire); the follower cut
//!   off from the other two at a random point of the holder's first `T/3`; the waiter on the
//!   majority side. Needs root and `ip` (`zk_locks::testing::partition`).
//! - **frozen link**: one server (tickTime 500 ms); the holder through a `FaultProxy` frozen
//!   (no byte either way, sockets open) at a random point of its first `T/3`, until the holder
//!   stopped (a link that came back sooner would tell it at once); the waiter straight on the
//!   server.
//!
//! Each holder stops by its library's rule: zk-locks when its guard leaves `Held`
//! (`wait_while_held` returns); Curator when its application sees `LOST`, or `SUSPENDED`
//! (two rules, timed in the same trial). The waiter is a zk-locks client in this process for
//! both: the server decides when it gets the lock, not its library. Times are
//! `CLOCK_MONOTONIC` on every side. The program is `measurements/overlap.rs`.
//!
//! Table of contents: this file runs the trials; `sides` holds the two holders; `report`
//! turns the trials into the table.

mod report;
mod sides;

use std::sync::mpsc;
use std::time::Duration;

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::testing::{FaultProxy, TestingCluster, TestingServer};
use zk_locks::{InterProcessLock, InterProcessMutex, ZkClient};

pub use report::{render, Trial};
pub use sides::{Curator, Ends, Holder, Ours};

use crate::failover::mono_ns;

/// The partitioned ensemble's `tickTime` (the issue's).
pub const PARTITION_TICK: Duration = Duration::from_secs(2);
/// The partitioned ensemble's `syncLimit` (the issue's).
pub const PARTITION_SYNC_LIMIT: u32 = 5;

/// How the holder is separated from the ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The holder's follower cut off from the other members.
    Partition,
    /// The holder's link frozen past its session.
    FrozenLink,
}

impl Fault {
    /// How the report names it.
    pub fn label(self) -> &'static str {
        match self {
            Fault::Partition => "follower cut off",
            Fault::FrozenLink => "link frozen",
        }
    }
}

/// What a run does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Trials per fault, session timeout and library.
    pub trials: usize,
    /// Session timeouts of the partition.
    pub partition_sessions: Vec<Duration>,
    /// Session timeouts of the frozen link.
    pub frozen_sessions: Vec<Duration>,
    /// Run Curator beside us.
    pub curator: bool,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            trials: 3,
            partition_sessions: vec![Duration::from_secs(4), Duration::from_secs(12)],
            frozen_sessions: vec![Duration::from_secs(4), Duration::from_secs(10)],
            curator: true,
        }
    }
}

/// A random delay within the holder's first `T/3`: the cut lands anywhere in the ping cycle.
fn somewhere_in_the_ping_cycle(session: Duration) {
    let third = (session.as_millis() / 3).max(1) as u64;
    let ns = mono_ns() % (third * 1_000_000);
    std::thread::sleep(Duration::from_nanos(ns));
}

/// A zk-locks waiter on `connect` for the mutex at `path`, trying for `within`: when it
/// acquired (`None`: not within), sent once.
fn waiter(
    connect: &str,
    session: Duration,
    path: &str,
    within: Duration,
) -> mpsc::Receiver<Option<u64>> {
    let (tx, rx) = mpsc::channel();
    let (connect, path) = (connect.to_string(), path.to_string());
    std::thread::spawn(move || {
        let got = (|| -> Result<Option<u64>, String> {
            let client = NativeClient::connect_with(
                NativeOptions::new(connect.as_str())
                    .session_timeout(session)
                    .connect_timeout(Duration::from_secs(30)),
            )
            .map_err(|e| e.to_string())?;
            let mutex = InterProcessMutex::new(client.clone(), &path).map_err(|e| e.to_string())?;
            let got = mutex.try_lock_for(within).map_err(|e| e.to_string())?;
            let at = got.map(|_guard| mono_ns());
            client.close();
            Ok(at)
        })();
        if let Err(e) = &got {
            eprintln!("overlap: waiter: {e}");
        }
        let _ = tx.send(got.ok().flatten());
    });
    rx
}

/// After the fault at `struck`: the waiter's acquisition, then the holder's ends.
fn outcome(
    holder: &mut dyn Holder,
    waiting: mpsc::Receiver<Option<u64>>,
    bound: Duration,
    fault: Fault,
    session: Duration,
    struck: u64,
    heal: impl FnOnce(),
) -> Result<Trial, String> {
    let granted = waiting
        .recv_timeout(bound + Duration::from_secs(30))
        .ok()
        .flatten();
    let waited = Duration::from_nanos(mono_ns().saturating_sub(struck));
    let ends = holder.ends(bound.saturating_sub(waited))?;
    // Healed only once the holder stopped: a link back earlier would tell it at once.
    heal();
    holder.close()?;
    let trial = Trial {
        fault,
        session,
        library: holder.name(),
        struck,
        granted,
        ends,
        observed_until: mono_ns(),
    };
    eprintln!("{}", trial.summary());
    Ok(trial)
}

/// One partition trial on a namespaced cluster.
fn partition_trial(
    cluster: &TestingCluster,
    holder: &mut dyn Holder,
    session: Duration,
    path: &str,
) -> Result<Trial, String> {
    let leader = cluster.leader().ok_or("no leader")?;
    let follower = (0..cluster.len())
        .find(|&i| i != leader)
        .ok_or("no follower")?;
    // Longer than the follower keeps answering alone, plus the session, plus Curator's own
    // session-timeout clock after it: every end a holder can have comes within it.
    let bound = PARTITION_TICK * PARTITION_SYNC_LIMIT + session * 2 + Duration::from_secs(10);
    holder.hold(&cluster.member_connect_string(follower), session, path)?;
    let waiting = waiter(
        &cluster.connect_string_except(follower),
        session,
        path,
        bound,
    );
    somewhere_in_the_ping_cycle(session);
    cluster.cut_off(follower).map_err(|e| e.to_string())?;
    let struck = mono_ns();
    let trial = outcome(
        holder,
        waiting,
        bound,
        Fault::Partition,
        session,
        struck,
        || {},
    );
    cluster.heal(follower).map_err(|e| e.to_string())?;
    cluster
        .wait_for_quorum(Duration::from_secs(120))
        .map_err(|e| e.to_string())?;
    trial
}

/// One frozen-link trial: the holder through a proxy frozen until it stopped.
fn frozen_trial(
    server: &TestingServer,
    holder: &mut dyn Holder,
    session: Duration,
    path: &str,
) -> Result<Trial, String> {
    let proxy = FaultProxy::start(server.addr()).map_err(|e| e.to_string())?;
    let bound = session * 3 + Duration::from_secs(10);
    holder.hold(&proxy.connect_string(), session, path)?;
    let waiting = waiter(&server.connect_string(), session, path, bound);
    somewhere_in_the_ping_cycle(session);
    proxy.freeze();
    let struck = mono_ns();
    outcome(
        holder,
        waiting,
        bound,
        Fault::FrozenLink,
        session,
        struck,
        || proxy.thaw(),
    )
}

/// Runs every trial, libraries alternating: the partition ones first (skipped with a note
/// when namespaces cannot be made here), then the frozen link.
pub fn run(plan: &Plan) -> Result<Vec<Trial>, String> {
    let class_dir = std::env::temp_dir().join(format!("zk-locks-overlap-{}", std::process::id()));
    let mut ours = Ours::default();
    let mut curator = match plan.curator {
        true => Some(Curator::start(&class_dir)?),
        false => None,
    };
    let mut trials = Vec::new();
    let mut each = |run_one: &mut dyn FnMut(&mut dyn Holder, &str) -> Result<Trial, String>,
                    name: &str|
     -> Result<(), String> {
        for t in 0..plan.trials {
            let mut holders: Vec<&mut dyn Holder> = vec![&mut ours];
            if let Some(c) = curator.as_mut() {
                holders.push(c);
            }
            if t % 2 == 1 {
                holders.reverse();
            }
            for holder in holders {
                let path = format!("/overlap/{name}-{}-{t}", holder.name());
                trials.push(run_one(holder, &path)?);
            }
        }
        Ok(())
    };
    match zk_locks::testing::partition::available() {
        Err(reason) => eprintln!("overlap: no partition trials here: {reason}"),
        Ok(()) if plan.partition_sessions.is_empty() => {}
        Ok(()) => {
            let cluster = TestingCluster::builder(3)
                .tick_time(PARTITION_TICK)
                .sync_limit(PARTITION_SYNC_LIMIT)
                .init_limit(10)
                .network_namespaces(true)
                .start()
                .map_err(|e| e.to_string())?;
            for &session in &plan.partition_sessions {
                let name = format!("partition-{}s", session.as_secs());
                each(
                    &mut |h, path| partition_trial(&cluster, h, session, path),
                    &name,
                )?;
            }
        }
    }
    if !plan.frozen_sessions.is_empty() {
        let server = TestingServer::start().map_err(|e| e.to_string())?;
        for &session in &plan.frozen_sessions {
            let name = format!("frozen-{}s", session.as_secs());
            each(
                &mut |h, path| frozen_trial(&server, h, session, path),
                &name,
            )?;
        }
    }
    if let Some(c) = curator {
        c.quit();
    }
    let _ = std::fs::remove_dir_all(class_dir);
    Ok(trials)
}
