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
use zk_locks::testing::harness::reach_state;
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::ZkClient;

const SESSION: Duration = Duration::from_secs(1);
const CYCLES: usize = 8;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// This process's threads named `name` (the kernel keeps the first 15 bytes of a name).
fn threads_named(name: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// Live `zookeeper` crate handles: each has one event thread.
fn crate_handles() -> usize {
    threads_named("event")
}

#[test]
fn repeated_silent_links_do_not_accumulate_threads() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = ZookeeperClient::connect(&proxy.connect_string(), SESSION).unwrap();
    // Callers keep calling through every silent link, as lock waiters would.
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (client, stop) = (client.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if client.exists("/").is_err() {
                        // A failed call on a silent link: pace the retries (not synchronisation).
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
        })
        .collect();
    let base = threads();
    let mut peak = base;
    let mut after = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..CYCLES {
        proxy.blackhole();
        reach_state(client.as_ref(), ConnectionState::Lost, SESSION * 3);
        reach_state(client.as_ref(), ConnectionState::Connected, SESSION * 5);
        peak = peak.max(threads());
        after.push(threads());
        handles.push(crate_handles());
    }
    eprintln!(
        "threads: base {base}, peak {peak}, after each cycle {after:?}; crate handles {handles:?}"
    );
    // A given-up handle ends about one call timeout after it was given up (its link is shut
    // down): besides the current one, at most the last few are still ending. (Before, every
    // given-up handle lived on with its threads: one more per cycle.)
    assert!(
        handles.iter().all(|h| *h <= 4),
        "crate handles: {handles:?}"
    );
    // And all of them end.
    let deadline = Instant::now() + SESSION * 10;
    while (crate_handles() > 1 || threads_named("zk-locks-retire") > 0) && Instant::now() < deadline
    {
        // Polling: a thread's end has nothing to wait on.
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(crate_handles(), 1, "threads {}", threads());
    assert_eq!(threads_named("zk-locks-retire"), 0);
    stop.store(true, Ordering::SeqCst);
    for c in callers {
        c.join().unwrap();
    }
}
