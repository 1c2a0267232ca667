//! Thread accounting of the `zookeeper` crate backend under a flapping link: repeated silent
//! partitions of the current connection (FaultProxy black holes: the socket stays open, no
//! byte and no close gets through, as when TCP has not given up yet) longer than the session
//! timeout must not accumulate threads. Alone in its own test binary, so no other test's
//! threads are counted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::session::ConnectionState;
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::ZkClient;

const SESSION: Duration = Duration::from_secs(1);
const CYCLES: usize = 8;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

fn reach(client: &ZookeeperClient, state: ConnectionState, within: Duration) {
    let deadline = Instant::now() + within;
    let mut snapshot = client.session().snapshot();
    while snapshot.state != state && Instant::now() < deadline {
        snapshot = client
            .session()
            .wait_for_change(snapshot.epoch, Some(deadline));
    }
    assert_eq!(snapshot.state, state);
}

#[test]
fn repeated_silent_links_do_not_accumulate_threads() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = ZookeeperClient::connect(&proxy.connect_string(), SESSION).unwrap();
    // Callers keep calling through every freeze, as lock waiters would.
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (client, stop) = (client.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if client.exists("/").is_err() {
                        // A failed call on a frozen link: pace the retries (not synchronisation).
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
        })
        .collect();
    let base = threads();
    let mut peak = base;
    let mut after = Vec::new();
    for _ in 0..CYCLES {
        proxy.blackhole();
        reach(&client, ConnectionState::Lost, SESSION * 3);
        reach(&client, ConnectionState::Connected, SESSION * 5);
        peak = peak.max(threads());
        after.push(threads());
    }
    stop.store(true, Ordering::SeqCst);
    for c in callers {
        c.join().unwrap();
    }
    eprintln!("threads: base {base}, peak {peak}, after each cycle {after:?}");
    // Each given-up handle's link is shut down, so its crate threads, its closer and the calls
    // stuck in it end: the count levels off after the first cycle (it grew by about 11 threads
    // per cycle when given-up handles waited for TCP to give up).
    let growth = after[CYCLES - 1].saturating_sub(after[0]);
    assert!(growth <= 8, "threads after each cycle: {after:?}");
}
