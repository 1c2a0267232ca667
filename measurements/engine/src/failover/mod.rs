//! Failover: zk-locks against Curator 5.4 on a 3-member `TestingCluster`, a holder and two
//! waiters looping on one mutex, each client on a different member (session 10 s), while a
//! fault strikes: kill -9 the leader; kill -9 the holder's member (a follower); SIGSTOP the
//! holder's member, or a waiter's (a follower), or the leader, for 0.5, 2 or 5 s. Per fault and library,
//! over N trials (sides alternating, fresh clients placed on distinct members by the servers'
//! `cons` each time): the longest gap with no acquisition (from the last acquisition before
//! the fault), the struck client's next acquisition (the holder's, or the frozen waiter's;
//! from the fault), errors, lost sessions, overlapping holds (must be 0) and connect attempts
//! per reconnecting session. The program is `measurements/failover.rs`.
//!
//! [`election`]: the same program's `--elections` mode, leader latches in processes of their
//! own while the leader's process, session or member goes.

pub mod charts;
pub mod election;
mod report;
mod sides;

use std::time::{Duration, Instant};

use zk_locks::testing::TestingCluster;

pub use report::{print_report, Sample};
pub use sides::{mono_ns, Curator, Ours, Outcome, Side};

/// The session timeout on both sides.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Clients, one per member.
pub const CLIENTS: usize = 3;

/// A fault of the measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 the leader.
    KillLeader,
    /// kill -9 the member the holder is connected to (a follower).
    KillHolderMember,
    /// SIGSTOP the member the holder is connected to (a follower), SIGCONT this many ms later.
    FreezeHolderMember(u64),
    /// SIGSTOP the member a waiter is connected to (a follower), SIGCONT this many ms later.
    FreezeWaiterMember(u64),
    /// SIGSTOP the ensemble's leader, SIGCONT this many ms later: no member can serve a
    /// write or a sync meanwhile, so leaving a member helps nobody (the churn check).
    FreezeLeader(u64),
}

/// How long the freezes last (ms): a long GC pause, a short and a long VM stall.
pub const FREEZES: [u64; 3] = [500, 2000, 5000];

impl Fault {
    /// The kills, in report order.
    pub const KILLS: [Fault; 2] = [Fault::KillLeader, Fault::KillHolderMember];

    /// The freezes, in report order: the holder's member, then a waiter's, then the
    /// ensemble's leader, each for every length of [`FREEZES`].
    pub fn freezes() -> Vec<Fault> {
        let holder = FREEZES.map(Fault::FreezeHolderMember);
        let waiter = FREEZES.map(Fault::FreezeWaiterMember);
        let leader = FREEZES.map(Fault::FreezeLeader);
        holder.into_iter().chain(waiter).chain(leader).collect()
    }

    /// Every fault, in report order.
    pub fn all() -> Vec<Fault> {
        let mut all = Fault::KILLS.to_vec();
        all.extend(Fault::freezes());
        all
    }

    /// How the report names it.
    pub fn label(self) -> String {
        let secs = |ms: u64| ms as f64 / 1000.0;
        match self {
            Fault::KillLeader => "kill -9 the leader".into(),
            Fault::KillHolderMember => "kill -9 the holder's member".into(),
            Fault::FreezeHolderMember(ms) => format!("SIGSTOP the holder's member {} s", secs(ms)),
            Fault::FreezeWaiterMember(ms) => format!("SIGSTOP a waiter's member {} s", secs(ms)),
            Fault::FreezeLeader(ms) => format!("SIGSTOP the leader {} s", secs(ms)),
        }
    }

    /// Whether the fault is a freeze.
    pub fn is_freeze(self) -> bool {
        matches!(
            self,
            Fault::FreezeHolderMember(_) | Fault::FreezeWaiterMember(_) | Fault::FreezeLeader(_)
        )
    }

    /// What the report calls the struck client's next acquisition.
    pub fn struck_client(self) -> &'static str {
        match self {
            Fault::FreezeWaiterMember(_) => "frozen waiter's next acquisition",
            _ => "holder's next acquisition",
        }
    }
}

/// What a run does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Trials per fault per library.
    pub trials: usize,
    /// How long each hold lasts.
    pub hold: Duration,
    /// Looping before the fault strikes.
    pub warmup: Duration,
    /// Looping after the fault (after the thaw for a freeze) before the trial ends.
    pub settle: Duration,
    /// Run Curator beside us.
    pub curator: bool,
    /// The faults, in order.
    pub faults: Vec<Fault>,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            trials: 3,
            hold: Duration::from_millis(10),
            warmup: Duration::from_millis(1500),
            settle: Duration::from_secs(5),
            curator: true,
            faults: Fault::all(),
        }
    }
}

/// The member each session is connected to now (by the members' `cons`), `None` when no
/// member lists it.
fn members_of(cluster: &TestingCluster, sessions: &[i64]) -> Vec<Option<usize>> {
    let mut found = vec![None; sessions.len()];
    for m in 0..cluster.len() {
        let Ok(cons) = cluster.four_letter(m, "cons") else {
            continue;
        };
        for (k, id) in sessions.iter().enumerate() {
            if cons.contains(&format!("sid=0x{:x},", *id as u64)) {
                found[k] = Some(m);
            }
        }
    }
    found
}

/// Opens every client again until each is on a member of its own; the member of each.
fn place(cluster: &TestingCluster, side: &mut dyn Side) -> Result<Vec<usize>, String> {
    let mut members: Vec<Option<usize>> = vec![None; CLIENTS];
    for i in 0..CLIENTS {
        for tries in 0.. {
            let id = side.open(i)?;
            let member = members_of(cluster, &[id])[0];
            let taken = member.is_some_and(|m| members[..i].contains(&Some(m)));
            if member.is_some() && !taken {
                members[i] = member;
                break;
            }
            if tries == 50 {
                return Err(format!(
                    "{}: client {i} not placed on a member of its own",
                    side.name()
                ));
            }
        }
    }
    Ok(members.into_iter().map(|m| m.unwrap_or(0)).collect())
}

/// Every member running and serving, with a leader.
fn heal(cluster: &TestingCluster, down: &[usize]) -> Result<(), String> {
    for &m in down {
        cluster.restart(m).map_err(|e| e.to_string())?;
    }
    cluster
        .wait_for_quorum(Duration::from_secs(90))
        .map_err(|e| e.to_string())
}

/// One trial of `fault` on `side`: the sample, or why it could not be taken.
pub fn trial(
    cluster: &TestingCluster,
    side: &mut dyn Side,
    fault: Fault,
    plan: &Plan,
    path: &str,
) -> Result<Sample, String> {
    let members = place(cluster, side)?;
    let leader = cluster.leader().ok_or("no leader")?;
    side.start(path, plan.hold)?;
    std::thread::sleep(plan.warmup);
    // Strike while a client holds the lock (for the member faults: one on a follower; for a
    // waiter's member, a waiter on a follower).
    let give_up = Instant::now() + Duration::from_secs(30);
    let on_follower = |c: usize| members[c] != leader;
    let (holder, subject) = loop {
        if let Some(h) = side.holder()? {
            let struck = match fault {
                Fault::KillLeader | Fault::FreezeLeader(_) => Some(h),
                Fault::KillHolderMember | Fault::FreezeHolderMember(_) => {
                    on_follower(h).then_some(h)
                }
                Fault::FreezeWaiterMember(_) => (0..CLIENTS).find(|&w| w != h && on_follower(w)),
            };
            if let Some(subject) = struck {
                break (h, subject);
            }
        }
        std::thread::yield_now();
        if Instant::now() > give_up {
            let _ = side.stop();
            return Err("no holder to strike".into());
        }
    };
    let mut down = Vec::new();
    let struck = mono_ns();
    if std::env::var_os("FAILOVER_JOURNAL").is_some() {
        eprintln!(
            "struck {struck} holder {holder} subject {subject} members {members:?} leader {leader}"
        );
    }
    match fault {
        Fault::KillLeader => {
            cluster.kill(leader);
            down.push(leader);
        }
        Fault::KillHolderMember => {
            cluster.kill(members[holder]);
            down.push(members[holder]);
        }
        Fault::FreezeHolderMember(ms) | Fault::FreezeWaiterMember(ms) => {
            cluster.freeze(members[subject]);
            // The fault's length.
            std::thread::sleep(Duration::from_millis(ms));
            cluster.thaw(members[subject]);
        }
        Fault::FreezeLeader(ms) => {
            cluster.freeze(leader);
            std::thread::sleep(Duration::from_millis(ms));
            cluster.thaw(leader);
        }
    }
    std::thread::sleep(plan.settle);
    let outcome = side.stop();
    side.close()?;
    heal(cluster, &down)?;
    Ok(Sample::from_outcome(&outcome?, subject, struck))
}

/// One fault's samples on one library.
pub type Series = (Fault, &'static str, Vec<Sample>);

/// Starts the cluster (and Curator's JVM) and runs every trial, sides alternating.
pub fn run(plan: &Plan) -> Result<Vec<Series>, String> {
    let cluster = TestingCluster::start(3).map_err(|e| e.to_string())?;
    let connect = cluster.connect_string();
    let mut ours = Ours::new(&connect, CLIENTS);
    let class_dir = std::env::temp_dir().join(format!("zk-locks-failover-{}", std::process::id()));
    let mut curator = if plan.curator {
        Some(Curator::start(&connect, CLIENTS, &class_dir)?)
    } else {
        None
    };
    let mut results: Vec<Series> = Vec::new();
    for &fault in &plan.faults {
        results.push((fault, "zk-locks", Vec::new()));
        if curator.is_some() {
            results.push((fault, "Curator", Vec::new()));
        }
    }
    for t in 0..plan.trials {
        for &fault in &plan.faults {
            let mut sides: Vec<&mut dyn Side> = vec![&mut ours];
            if let Some(c) = curator.as_mut() {
                sides.push(c);
            }
            if t % 2 == 1 {
                sides.reverse();
            }
            for side in sides {
                let name = side.name();
                let path = format!("/failover/{name}-{fault:?}-{t}");
                let sample = trial(&cluster, side, fault, plan, &path)?;
                eprintln!(
                    "{:<32} {:<8} trial {t}: gap {:>5} ms, holder back {:>5} ms, attempts {:?}",
                    fault.label(),
                    name,
                    sample.gap_ms.map_or("-".into(), |v| v.to_string()),
                    sample.holder_ms.map_or("-".into(), |v| v.to_string()),
                    sample.attempts
                );
                if let Some(entry) = results
                    .iter_mut()
                    .find(|(f, n, _)| *f == fault && *n == name)
                {
                    entry.2.push(sample);
                }
            }
        }
    }
    if let Some(c) = curator {
        c.quit();
    }
    let _ = std::fs::remove_dir_all(class_dir);
    Ok(results)
}
