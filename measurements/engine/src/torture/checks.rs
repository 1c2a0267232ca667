//! What the checker keeps and decides: recorded sections, the fenced store, the outcome
//! tally, the exclusion check and the run's [`Summary`].

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::config::{FaultKind, Recipe};
use super::timeline::{expired_unannounced, faults_hitting, FaultRecord};
use zk_locks::Error;

/// One critical section as a worker saw it (public for the checker's own tests).
#[derive(Debug, Clone)]
pub struct Section {
    /// The recipe whose lock was held.
    pub recipe: Recipe,
    /// Whether the hold excludes every other holder (a write lock, a mutex).
    pub exclusive: bool,
    /// The session whose worker held it.
    pub worker: usize,
    /// The holder's fencing token (a leader's term), when it could be read.
    pub token: Option<i64>,
    /// When the worker asked for the lock.
    pub asked: Instant,
    /// When the section began, taken after the first validity check.
    pub enter: Instant,
    /// When the section ended, taken before the second validity check.
    pub exit: Instant,
    /// When the second validity check was over.
    pub checked: Instant,
    /// Whether the holder was valid at the first check.
    pub valid_at_enter: bool,
    /// Whether the holder was valid at the second check.
    pub valid_at_exit: bool,
    /// The nodes the holder held through: path and owning session id (when known).
    pub nodes: Vec<(String, Option<i64>)>,
    /// Whether every node of the hold still existed right after the last check (`None` where
    /// the environment cannot tell without a request).
    pub nodes_alive: Option<bool>,
    /// The section's fenced write was refused (exclusive recipes only).
    pub write_refused: bool,
    /// The section's fenced write was accepted although a newer holder had acquired.
    pub write_stale: bool,
}

impl Section {
    pub(super) fn counts(&self) -> bool {
        self.valid_at_enter && self.valid_at_exit
    }

    /// `worker 6 (exclusive, 5.66ms, /torture/rw/_c_…-__WRIT__0000000012 seq 12 session
    /// 0x…; faults: expire@+1.20ms)`: who held what, and what struck that session meanwhile.
    pub fn describe(&self, faults: &[FaultRecord]) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|(path, session)| {
                let name = zk_locks::paths::node_name(path);
                let seq = name
                    .len()
                    .checked_sub(10)
                    .and_then(|at| name.get(at..))
                    .and_then(zk_locks::paths::parse_sequence);
                let seq = seq.map_or("?".to_string(), |n| n.to_string());
                let session = session.map_or("?".to_string(), |id| format!("0x{id:x}"));
                format!("{path} seq {seq} session {session}")
            })
            .collect();
        let hits = faults_hitting(self, faults);
        format!(
            "worker {} ({}, {:.2}ms, {}; faults: {})",
            self.worker,
            if self.exclusive {
                "exclusive"
            } else {
                "shared"
            },
            (self.exit - self.enter).as_secs_f64() * 1e3,
            if nodes.is_empty() {
                "no node".to_string()
            } else {
                nodes.join(", ")
            },
            if hits.is_empty() {
                "none".to_string()
            } else {
                hits.join(", ")
            },
        )
    }
}

/// A resource that accepts a write only with a token at least as high as the highest it saw
/// (fencing). It also knows the highest token any holder *acquired* so far (a ground truth the
/// store itself does not use), so the checker can tell a stale write that got through.
#[derive(Default)]
pub struct FencedStore {
    pub(super) inner: Mutex<StoreState>,
}

#[derive(Default)]
pub(super) struct StoreState {
    pub(super) highest_written: Option<i64>,
    pub(super) highest_acquired: Option<i64>,
    pub(super) accepted: u64,
    pub(super) rejected: u64,
    pub(super) stale_accepted: u64,
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
        self.write_noting_stale(token).map(|_| ())
    }

    /// [`Self::write`]; `Ok(true)` when the write was accepted although a newer holder had
    /// already acquired (it came from a superseded holder before its successor wrote).
    pub fn write_noting_stale(&self, token: i64) -> Result<bool, StaleToken> {
        let mut s = self.inner.lock();
        if let Some(highest) = s.highest_written.filter(|&h| token < h) {
            s.rejected += 1;
            return Err(StaleToken { token, highest });
        }
        s.highest_written = Some(token);
        s.accepted += 1;
        let stale = s.highest_acquired.is_some_and(|h| token < h);
        if stale {
            // A newer holder had acquired already: this write came from a superseded holder.
            s.stale_accepted += 1;
        }
        Ok(stale)
    }

    /// (accepted, rejected, stale accepted).
    pub fn counts(&self) -> (u64, u64, u64) {
        let s = self.inner.lock();
        (s.accepted, s.rejected, s.stale_accepted)
    }
}

/// Revocation requests made to mutex holders, and what their listeners did. Atomics: the
/// listeners run on the client's threads and only count.
#[derive(Default)]
pub(super) struct Revocations {
    /// `Revoker::attempt_revoke` calls that reached a holder's node.
    pub(super) requests: AtomicU64,
    /// Listener calls.
    pub(super) calls: AtomicU64,
    /// Listener calls on the thread that was acquiring the lock (must be none).
    pub(super) on_acquirer: AtomicU64,
}

/// Outcome counters, shared by the workers.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) acquisitions: BTreeMap<Recipe, u64>,
    pub(super) timeouts: u64,
    pub(super) errors: BTreeMap<String, u64>,
    pub(super) release_errors: BTreeMap<String, u64>,
    pub(super) token_errors: u64,
    pub(super) panics: u64,
    pub(super) stale_counts: u64,
    pub(super) downgrade_violations: u64,
    pub(super) holder_hits: BTreeMap<FaultKind, u64>,
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
    /// Valid sections during which the server ended the holder's session without warning
    /// (an unannounced expiry: not counted for exclusion, still fenced).
    pub expired_sections: u64,
    /// Overlaps between those and other sections (what the check would report without the
    /// set-aside).
    pub expired_overlaps: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// Faults skipped (with the reason of the last one).
    pub faults_skipped: u64,
    /// Faults, by kind, that began while the session they struck held a lock or lease (any
    /// session, for a server restart or a leader kill), counted from acquisition to the end of
    /// the release.
    pub holder_hits: BTreeMap<FaultKind, u64>,
    /// Exclusion violations (overlapping valid sections; more than max on the semaphore).
    pub violations: u64,
    /// Human-readable description of the first violations.
    pub violation_details: Vec<String>,
    /// Leader sections recorded (latch and selector spells, valid or not).
    pub leader_sections: u64,
    /// Distinct terms among them.
    pub leader_terms: u64,
    /// Terms held by two participants, or valid leader sections whose term is below an
    /// earlier one's (see [`check_terms`]); described in `violation_details`.
    pub term_violations: u64,
    /// Fenced writes accepted / rejected / accepted although stale (but for writes of holders
    /// whose session the server ended without warning: no store can refuse those before the
    /// successor's first write).
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
    /// Revocation requests made to the mutex's holders (one per fault, from the victim's
    /// session) / their listeners' calls.
    pub revocations: (u64, u64),
    /// Listener calls beyond one per request, plus calls on the acquiring thread.
    pub revocation_violations: u64,
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
    /// Members that exited on their own (crashed) and were restarted by the environment.
    pub member_crashes: u64,
    /// Leader restarts after which no leader served for a session timeout or more (faults
    /// longer than the session timeout for every session).
    pub long_elections: u64,
}

impl Summary {
    /// True when nothing went wrong.
    pub fn is_clean(&self) -> bool {
        self.violations == 0
            && self.term_violations == 0
            && self.fencing.2 == 0
            && self.rejected_valid_writes == 0
            && self.probes_refused == self.probes
            && self.probe_holders_not_lost == 0
            && self.stale_counts == 0
            && self.revocation_violations == 0
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
        let hits: Vec<String> = self
            .faults
            .keys()
            .map(|k| {
                let n = self.holder_hits.get(k).copied().unwrap_or(0);
                format!("{}={n}", k.name())
            })
            .collect();
        format!(
            "torture backend={} sessions={} duration={:.0}s acquisitions={total} ({}) timeouts={} \
             errors={{{}}} release-errors={{{}}} token-errors={} invalid-sections={} \
             expired-sections={} expired-overlaps={} faults={{{} skipped={}}} holder-hits={{{}}} \
             violations={} leaders={{sections={} terms={} term-violations={}}} \
             fencing={{accepted={} rejected={} stale-accepted={} rejected-valid={} probes={} \
             probes-refused={} probe-holders-not-lost={}}} stale-counts={} revocations={{requests={} calls={} violations={}}} panics={} hung={} orphans={} \
             leaked-watches={{live={} closed={}}} spurious-losses={} long-elections={} \
             member-crashes={}",
            self.backend,
            self.sessions,
            self.duration.as_secs_f64(),
            per.join(" "),
            self.timeouts,
            map(&self.errors),
            map(&self.release_errors),
            self.token_errors,
            self.invalid_sections,
            self.expired_sections,
            self.expired_overlaps,
            faults.join(" "),
            self.faults_skipped,
            hits.join(" "),
            self.violations,
            self.leader_sections,
            self.leader_terms,
            self.term_violations,
            self.fencing.0,
            self.fencing.1,
            self.fencing.2,
            self.rejected_valid_writes,
            self.probes,
            self.probes_refused,
            self.probe_holders_not_lost,
            self.stale_counts,
            self.revocations.0,
            self.revocations.1,
            self.revocation_violations,
            self.panics,
            self.hung,
            self.orphans,
            self.watches_live,
            self.watches_closed,
            self.spurious_losses,
            self.long_elections,
            self.member_crashes,
        )
    }
}

/// A typed error as a short counter key (`Zk:create:ConnectionLoss`, `SessionLost`, ...).
pub(super) fn error_key(e: &Error) -> String {
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

/// Exclusion violations (count, first descriptions) among sections that count: overlapping
/// exclusive sections (with anything), or more than `max` concurrent holders. A section counts
/// when its holder was valid at both ends and no unannounced expiry of its session ran
/// meanwhile (see [`expired_unannounced`](super::expired_unannounced)); `faults` also name
/// what struck each holder.
pub fn check_exclusion(
    sections: &[Section],
    max: i64,
    faults: &[FaultRecord],
) -> (u64, Vec<String>) {
    let mut valid: Vec<&Section> = sections
        .iter()
        .filter(|s| s.counts() && !expired_unannounced(s, faults))
        .collect();
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
                        "{}: {} overlaps {}",
                        a.recipe.name(),
                        a.describe(faults),
                        b.describe(faults)
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

/// One leader per term, terms in time order, among the sections of one election: violations
/// (count, first descriptions). A term is one node's `czxid`, so every section with a term
/// must be its worker's alone (valid or not). Among the sections that count (as for
/// [`check_exclusion`]), taken in enter order, no term is below an earlier one: a leader whose
/// node was created before another's led after it only if that other led while an older node
/// was still queued ahead of it.
pub fn check_terms(sections: &[Section], faults: &[FaultRecord]) -> (u64, Vec<String>) {
    let mut violations = 0;
    let mut details = Vec::new();
    let mut holder: BTreeMap<i64, &Section> = BTreeMap::new();
    for s in sections {
        let Some(term) = s.token else { continue };
        let first = *holder.entry(term).or_insert(s);
        if first.worker != s.worker {
            violations += 1;
            if details.len() < 5 {
                details.push(format!(
                    "{}: term {term} held by two participants: {} and {}",
                    s.recipe.name(),
                    first.describe(faults),
                    s.describe(faults)
                ));
            }
        }
    }
    let mut valid: Vec<(&Section, i64)> = sections
        .iter()
        .filter(|s| s.counts() && !expired_unannounced(s, faults))
        .filter_map(|s| s.token.map(|t| (s, t)))
        .collect();
    valid.sort_by_key(|(s, _)| s.enter);
    let mut newest: Option<(&Section, i64)> = None;
    for (s, term) in valid {
        match newest {
            Some((before, highest)) if term < highest => {
                violations += 1;
                if details.len() < 5 {
                    details.push(format!(
                        "{}: term {term} led after term {highest}: {} after {}",
                        s.recipe.name(),
                        s.describe(faults),
                        before.describe(faults)
                    ));
                }
            }
            _ => newest = Some((s, term)),
        }
    }
    (violations, details)
}
