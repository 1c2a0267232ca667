//! Holders on a member cut off from a real 3-member ZooKeeper 3.8 ensemble (issue 32): each
//! member in its own network namespace, tickTime 2 s and syncLimit 5 as in the issue, the
//! holder's follower silently cut off from the other two while its clients still reach it.
//!
//! - With the other members in its connect string, a holder's session moves to the majority
//!   side before the leader can expire it: the mutex, semaphore mutex and write lock held
//!   through it are kept (no spurious loss) and contenders on the majority never get them, for
//!   sessions of 4 s and 12 s, the cut placed anywhere in the ping cycle.
//! - With nowhere to go, the session expires and the lock is granted on the majority side,
//!   but only after the holder left `Held`, and after the holder's `Session::safe_until`; a
//!   zklock holder's command is gone by then too.
//!
//! The three scenarios (4 s and 12 s sessions that must move, a 4 s one that must stop) have
//! sessions and locks of their own on the same follower and share one cut of it.
//!
//! Needs root and `ip` (skipped elsewhere unless `ZK_LOCKS_REQUIRE_SERVER=1`).

mod common;
mod zklock_support;

use std::process::Stdio;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use common::unique_root;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::locks::{
    InterProcessLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    OwnedLockGuard,
};
use zk_locks::testing::{partition, TestingCluster};
use zk_locks::{LockState, SharedClient, ZkClient};
use zklock_support::processes::{alive, read_pid, stderr_of, KillOnDrop};
use zklock_support::{temp_dir, wait_exit, zklock};

const TICK: Duration = Duration::from_secs(2);
const SYNC_LIMIT: u32 = 5;
/// Long enough for any one step on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(40);

fn connect(connect_string: &str, session: Duration) -> SharedClient {
    NativeClient::connect_with(
        NativeOptions::new(connect_string)
            .session_timeout(session)
            .connect_timeout(PATIENCE),
    )
    .expect("connect")
}

/// The member `client`'s session is connected to (from each member's `cons`).
fn member_of(cluster: &TestingCluster, client: &SharedClient) -> Option<usize> {
    let sid = format!("sid=0x{:x}", client.session().session_id()?);
    (0..cluster.len()).find(|&i| {
        cluster
            .four_letter(i, "cons")
            .is_ok_and(|cons| cons.contains(&sid))
    })
}

/// One hold of each recipe, through `client`.
fn hold_every_recipe(client: &SharedClient, root: &str) -> Vec<(String, Box<dyn Held>)> {
    let mutex = Arc::new(InterProcessMutex::new(client.clone(), &format!("{root}/m")).unwrap());
    let semaphore =
        Arc::new(InterProcessSemaphoreMutex::new(client.clone(), &format!("{root}/s")).unwrap());
    let write = InterProcessReadWriteLock::new(client.clone(), &format!("{root}/rw"))
        .unwrap()
        .write_lock_arc();
    vec![
        (
            "mutex".into(),
            Box::new(mutex.lock_owned().unwrap()) as Box<dyn Held>,
        ),
        (
            "semaphore mutex".into(),
            Box::new(semaphore.lock_owned().unwrap()),
        ),
        ("write lock".into(), Box::new(write.lock_owned().unwrap())),
    ]
}

/// What the test needs of an owned guard, whatever its recipe.
trait Held: Send {
    fn state(&self) -> LockState;
    fn wait_while_held(&self, timeout: Option<Duration>) -> LockState;
}

impl<L: InterProcessLock + 'static> Held for OwnedLockGuard<L> {
    fn state(&self) -> LockState {
        OwnedLockGuard::state(self)
    }
    fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        OwnedLockGuard::wait_while_held(self, timeout)
    }
}

/// A contender on the majority side for each recipe's lock, trying for `within`; each reports
/// when it acquired, if it did.
fn contend(
    majority: &str,
    root: &str,
    session: Duration,
    within: Duration,
) -> mpsc::Receiver<(&'static str, Option<Instant>)> {
    let (tx, rx) = mpsc::channel();
    let client = connect(majority, session);
    for (name, path) in [
        ("mutex", "m"),
        ("semaphore mutex", "s"),
        ("write lock", "rw"),
    ] {
        let (tx, client, path) = (tx.clone(), client.clone(), format!("{root}/{path}"));
        thread::spawn(move || {
            let got = match name {
                "mutex" => InterProcessMutex::new(client, &path)
                    .unwrap()
                    .try_lock_for(within)
                    .unwrap()
                    .map(drop),
                "semaphore mutex" => InterProcessSemaphoreMutex::new(client, &path)
                    .unwrap()
                    .try_lock_for(within)
                    .unwrap()
                    .map(drop),
                _ => InterProcessReadWriteLock::new(client, &path)
                    .unwrap()
                    .write_lock()
                    .try_lock_for(within)
                    .unwrap()
                    .map(drop),
            };
            let _ = tx.send((name, got.map(|()| Instant::now())));
        });
    }
    rx
}

fn cluster() -> TestingCluster {
    TestingCluster::builder(3)
        .tick_time(TICK)
        .sync_limit(SYNC_LIMIT)
        .init_limit(10)
        .network_namespaces(true)
        .start()
        .expect("start a partitionable cluster")
}

/// What a scenario checks once the member is cut off, given when it was.
type AfterCut<'a> = Box<dyn FnOnce(Instant) + Send + 'a>;

/// A client of all members whose session is on `member` (reconnecting until it is).
fn on_member(cluster: &TestingCluster, member: usize, session: Duration) -> SharedClient {
    for _ in 0..50 {
        let client = connect(&cluster.connect_string(), session);
        if member_of(cluster, &client) == Some(member) {
            return client;
        }
        client.close();
    }
    panic!("no session landed on member {member} in 50 tries");
}

/// A holder on the follower `member`, with the other members in its connect string: once
/// the member is cut off, its session must move and keep every lock.
fn moves_and_keeps_its_locks(
    cluster: &TestingCluster,
    member: usize,
    session: Duration,
) -> AfterCut<'static> {
    let root = unique_root("partition-move");
    let holder = on_member(cluster, member, session);
    let holds = hold_every_recipe(&holder, &root);
    let majority = cluster.connect_string_except(member);
    Box::new(move |cut| {
        // Longer than the session could live on the leader had it not moved.
        let contend_for = session + TICK * 2 + Duration::from_secs(2);
        let results = contend(&majority, &root, session, contend_for);
        // The cut-off member answers none of the session's proofs: a silent member, left for
        // another at once, and a move accepted at once reports no `Suspended`, so the holds
        // may stay `Held` throughout (rightly: the session never stops being proven). What
        // must hold is that nobody else gets a lock, and that every hold is `Held` once moved.
        for _ in 0..holds.len() {
            let (name, acquired) = results.recv_timeout(contend_for + PATIENCE).unwrap();
            assert_eq!(
                acquired.map(|at| at - cut),
                None,
                "{name}: given away with T = {session:?}: the session expired"
            );
        }
        for (name, held) in &holds {
            let deadline = Instant::now() + PATIENCE;
            while held.state() != LockState::Held {
                assert!(
                    Instant::now() < deadline,
                    "{name}: not Held again after the move (T = {session:?})"
                );
                thread::sleep(Duration::from_millis(20));
            }
        }
        assert_eq!(
            holder.session().snapshot().losses,
            0,
            "the session was lost (T = {session:?})"
        );
        drop(holds);
        holder.close();
    })
}

/// The holder (library and zklock) can reach only the follower `member`, which is cut off:
/// the locks are granted on the majority side once the session expires, never while a holder
/// works.
fn stops_before_its_locks_are_given_away(
    cluster: &TestingCluster,
    member: usize,
    session: Duration,
) -> AfterCut<'static> {
    let root = unique_root("partition-stop");
    let alone = cluster.member_connect_string(member);
    let holder = connect(&alone, session);
    let holds = hold_every_recipe(&holder, &root);
    let dir = temp_dir("partition-zklock");
    let zklock_root = format!("{root}/zklock");
    let script = format!(
        "trap '' TERM; echo $$ > {d}/pid; while :; do sleep 0.05; done",
        d = dir.display()
    );
    let timeout = format!("{}ms", session.as_millis());
    let mut zk = zklock()
        .args([
            "--connect",
            &alone,
            "--session-timeout",
            &timeout,
            "--grace",
            "1s",
        ])
        .args([zklock_root.as_str(), "--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let command = read_pid(&dir.join("pid"));
    let cleanup = KillOnDrop(vec![command, zk.id() as i32]);
    let majority = cluster.connect_string_except(member);
    Box::new(move |_cut| {
        let _cleanup = cleanup;
        let results = contend(&majority, &root, session, PATIENCE);
        let zklock_contender = {
            let client = connect(&majority, session);
            thread::spawn(move || {
                let lock = InterProcessMutex::new(client, &zklock_root).unwrap();
                let got = lock.try_lock_for(PATIENCE).unwrap();
                (got.is_some(), alive(command))
            })
        };
        let mut left = Vec::new();
        for (name, held) in &holds {
            held.wait_while_held(Some(PATIENCE));
            left.push((name.clone(), Instant::now()));
        }
        let safe_until = holder.session().safe_until().expect("a proven session");
        for _ in 0..holds.len() {
            let (name, acquired) = results.recv_timeout(PATIENCE * 2).unwrap();
            let acquired = acquired.unwrap_or_else(|| panic!("{name}: the session never expired"));
            let (_, left_at) = left.iter().find(|(n, _)| n == name).unwrap();
            assert!(*left_at <= acquired, "{name}: two holders");
            assert!(safe_until <= acquired, "{name}: granted before safe_until");
        }
        let (granted, command_alive) = zklock_contender.join().unwrap();
        assert!(granted, "zklock's session never expired");
        let status = wait_exit(&mut zk, "zklock gives up the lock");
        let stderr = stderr_of(&mut zk);
        assert!(
            !command_alive,
            "two holders: zklock's command still ran\n{stderr}"
        );
        assert_eq!(status.code(), Some(76), "{status:?}: {stderr}");
        drop(holds);
        holder.close();
        let _ = std::fs::remove_dir_all(&dir);
    })
}

/// The three scenarios share one cut of one follower, each with sessions and locks of its
/// own: the two that must move (4 s and 12 s) and the one that must stop. Each session's
/// ping cycle began at its own moment and the cut comes after a random pause, so it falls
/// anywhere in each cycle. One cut instead of three: the 12 s scenario's wait covers the
/// others'.
#[test]
fn holders_on_a_cut_off_follower_never_overlap_a_new_holder() {
    if !partition::require_partition() {
        return;
    }
    let cluster = cluster();
    let leader = cluster.leader().expect("a leader");
    let member = (0..3).find(|&i| i != leader).unwrap();
    let scenarios = vec![
        moves_and_keeps_its_locks(&cluster, member, Duration::from_secs(4)),
        moves_and_keeps_its_locks(&cluster, member, Duration::from_secs(12)),
        stops_before_its_locks_are_given_away(&cluster, member, Duration::from_secs(4)),
    ];
    thread::sleep(Duration::from_millis(fastrand::u64(0..4000)));
    cluster.cut_off(member).unwrap();
    let cut = Instant::now();
    let outcomes: Vec<_> = thread::scope(|s| {
        let running: Vec<_> = scenarios
            .into_iter()
            .map(|after_cut| s.spawn(move || after_cut(cut)))
            .collect();
        running.into_iter().map(|h| h.join()).collect()
    });
    cluster.heal(member).unwrap();
    cluster.wait_for_quorum(PATIENCE).unwrap();
    for outcome in outcomes {
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}
