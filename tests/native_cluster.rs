//! Our own client on a 3-node ensemble: a rolling restart (each server in turn) and then a
//! leader kill while 8 sessions contend for one mutex. Nothing may break: no two holders at
//! once, no session lost, no held lock reported lost, and the lock keeps changing hands.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zk_locks::client::native::NativeClient;
use zk_locks::testing::{shared_server, TestingCluster};
use zk_locks::{InterProcessLock, InterProcessMutex, LockState, ZkClient};

const SESSION: Duration = Duration::from_secs(10);
const CONTENDERS: usize = 8;

#[derive(Default)]
struct Tally {
    holders: AtomicUsize,
    violations: AtomicUsize,
    lost_while_held: AtomicUsize,
    acquisitions: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

fn contend(client: Arc<NativeClient>, path: String, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    let mutex = InterProcessMutex::new(client.clone(), &path).unwrap();
    while !stop.load(Ordering::SeqCst) {
        let guard = match mutex.try_lock_for(Duration::from_secs(5)) {
            Ok(Some(guard)) => guard,
            Ok(None) => continue,
            Err(e) => {
                // A request may fail while its server restarts; the recipe must stay safe.
                tally.errors.lock().unwrap().push(e.to_string());
                continue;
            }
        };
        if tally.holders.fetch_add(1, Ordering::SeqCst) != 0 {
            tally.violations.fetch_add(1, Ordering::SeqCst);
        }
        // The work: a request of our own under the lock.
        let _ = client.exists(&path);
        if guard.state() == LockState::Lost {
            tally.lost_while_held.fetch_add(1, Ordering::SeqCst);
        }
        tally.holders.fetch_sub(1, Ordering::SeqCst);
        tally.acquisitions.fetch_add(1, Ordering::SeqCst);
        drop(guard);
    }
}

/// Blocks until `n` more acquisitions happened (progress), or panics after a minute.
fn progress(tally: &Tally, n: usize) {
    let target = tally.acquisitions.load(Ordering::SeqCst) + n;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while tally.acquisitions.load(Ordering::SeqCst) < target {
        assert!(std::time::Instant::now() < deadline, "no progress");
        // Polling a counter another thread bumps; not synchronisation of the subject.
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn rolling_restart_and_leader_kill_lose_nothing() {
    if shared_server().is_none() {
        return;
    }
    let cluster = TestingCluster::start(3).unwrap();
    let path = format!("/rolling-{}", uuid::Uuid::new_v4());
    let clients: Vec<Arc<NativeClient>> = (0..CONTENDERS)
        .map(|_| NativeClient::connect(&cluster.connect_string(), SESSION).unwrap())
        .collect();
    let ids: Vec<_> = clients.iter().map(|c| c.session().session_id()).collect();
    let epochs: Vec<_> = clients.iter().map(|c| c.session().epoch()).collect();
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = clients
        .iter()
        .map(|c| {
            let (c, path, tally, stop) = (c.clone(), path.clone(), tally.clone(), stop.clone());
            std::thread::spawn(move || contend(c, path, tally, stop))
        })
        .collect();
    progress(&tally, 20);
    for i in 0..cluster.len() {
        cluster.kill(i);
        cluster.restart(i).unwrap();
        cluster.wait_for_quorum(Duration::from_secs(90)).unwrap();
        progress(&tally, 20);
    }
    let leader = cluster.leader().expect("a leader");
    cluster.kill(leader);
    cluster.wait_for_quorum(Duration::from_secs(90)).unwrap();
    progress(&tally, 20);
    cluster.restart(leader).unwrap();
    cluster.wait_for_quorum(Duration::from_secs(90)).unwrap();
    progress(&tally, 20);
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    let errors = tally.errors.lock().unwrap().clone();
    eprintln!(
        "{} acquisitions, {} errors: {:?}",
        tally.acquisitions.load(Ordering::SeqCst),
        errors.len(),
        errors.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(
        tally.violations.load(Ordering::SeqCst),
        0,
        "two holders at once"
    );
    assert_eq!(
        tally.lost_while_held.load(Ordering::SeqCst),
        0,
        "a held lock was lost"
    );
    for ((client, id), before) in clients.iter().zip(ids).zip(epochs) {
        let s = client.session().snapshot();
        assert_eq!(s.losses, 0, "a session was lost: {s:?}");
        assert_eq!(s.session_id, id);
        // Every server was restarted, so every session moved at least once (Suspended, then
        // Reconnected elsewhere): the faults reached everyone.
        assert!(s.epoch >= before + 2, "{s:?}");
    }
}
