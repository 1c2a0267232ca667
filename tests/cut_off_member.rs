//! A holder whose member is cut off from its ensemble (issue 32), on a real ZooKeeper through
//! [`CutOffMember`]: the member answers the holder's pings alone and nothing that needs the
//! leader, while the real server (the leader's side) hears nothing and expires the session
//! `T` after it last heard of it, then grants the lock to a contender.
//!
//! Must hold, for every recipe: with nowhere to go, the holder leaves `Held` before the leader
//! can expire its session (no moment with two holders), by `Session::safe_until`; and when
//! another member can serve the session, the session moves there before it can expire (at
//! once, as from a silent member, since the cut-off member answers none of its proofs), so the
//! lock is kept (no spurious loss) and the contender never gets it.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
use zk_locks::client::MultiOp;
use zk_locks::locks::{
    InterProcessLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    WriteLock,
};
use zk_locks::testing::harness::unique_root;
use zk_locks::testing::{shared_server, CutOffMember};
use zk_locks::{Error, LockState, SharedClient, ZkClient};

const T: Duration = Duration::from_secs(4);
/// How long a test waits for a state it expects.
const PATIENCE: Duration = Duration::from_secs(30);

type Make<L> = fn(SharedClient, &str) -> Arc<L>;

fn mutex(client: SharedClient, path: &str) -> Arc<InterProcessMutex> {
    Arc::new(InterProcessMutex::new(client, path).unwrap())
}

fn semaphore_mutex(client: SharedClient, path: &str) -> Arc<InterProcessSemaphoreMutex> {
    Arc::new(InterProcessSemaphoreMutex::new(client, path).unwrap())
}

fn write_lock(client: SharedClient, path: &str) -> Arc<WriteLock> {
    InterProcessReadWriteLock::new(client, path)
        .unwrap()
        .write_lock_arc()
}

/// Polls `done` every 20 ms until it holds or `within` passes; whether it held.
fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// The holder takes the lock through `members` (cut-off stand-ins in front of the shared
/// server), the member it is on is cut off, and a contender straight on the server tries for
/// `contend` from then on. Returns (when the holder left `Held`, the holder's `safe_until`
/// then, when the contender acquired if it did, whether the holder is `Held` again at the end).
fn cut_holders_member<L: InterProcessLock + 'static>(
    make: Make<L>,
    members: usize,
    contend: Duration,
) -> (Instant, Option<Instant>, Option<Instant>, bool) {
    let Some(server) = shared_server() else {
        return (Instant::now(), None, None, true); // skipped (not under CI)
    };
    let path = unique_root("cut-off");
    let stand_ins: Vec<CutOffMember> = (0..members)
        .map(|_| CutOffMember::start(server.addr()).unwrap())
        .collect();
    let hosts: Vec<String> = stand_ins.iter().map(|m| m.connect_string()).collect();
    let holder_client = NativeClient::connect(&hosts.join(","), T).unwrap();
    let holder_client: SharedClient = holder_client;
    let contender_client: SharedClient =
        NativeClient::connect(&server.connect_string(), T).unwrap();
    let lock = make(holder_client.clone(), &path);
    let guard = lock.lock_owned().unwrap();
    assert_eq!(guard.state(), LockState::Held);
    // Anywhere in the ping cycle.
    thread::sleep(Duration::from_millis(fastrand::u64(
        0..T.as_millis() as u64 / 3,
    )));
    let on = stand_ins
        .iter()
        .find(|m| m.connections() > 0)
        .expect("the holder is on one of the stand-ins");
    on.cut_off();
    let cut = Instant::now();

    let (tx, rx) = mpsc::channel();
    let contender_lock = make(contender_client.clone(), &path);
    let contender = thread::spawn(move || {
        let got = contender_lock.try_lock_owned_for(contend).unwrap();
        let at = got.as_ref().map(|_| Instant::now());
        let _ = tx.send(at);
        drop(got);
    });

    // `state()` asks nothing while the link stays up: the stand-in has no data to answer a
    // read with, and a real cut-off follower would answer one (a wait's watch) alone. With
    // another member to go to, the session may move (the cut-off member answers none of its
    // proofs: a silent member) before its proof is old enough to make the holder `Suspect`,
    // and a move to a member that accepts at once reports no `Suspended`: the holder may stay
    // `Held` throughout, rightly.
    let left = eventually(if members > 1 { T } else { PATIENCE }, || {
        guard.state() != LockState::Held
    });
    let left_at = Instant::now();
    assert!(
        left || members > 1,
        "the holder stayed Held {PATIENCE:?} after its member was cut off"
    );
    let safe_until = holder_client.session().safe_until();
    let acquired = rx.recv_timeout(contend + PATIENCE).unwrap();
    contender.join().unwrap();
    let held_again = members > 1 && eventually(PATIENCE, || guard.state() == LockState::Held);
    log::info!(
        "left Held {:?} after the cut; contender {:?}",
        left_at - cut,
        acquired.map(|a| a - cut)
    );
    (left_at, safe_until, acquired, held_again)
}

/// With another member to go to, the session moves before it can expire: the holder keeps the
/// lock and the contender never gets it (it tries for longer than the session could live).
fn keeps_the_lock_by_moving<L: InterProcessLock + 'static>(make: Make<L>) {
    let (_, _, acquired, held_again) = cut_holders_member(make, 2, T + Duration::from_secs(3));
    assert_eq!(
        acquired, None,
        "the lock was given away: the session expired"
    );
    assert!(
        held_again,
        "the holder's lock is not Held again after the move"
    );
}

/// With nowhere to go, the session expires and the lock is granted elsewhere, but only after
/// the holder left `Held`, and no earlier than the holder's `safe_until`.
fn stops_before_the_lock_is_given_away<L: InterProcessLock + 'static>(make: Make<L>) {
    let (left_at, safe_until, acquired, _) = cut_holders_member(make, 1, T * 3);
    let Some(acquired) = acquired else {
        return; // the session outlived the wait (or the test is skipped): no overlap either
    };
    assert!(
        left_at <= acquired,
        "two holders: the contender acquired {:?} before the holder left Held",
        left_at - acquired
    );
    if let Some(safe_until) = safe_until {
        assert!(
            safe_until <= acquired,
            "the derived bound was wrong: the lock was granted {:?} before safe_until",
            safe_until - acquired
        );
    }
}

/// Runs `scenario` for every recipe at once (each with its own stand-ins, path and clients
/// on the shared server: they share nothing but the server), then fails with every recipe
/// that failed, by name. At once rather than one test each: the scenarios mostly wait on the
/// session's clock, and three tests would take turns on the test threads.
fn for_every_recipe(mutex_case: fn(), semaphore_mutex_case: fn(), write_lock_case: fn()) {
    let failed: Vec<String> = thread::scope(|s| {
        let running: Vec<_> = [
            ("mutex", mutex_case),
            ("semaphore mutex", semaphore_mutex_case),
            ("write lock", write_lock_case),
        ]
        .into_iter()
        .map(|(name, case)| (name, s.spawn(case)))
        .collect();
        running
            .into_iter()
            .filter_map(|(name, h)| {
                h.join().err().map(|panic| {
                    let why = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    format!("{name}: {why}")
                })
            })
            .collect()
    });
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The mutex, the semaphore mutex and the write lock keep their locks by moving.
#[test]
fn every_recipe_keeps_its_lock_by_moving() {
    for_every_recipe(
        || keeps_the_lock_by_moving(mutex),
        || keeps_the_lock_by_moving(semaphore_mutex),
        || keeps_the_lock_by_moving(write_lock),
    );
}

/// The mutex, the semaphore mutex and the write lock: each holder stops before its lock is
/// given away.
#[test]
fn every_recipe_holder_stops_before_the_lock_is_given_away() {
    for_every_recipe(
        || stops_before_the_lock_is_given_away(mutex),
        || stops_before_the_lock_is_given_away(semaphore_mutex),
        || stops_before_the_lock_is_given_away(write_lock),
    );
}

/// Past `safe_until` a fenced write is refused without being sent: the leader may have given
/// the lock away (the server's own check would answer only once the member could reach it).
#[test]
fn a_fenced_write_past_safe_until_is_refused_unsent() {
    let Some(server) = shared_server() else {
        return;
    };
    let path = unique_root("cut-off-fenced");
    let member = CutOffMember::start(server.addr()).unwrap();
    let client: SharedClient = NativeClient::connect(&member.connect_string(), T).unwrap();
    let lock = mutex(client.clone(), &path);
    let guard = lock.lock_owned().unwrap();
    member.cut_off();
    assert!(
        eventually(PATIENCE, || client
            .session()
            .safe_until()
            .is_some_and(|until| Instant::now() >= until)),
        "the proof never aged past safe_until"
    );
    let write = [MultiOp::SetData {
        path: path.clone(),
        data: b"fenced".to_vec(),
        version: -1,
    }];
    match guard.fenced_multi(&write) {
        Err(Error::SessionUnproven { path: p }) => assert_eq!(p, path),
        other => panic!("expected SessionUnproven, got {other:?}"),
    }
}
