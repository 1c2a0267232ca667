//! Leader election failover: zk-locks' `LeaderLatch` against Curator 5.4's, three
//! participants on one latch path, **each in an OS process of its own** (so kill -9 is real on
//! both sides: `processes.rs`), while a fault strikes the leader:
//! - **kill -9 the leader's process** (the next leads once the server expires its session);
//! - **the leader closes** (latch closed, then its client: its node deleted at once);
//! - **kill -9 the leader's ZooKeeper member** (a follower; the others on other members).
//!
//! Per fault and library, over N trials (sides alternating, fresh processes placed on distinct
//! members by the servers' `cons` each trial): the time from the fault until a participant
//! leads again (for the member kill possibly the same one, once reconnected), the time from
//! the leader's node going (a watch of the measuring client's) until the next leads, overlap
//! of two leaders (must be 0), and the requests the members received over the election. The
//! program is `measurements/failover.rs --elections`; `tests/election_failover_smoke.rs` runs
//! one trial of the clean close.
//!
//! Table of contents: this file runs the trials; `participant.rs` is our participant process,
//! `ElectionParticipant.java` Curator's; `processes.rs` spawns and reads them; `report.rs`
//! turns the trials into tables.

mod participant;
mod processes;
pub(super) mod report;
mod servers;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::testing::TestingCluster;
use zk_locks::ZkClient;

pub use participant::{participant_main, PARTICIPANT_FLAG};
pub use processes::{Launcher, Library, Line};
pub use report::{render, Sample};

use processes::Group;
use servers::{received, Servers};

use super::{mono_ns, SESSION_TIMEOUT};

/// Participants per election.
pub const PARTICIPANTS: usize = 3;

/// Bound on every wait of a trial but the election's own (the machine is loaded).
const STEP_BOUND: Duration = Duration::from_secs(60);

/// A fault striking the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 the leader's process.
    KillProcess,
    /// The leader closes its latch, then its client.
    Close,
    /// kill -9 the ZooKeeper member the leader is connected to (a follower).
    KillMember,
    /// SIGSTOP the member the leader is connected to (a follower), SIGCONT this many ms later;
    /// the leader is asked to read through its session at once.
    FreezeMember(u64),
}

impl Fault {
    /// The kills and the close, in report order.
    pub const ALL: [Fault; 3] = [Fault::KillProcess, Fault::Close, Fault::KillMember];

    /// The freezes of the leader's member, in report order ([`super::FREEZES`]).
    pub fn freezes() -> Vec<Fault> {
        super::FREEZES.map(Fault::FreezeMember).to_vec()
    }

    /// How the report names it.
    pub fn label(self) -> String {
        match self {
            Fault::KillProcess => "kill -9 the leader's process".into(),
            Fault::Close => "the leader closes".into(),
            Fault::KillMember => "kill -9 the leader's member".into(),
            Fault::FreezeMember(ms) => {
                format!("SIGSTOP the leader's member {} s", ms as f64 / 1000.0)
            }
        }
    }

    /// A fault of the leader's member (the leader's process and session live on).
    pub fn of_member(self) -> bool {
        matches!(self, Fault::KillMember | Fault::FreezeMember(_))
    }
}

/// What a run does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Trials per fault per library.
    pub trials: usize,
    /// The faults, in order.
    pub faults: Vec<Fault>,
    /// The libraries, in the order of even trials (odd trials reverse it).
    pub libraries: Vec<Library>,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            trials: 3,
            faults: Fault::ALL.to_vec(),
            libraries: vec![Library::Ours, Library::Curator],
        }
    }
}

/// The servers a run measures.
pub struct Target<'a> {
    /// The participants' connect string.
    pub connect: String,
    /// Every member's client address (placement by `cons`, requests by `mntr`).
    pub members: Vec<SocketAddr>,
    /// The cluster, for the member kill (and healing after it).
    pub cluster: Option<&'a TestingCluster>,
}

/// One fault's samples on one library.
pub type Series = (Fault, Library, Vec<Sample>);

/// Runs every trial, sides alternating; a trial that cannot be taken ends the run.
pub fn run(target: &Target, plan: &Plan, launcher: &Launcher) -> Result<Vec<Series>, String> {
    let watcher = NativeClient::connect_with(
        NativeOptions::new(target.connect.as_str()).session_timeout(SESSION_TIMEOUT),
    )
    .map_err(|e| e.to_string())?;
    let mut results: Vec<Series> = Vec::new();
    for &fault in &plan.faults {
        for &library in &plan.libraries {
            results.push((fault, library, Vec::new()));
        }
    }
    for t in 0..plan.trials {
        for &fault in &plan.faults {
            let mut libraries = plan.libraries.clone();
            if t % 2 == 1 {
                libraries.reverse();
            }
            for library in libraries {
                let path = format!("/failover/election/{}-{fault:?}-{t}", library.name());
                let sample = trial(target, &watcher, launcher, library, fault, &path)?;
                eprintln!(
                    "{:<30} {:<8} trial {t}: next leads {:>8} ms, after the node went {:>8} ms, \
                     {} requests in {:.0} ms, overlap {:.1} ms",
                    fault.label(),
                    library.name(),
                    report::ms(sample.next_ms),
                    report::ms(sample.after_node_ms),
                    sample.requests.map_or("-".into(), |r| r.to_string()),
                    sample.window_ms,
                    sample.overlap_ms
                );
                if let Some(entry) = results
                    .iter_mut()
                    .find(|(f, l, _)| *f == fault && *l == library)
                {
                    entry.2.push(sample);
                }
            }
        }
    }
    watcher.close();
    Ok(results)
}

/// Places the participants on distinct members (participant 0, the first leader, on a
/// follower) by opening sessions again until `cons` shows them so; the session and member of
/// each. With
/// fewer members than participants there is nothing to place.
fn place(
    group: &mut Group,
    servers: &mut Servers,
    target: &Target,
) -> Result<Vec<(i64, Option<usize>)>, String> {
    let session = |group: &mut Group, i: usize| {
        group.wait_for("a session", STEP_BOUND, |from, line| match line {
            Line::Session(id) if from == i => Some(*id),
            _ => None,
        })
    };
    let leader = target.cluster.and_then(|c| c.leader());
    let mut placed: Vec<(i64, Option<usize>)> = Vec::new();
    for i in 0..PARTICIPANTS {
        let mut tries = 0;
        loop {
            let id = session(group, i)?;
            let member = servers.member_of(id);
            let fits = servers.len() < PARTICIPANTS
                || member.is_some_and(|m| !placed.iter().any(|p| p.1 == Some(m)))
                    && (i > 0 || leader.is_none() || member != leader);
            if fits {
                placed.push((id, member));
                break;
            }
            tries += 1;
            if tries > 50 {
                return Err(format!("participant {i} not placed on a member of its own"));
            }
            group.send(i, "reopen")?;
        }
    }
    Ok(placed)
}

/// The median time of a few `exists` calls by `client` (one round trip).
fn round_trip(client: &NativeClient, path: &str) -> f64 {
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let _ = client.exists(path);
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// One trial: participant 0 leads, the others queue behind it, the fault strikes it.
fn trial(
    target: &Target,
    watcher: &NativeClient,
    launcher: &Launcher,
    library: Library,
    fault: Fault,
    path: &str,
) -> Result<Sample, String> {
    if fault.of_member() && (target.cluster.is_none() || target.members.len() < 3) {
        return Err("the member faults need a cluster of 3 or more".into());
    }
    let mut group = Group::spawn(launcher, library, &target.connect, path, PARTICIPANTS)?;
    let mut servers = Servers::new(&target.members);
    let members = place(&mut group, &mut servers, target)?;
    group.send(0, "start")?;
    group.wait_for("the first leader", STEP_BOUND, |i, line| {
        matches!(line, Line::Leading(..) if i == 0).then_some(())
    })?;
    for i in 1..PARTICIPANTS {
        group.send(i, "start")?;
    }
    // Every participant queued: the latch directory holds a node of each.
    let queued_by = Instant::now() + STEP_BOUND;
    while watcher.get_children(path, None).map_or(0, |c| c.len()) < PARTICIPANTS {
        if Instant::now() > queued_by {
            return Err(format!("{}: participants not queued", library.name()));
        }
        std::thread::sleep(Duration::from_millis(20)); // polling the server: no event to wait on
    }
    let rtt_ms = round_trip(watcher, path);
    // The measuring client sees the leader's node go (or any other change of the directory).
    let (gone_tx, gone_rx) = mpsc::channel();
    watcher
        .get_children(
            path,
            Some(Box::new(move |_| {
                let _ = gone_tx.send(mono_ns());
            })),
        )
        .map_err(|e| e.to_string())?;
    let before = servers.read();

    let mut down = None;
    let mut heard_ms = None;
    let struck = match fault {
        Fault::KillProcess => {
            heard_ms = servers.last_heard_ms(members[0].0);
            let at = mono_ns();
            group.kill(0);
            at
        }
        Fault::Close => {
            group.send(0, "close")?;
            group.wait_for("the close", STEP_BOUND, |i, line| match line {
                Line::Closing(at) if i == 0 => Some(*at),
                _ => None,
            })?
        }
        Fault::KillMember => {
            let member = members[0].1.ok_or("participant 0 on no member")?;
            let at = mono_ns();
            target.cluster.ok_or("no cluster")?.kill(member);
            down = Some(member);
            at
        }
        Fault::FreezeMember(ms) => {
            let member = members[0].1.ok_or("participant 0 on no member")?;
            let cluster = target.cluster.ok_or("no cluster")?;
            let at = mono_ns();
            cluster.freeze(member);
            group.send(0, "act")?;
            let acted = served_again(&mut group, Duration::from_millis(ms));
            cluster.thaw(member);
            // A member frozen for `syncLimit` ticks or more lost its leader and rejoins: the
            // next trial starts on a whole ensemble.
            let healed = cluster.wait_for_quorum(Duration::from_secs(90));
            let acted = match acted {
                Ok(Some(acted)) => Ok(acted),
                Ok(None) => served_again(&mut group, STEP_BOUND)
                    .and_then(|a| a.ok_or_else(|| "the leader was not served again".into())),
                Err(e) => Err(e),
            };
            healed.map_err(|e| e.to_string())?;
            return freeze_sample(group, servers, before, at, acted?, rtt_ms);
        }
    };
    let next = next_leader(&mut group, &mut servers, fault, struck, members[0].0);
    let after = servers.read();
    let ended = mono_ns();
    group.drain(Duration::from_millis(300));
    let next = next?;
    let gone = gone_rx.try_recv().ok();
    let sample = Sample {
        next_ms: Some(ms_between(struck, next.1)),
        after_node_ms: match fault.of_member() {
            true => None,
            false => gone.map(|at| ms_between(at, next.1)),
        },
        same_leader: next.0 == 0,
        kept: next.2,
        heard_ms,
        overlap_ms: report::overlap_ms(&group.log, fault, struck, mono_ns()),
        requests: received(&before, &after),
        window_ms: ms_between(struck, ended),
        rtt_ms,
    };
    group.finish(Duration::from_secs(15));
    if let (Some(m), Some(cluster)) = (down, target.cluster) {
        cluster.restart(m).map_err(|e| e.to_string())?;
        cluster
            .wait_for_quorum(Duration::from_secs(90))
            .map_err(|e| e.to_string())?;
    }
    Ok(sample)
}

/// Who leads next and from when (ns), after the fault struck participant 0 at `struck`;
/// `true` with it when participant 0 (the member kill) kept leading without a lapse: back on
/// another member, it says it leads and never said it stopped (its moment is then the
/// fault's).
fn next_leader(
    group: &mut Group,
    servers: &mut Servers,
    fault: Fault,
    struck: u64,
    session: i64,
) -> Result<(usize, u64, bool), String> {
    let leads = |i: usize, line: &Line| match line {
        Line::Leading(at, _) if *at > struck && (i != 0 || fault == Fault::KillMember) => {
            Some((i, *at, false))
        }
        _ => None,
    };
    if fault != Fault::KillMember {
        return group.wait_for("the next leader", STEP_BOUND, leads);
    }
    let deadline = Instant::now() + STEP_BOUND;
    while Instant::now() < deadline {
        if let Some(next) = group.poll_for(Duration::from_millis(20), leads)? {
            return Ok(next);
        }
        if servers.member_of(session).is_none() {
            continue; // not reconnected yet
        }
        group.send(0, "has")?;
        let has = group.wait_for("an answer", STEP_BOUND, |i, line| match line {
            Line::Has(has, _) if i == 0 => Some(*has),
            _ => None,
        })?;
        let lapsed = group
            .log
            .iter()
            .any(|(i, line)| *i == 0 && matches!(line, Line::NotLeading(at) if *at > struck));
        if has && !lapsed {
            return Ok((0, struck, true));
        }
    }
    Err(format!(
        "no leader again within {STEP_BOUND:?}: {:?}",
        group.log
    ))
}

/// Waits up to `within` for the leader (participant 0, asked to `act`) to be answered through
/// its session: the moment it was (ns), `None` if not within that.
fn served_again(group: &mut Group, within: Duration) -> Result<Option<u64>, String> {
    group.poll_for(within, |i, line| match line {
        Line::Acted(at) if i == 0 => Some(*at),
        _ => None,
    })
}

/// The sample of a freeze of the leader's member struck at `struck`: the leader served again
/// at `acted`; whether it kept leading throughout, two leaders at once.
fn freeze_sample(
    mut group: Group,
    mut servers: Servers,
    before: servers::Reading,
    struck: u64,
    acted: u64,
    rtt_ms: f64,
) -> Result<Sample, String> {
    let after = servers.read();
    group.drain(Duration::from_millis(300));
    let end = mono_ns();
    let lapsed = group.log.iter().any(|(i, line)| {
        matches!(line, Line::NotLeading(at) if *i == 0 && *at > struck)
            || matches!(line, Line::Leading(at, _) if *i != 0 && *at > struck)
    });
    let sample = Sample {
        next_ms: Some(ms_between(struck, acted)),
        after_node_ms: None,
        same_leader: !lapsed,
        kept: !lapsed,
        heard_ms: None,
        overlap_ms: report::overlap_ms(&group.log, Fault::FreezeMember(0), struck, end),
        requests: received(&before, &after),
        window_ms: ms_between(struck, end),
        rtt_ms,
    };
    group.finish(Duration::from_secs(15));
    Ok(sample)
}

/// Milliseconds from `from` to `to` (ns), 0 when `to` is earlier.
fn ms_between(from: u64, to: u64) -> f64 {
    to.saturating_sub(from) as f64 / 1e6
}
