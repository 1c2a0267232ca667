//! 1,000 threads queue on one `InterProcessMutex`: checks that the lock is handed on in FIFO
//! order (queue order = node sequence order) with one watch notification per release (no herd),
//! and reports the memory each waiter costs (RSS growth per waiter, thread stack included and
//! separated out).
//!
//! ```text
//! cargo run --release --features testing --example waiters [-- <waiters>]
//! cargo run --release --features testing --example waiters -- 1000 --real
//! ZK_CONNECT=127.0.0.1:2181 cargo run --release --features testing --example waiters
//! ```
//!
//! In-memory ensemble by default; a real server (one session, all waiters on it) with
//! `--real` (a `TestingServer` of its own) or `ZK_CONNECT`.

use std::process::ExitCode;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zk_locks::client::counting::CountingClient;
use zk_locks::testing::harness::{unique_root, Backend, ClientKind, Memory, Real};
use zk_locks::testing::TestingServer;
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

/// Waiter threads get a small stack, as a service with many blocked threads would configure.
const STACK: usize = 128 * 1024;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    pages * page
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: malloc_trim only returns free heap pages to the OS.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// Polls a condition another thread establishes without telling us (a node count).
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// RSS growth of `n` threads that only block (the thread's own cost).
fn idle_thread_cost(n: usize) -> Result<u64, String> {
    let (release, gate) = mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(gate));
    let (ready_tx, ready) = mpsc::channel();
    let before = rss_bytes();
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (gate, ready_tx) = (gate.clone(), ready_tx.clone());
            thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    ready_tx.send(()).ok();
                    let _ = gate.lock().recv();
                })
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    for _ in 0..n {
        ready.recv().map_err(|e| e.to_string())?;
    }
    let grown = rss_bytes().saturating_sub(before);
    drop(release);
    for t in threads {
        t.join().map_err(|_| "idle thread panicked")?;
    }
    Ok(grown)
}

fn run(waiters: usize, real: bool) -> Result<(), String> {
    let mut server = None;
    let connect = match std::env::var("ZK_CONNECT") {
        Ok(hosts) => Some(hosts),
        Err(_) if real => {
            // The waiters' sessions are 30 s (below): past ZooKeeper's own longest, 10 s.
            let s = TestingServer::builder()
                .max_session_timeout(Duration::from_secs(30))
                .start()
                .map_err(|e| e.to_string())?;
            let hosts = s.connect_string();
            server = Some(s);
            Some(hosts)
        }
        Err(_) => None,
    };
    let (sessions, backend): (Box<dyn Backend>, &str) = match connect {
        Some(hosts) => (
            Box::new(Real::at(
                &hosts,
                ClientKind::Native,
                Duration::from_secs(30),
            )),
            "real server",
        ),
        None => (Box::new(Memory::new()), "memory"),
    };
    let session = sessions.try_connect().map_err(|e| e.to_string())?;
    let client = Arc::new(CountingClient::new(session.client.clone()));
    let thread_cost = idle_thread_cost(waiters)?;

    let path = unique_root("zk-locks-waiters");
    let shared: SharedClient = client.clone();
    let mutex = Arc::new(InterProcessMutex::new(shared, &path).map_err(|e| e.to_string())?);
    mutex.acquire().map_err(|e| e.to_string())?;
    let order = Arc::new(Mutex::new(Vec::with_capacity(waiters)));
    let before = rss_bytes();
    let threads: Vec<_> = (0..waiters)
        .map(|_| {
            let (mutex, order) = (mutex.clone(), order.clone());
            thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || -> Result<(), String> {
                    mutex.acquire().map_err(|e| e.to_string())?;
                    let node = mutex.held_node().map(|n| n.path().to_string());
                    order.lock().push(node.unwrap_or_default());
                    mutex.release().map_err(|e| e.to_string())
                })
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    // Every waiter has its node in the queue and, soon after, its watch on its predecessor.
    wait_for("every waiter to queue", || {
        client
            .get_children(&path, None)
            .is_ok_and(|c| c.len() == waiters + 1)
    })?;
    wait_for("every waiter to watch", || {
        client.counters().get_data >= waiters as u64
    })?;
    let queued = rss_bytes().saturating_sub(before);
    // Each waiter's listing (the whole queue, transient) leaves freed memory in glibc's
    // per-thread arenas; trimming shows what stays live.
    trim_heap();
    let queued_live = rss_bytes().saturating_sub(before);
    let at_release = client.counters();

    let start = Instant::now();
    mutex.release().map_err(|e| e.to_string())?;
    for t in threads {
        t.join().map_err(|_| "a waiter panicked")??;
    }
    let drained = start.elapsed();
    let after = client.counters();

    let order = order.lock();
    let sequence = |p: &String| {
        p.get(p.len().saturating_sub(10)..)
            .unwrap_or("")
            .to_string()
    };
    let fifo = order.windows(2).all(|w| sequence(&w[0]) < sequence(&w[1]));
    let releases = waiters as u64; // ours, then every waiter's but the last one's
    let events = after.watch_events - at_release.watch_events;
    let requests = after.requests() - at_release.requests();
    println!("backend: {backend}; {waiters} waiters on one mutex, one session, {STACK} B stacks");
    println!("FIFO hand-off: {}", if fifo { "yes" } else { "NO" });
    println!(
        "watch notifications per release: {:.3} ({events} for {releases} releases)",
        events as f64 / releases as f64
    );
    println!(
        "requests per hand-off while draining: {:.2}",
        requests as f64 / releases as f64
    );
    println!(
        "drain: {:.1} ms ({:.1} µs per hand-off)",
        drained.as_secs_f64() * 1e3,
        drained.as_secs_f64() * 1e6 / waiters as f64
    );
    println!(
        "RSS per waiter: {:.1} KiB total; a blocked thread alone {:.1} KiB; the lock's share {:.1} KiB",
        queued as f64 / 1024.0 / waiters as f64,
        thread_cost as f64 / 1024.0 / waiters as f64,
        queued.saturating_sub(thread_cost) as f64 / 1024.0 / waiters as f64
    );
    drop(server);
    println!(
        "RSS per waiter after malloc_trim: {:.1} KiB; the lock's share {:.1} KiB",
        queued_live as f64 / 1024.0 / waiters as f64,
        queued_live.saturating_sub(thread_cost) as f64 / 1024.0 / waiters as f64
    );
    if !fifo {
        return Err("the lock was not handed on in queue order".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let waiters = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let real = std::env::args().any(|a| a == "--real");
    match run(waiters, real) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("waiters: {e}");
            ExitCode::FAILURE
        }
    }
}
