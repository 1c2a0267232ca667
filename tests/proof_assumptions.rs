//! The session proof's assumptions about ZooKeeper, tested where they break (issue 39, items 1
//! and 2), on a real 3-member ZooKeeper 3.8 ensemble with each member in its own network
//! namespace. The claim under test (docs/lock-loss.md, "What a holder is promised"): when a
//! contender is granted the lock, the holder's guard has left `Held` and its
//! `Session::safe_until()` is past: the leader never gives a lock away inside the span the
//! holder's proof claims.
//!
//! 1. **The tick.** The proof's spacing (`T/4` when the tick is unstated) assumes the leader
//!    pings its followers at least every `T/4`, since "a session is at least two ticks". With
//!    `minSessionTimeout` below two ticks (tickTime 2 s, a 3 s session), the leader pings
//!    every second, more than `T/4` apart: unstated, a holder on a follower that is cut off can
//!    claim a renewal the leader never made (seen: the lock granted 300–600 ms before
//!    `safe_until` in some trials of a 4 s tick). The holder states the tick
//!    (`NativeOptions::ensemble_tick_time`), as an operator with such servers must, and is
//!    still proven (`Held`) at this tick.
//! 2. **A deposed leader's syncs.** A leader cut off from its followers answers syncs alone
//!    until its learner handlers time out (`syncLimit × tickTime`). Its followers, restarted,
//!    elect a new leader within seconds, which gives every session `T` from its start and
//!    expires the holder's then: the holder's syncs, still answered by the old leader, must
//!    not go on proving the session meanwhile.
//!
//! Needs root and `ip` (skipped elsewhere unless `ZK_LOCKS_REQUIRE_SERVER=1`).

use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, OwnedLockGuard};
use zk_locks::testing::harness::unique_root;
use zk_locks::testing::{partition, TestingCluster};
use zk_locks::{LockState, SharedClient, ZkClient};

/// Long enough for any one step on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(40);

type Guard = OwnedLockGuard<InterProcessMutex>;

fn connect(options: NativeOptions) -> Arc<NativeClient> {
    NativeClient::connect_with(options.connect_timeout(PATIENCE)).expect("connect")
}

/// What was seen when the contender was granted the lock, all on this machine's clock.
struct Grant {
    /// When the contender's acquisition returned.
    at: Instant,
    /// The holder's guard, read right then.
    holder_state: LockState,
    /// The holder's `safe_until`, read right then.
    safe_until: Option<Instant>,
}

/// A contender on `connect_string` waiting up to `within` for the mutex at `path`; on the
/// grant it reads the holder's guard and `safe_until` at once.
fn contend(
    connect_string: &str,
    session: Duration,
    path: &str,
    within: Duration,
    holder: &SharedClient,
    guard: &Arc<Guard>,
) -> mpsc::Receiver<Option<Grant>> {
    let (tx, rx) = mpsc::channel();
    let options = NativeOptions::new(connect_string).session_timeout(session);
    let (path, holder, guard) = (path.to_string(), holder.clone(), guard.clone());
    thread::spawn(move || {
        let client = connect(options);
        let mutex = InterProcessMutex::new(client.clone(), &path).unwrap();
        let got = mutex.try_lock_for(within).unwrap();
        let grant = got.as_ref().map(|_| {
            let at = Instant::now();
            Grant {
                at,
                holder_state: guard.state(),
                safe_until: holder.session().safe_until(),
            }
        });
        drop(got);
        let _ = tx.send(grant);
        client.close();
    });
    rx
}

/// When the holder's guard leaves `Held` (watched from another thread), if within `within`.
fn watch_leaving(guard: &Arc<Guard>, within: Duration) -> mpsc::Receiver<Option<Instant>> {
    let (tx, rx) = mpsc::channel();
    let guard = guard.clone();
    thread::spawn(move || {
        let left = guard.wait_while_held(Some(within)) != LockState::Held;
        let _ = tx.send(left.then(Instant::now));
    });
    rx
}

/// The holder left `Held` and its `safe_until` had passed when the contender was granted the
/// lock; otherwise a message saying how not (`cut`: when the fault began).
fn overlap(grant: &Grant, left: Option<Instant>, cut: Instant) -> Option<String> {
    let since_cut = grant.at - cut;
    eprintln!(
        "granted {since_cut:?} after the cut; holder {:?}, left Held {:?} after the cut, \
         safe_until {:?} after the cut",
        grant.holder_state,
        left.map(|l| l.saturating_duration_since(cut)),
        grant.safe_until.map(|u| u.saturating_duration_since(cut))
    );
    let mut wrong = Vec::new();
    if grant.holder_state == LockState::Held {
        wrong.push(format!(
            "the holder's guard read Held at the grant (it left Held {})",
            match left {
                Some(left) if left > grant.at => format!("{:?} after it", left - grant.at),
                Some(_) => "just before it".to_string(),
                None => "never".to_string(),
            }
        ));
    }
    match grant.safe_until {
        Some(until) if until > grant.at => wrong.push(format!(
            "granted {:?} before the holder's safe_until",
            until - grant.at
        )),
        Some(_) => {}
        None => wrong.push("the holder's session has no proof".into()),
    }
    (!wrong.is_empty())
        .then(|| format!("granted {since_cut:?} after the cut: {}", wrong.join("; ")))
}

// ---------------------------------------------------------------------------------------
// Item 1: a tick longer than half the session.

/// tickTime 2 s: the leader pings its followers every second.
const LONG_TICK: Duration = Duration::from_secs(2);
/// Shorter than two ticks (half a tick is a third of it, more than the `T/4` assumed
/// unstated), yet long enough for a proof at half a tick: ZooKeeper allows it once
/// `minSessionTimeout` says so.
const SHORT_SESSION: Duration = Duration::from_millis(3000);

fn long_tick_cluster() -> TestingCluster {
    TestingCluster::builder(3)
        .tick_time(LONG_TICK)
        .min_session_timeout(Duration::from_secs(1))
        .sync_limit(5)
        .init_limit(10)
        .network_namespaces(true)
        .start()
        .expect("start a partitionable cluster")
}

/// One trial: a holder whose only member is a follower, cut off from the other two at a
/// random point of the leader's ping cycle; a contender on the majority side is granted the
/// lock once the leader expires the holder's session. `None` when nothing overlapped, else
/// what did.
fn long_tick_trial(cluster: &TestingCluster) -> Option<String> {
    let leader = cluster.leader().expect("a leader");
    let member = (0..3).find(|&i| i != leader).unwrap();
    let path = unique_root("proof-tick");
    // The tick stated, as an operator whose servers allow sessions under two ticks must.
    let options = NativeOptions::new(cluster.member_connect_string(member))
        .session_timeout(SHORT_SESSION)
        .ensemble_tick_time(LONG_TICK);
    let native = connect(options);
    assert_eq!(
        native.negotiated_timeout(),
        SHORT_SESSION,
        "the members did not grant a session shorter than two ticks"
    );
    let holder: SharedClient = native;
    let mutex = Arc::new(InterProcessMutex::new(holder.clone(), &path).unwrap());
    let guard = Arc::new(mutex.lock_owned().unwrap());
    // The proof runs a while (more than one ping cycle), then the cut comes anywhere in it.
    thread::sleep(LONG_TICK / 2 + Duration::from_millis(fastrand::u64(0..2000)));
    // The stated tick still proves the session: the holder works until the cut.
    let start = Instant::now();
    while guard.state() != LockState::Held {
        assert!(
            start.elapsed() < PATIENCE,
            "a stated tick of {LONG_TICK:?} left a {SHORT_SESSION:?} session unproven"
        );
        thread::sleep(Duration::from_millis(20));
    }
    cluster.cut_off(member).unwrap();
    let cut = Instant::now();
    let left = watch_leaving(&guard, PATIENCE);
    let granted = contend(
        &cluster.connect_string_except(member),
        LONG_TICK * 2,
        &path,
        PATIENCE,
        &holder,
        &guard,
    );
    let grant = granted
        .recv_timeout(PATIENCE * 2)
        .unwrap()
        .unwrap_or_else(|| panic!("the holder's session never expired ({PATIENCE:?})"));
    let left = left.recv_timeout(PATIENCE * 2).unwrap();
    let verdict = overlap(&grant, left, cut);
    cluster.heal(member).unwrap();
    cluster.wait_for_quorum(PATIENCE).unwrap();
    drop(guard);
    holder.close();
    verdict
}

/// `trials` trials; all must be clean.
fn long_tick_trials(trials: usize) {
    if !partition::require_partition() {
        return;
    }
    let cluster = long_tick_cluster();
    let failures: Vec<String> = (0..trials)
        .filter_map(|trial| long_tick_trial(&cluster).map(|f| (trial, f)))
        .map(|(trial, f)| format!("trial {trial}: {f}"))
        .collect();
    assert!(
        failures.is_empty(),
        "the lock was given away inside the holder's proof (tickTime {LONG_TICK:?}, \
         T = {SHORT_SESSION:?}, tick stated):\n{}",
        failures.join("\n")
    );
}

/// Item 1, with the tick stated: the proof waits half a tick between the syncs that prove a
/// renewal, so it never claims a renewal the leader did not make.
#[test]
fn a_stated_long_tick_never_lets_the_proof_claim_a_renewal_the_leader_did_not_make() {
    long_tick_trials(2);
}

// ---------------------------------------------------------------------------------------
// Item 2: a deposed leader answering syncs alone.

/// Item 2: the holder's only member is the leader, which is cut off from both followers; the
/// followers are restarted and elect a new leader, which expires the holder's session `T`
/// after it took office. Meanwhile the old leader answers the holder's syncs alone (syncLimit
/// 20 ticks of 1 s): they must not keep the holder `Held`, nor its `safe_until` ahead.
#[test]
fn a_deposed_leaders_sync_answers_never_keep_a_holder_past_its_sessions_expiry() {
    if !partition::require_partition() {
        return;
    }
    const T: Duration = Duration::from_secs(4);
    let cluster = TestingCluster::builder(3)
        .tick_time(Duration::from_secs(1))
        .sync_limit(20)
        .init_limit(10)
        .network_namespaces(true)
        .start()
        .expect("start a partitionable cluster");
    let leader = cluster.leader().expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let path = unique_root("proof-deposed");
    let holder: SharedClient =
        connect(NativeOptions::new(cluster.member_connect_string(leader)).session_timeout(T));
    let mutex = Arc::new(InterProcessMutex::new(holder.clone(), &path).unwrap());
    let guard = Arc::new(mutex.lock_owned().unwrap());
    // The proof runs a while.
    thread::sleep(T / 2);
    assert_eq!(guard.state(), LockState::Held, "not Held before the cut");
    cluster.cut_off(leader).unwrap();
    let cut = Instant::now();
    for &f in &followers {
        cluster.kill(f);
    }
    for &f in &followers {
        cluster.restart(f).unwrap();
    }
    let left = watch_leaving(&guard, PATIENCE);
    let granted = contend(
        &cluster.connect_string_except(leader),
        T,
        &path,
        PATIENCE,
        &holder,
        &guard,
    );
    let grant = granted
        .recv_timeout(PATIENCE * 2)
        .unwrap()
        .unwrap_or_else(|| panic!("the new leader never expired the holder's session"));
    let left = left.recv_timeout(PATIENCE * 2).unwrap();
    if let Some(wrong) = overlap(&grant, left, cut) {
        panic!("two holders under a new leader (tickTime 1 s, syncLimit 20, T = {T:?}): {wrong}");
    }
    drop(guard);
    holder.close();
}

// ---------------------------------------------------------------------------------------
// A session not yet proven reads as unproven.

/// A renewal counts only once a write binds it, so a new `NativeClient` session has no proof
/// for a moment after it connects: it must read as unproven then (`safe_until` past, holders
/// `Suspect`), never as a backend that keeps no proof (`None`, judged by the link alone), and
/// an acquire returns only once the session is proven.
#[test]
fn a_session_not_yet_proven_reads_as_unproven_and_an_acquire_waits_for_its_proof() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let native =
        connect(NativeOptions::new(server.connect_string()).session_timeout(SHORT_SESSION));
    let before = native.session().safe_until();
    assert!(
        before.is_some_and(|until| until <= Instant::now()),
        "an unproven session's safe_until: {before:?}"
    );
    let client: SharedClient = native.clone();
    let mutex = InterProcessMutex::new(client, &unique_root("proof-first")).unwrap();
    let guard = mutex.lock().unwrap();
    let until = native
        .session()
        .safe_until()
        .expect("proven by the acquire");
    assert!(
        until > Instant::now() + SHORT_SESSION / 3,
        "acquired on a proof {:?} old",
        SHORT_SESSION.saturating_sub(until.saturating_duration_since(Instant::now()))
    );
    assert_eq!(guard.state(), LockState::Held);
    drop(guard);
    native.close();
}
