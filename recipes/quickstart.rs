//! Quickstart: eight workers, each with its own ZooKeeper session (as eight processes would
//! have), share three locks in turn:
//!
//! 1. an `InterProcessMutex` — one holder at a time, granted in queue (sequence) order;
//! 2. an `InterProcessReadWriteLock` — readers together, each writer alone;
//! 3. an `InterProcessSemaphoreV2` of 3 leases — at most three at a time.
//!
//! ```sh
//! cargo run --example quickstart                       # embedded in-memory ensemble
//! cargo run --example quickstart -- --connect 127.0.0.1:2181
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use log::info;
use zk_locks::locks::{InterProcessReadWriteLock, InterProcessSemaphoreV2};
use zk_locks::paths;
use zk_locks::{InterProcessLock, InterProcessMutex};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};
use zk_locks::testing::harness::TestClient;

/// How many workers (sessions) contend.
pub const WORKERS: usize = 8;
/// Leases of the semaphore.
pub const LEASES: usize = 3;
/// How long a holder "works" in its critical section: long enough for the others to queue
/// up behind it, so the story shows a queue (this is the work, not synchronisation).
const WORK: Duration = Duration::from_millis(15);

/// What happened, for the test that runs this recipe.
#[derive(Debug)]
pub struct Story {
    /// (worker, sequence number of its lock node), in the order they held the mutex.
    pub mutex_turns: Vec<(usize, i32)>,
    /// Most readers seen inside the read lock at once.
    pub max_readers: usize,
    /// Most leases seen held at once.
    pub max_leases: usize,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

/// Runs the three acts and checks what each lock promises.
pub fn run(args: &[String]) -> AnyResult<Story> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("zk-locks quickstart on {}", options.describe());
    let sessions = (0..WORKERS)
        .map(|_| backend.try_connect())
        .collect::<zk_locks::Result<Vec<TestClient>>>()?;
    info!("{WORKERS} workers connected, one session each");

    let story = Story {
        mutex_turns: mutex_act(&sessions)?,
        max_readers: read_write_act(&sessions)?,
        max_leases: semaphore_act(&sessions)?,
    };
    info!("done: every lock kept its promise");
    for s in &sessions {
        s.client.close();
    }
    Ok(story)
}

/// Act 1: everyone takes the mutex once. Returns the turns in the order they happened.
fn mutex_act(sessions: &[TestClient]) -> AnyResult<Vec<(usize, i32)>> {
    info!("--- act 1: InterProcessMutex at /zk-locks/quickstart/mutex ---");
    let inside = Occupancy::default();
    let turns = Mutex::new(Vec::new());
    every_worker(sessions, |worker, conn| {
        let mutex = InterProcessMutex::new(conn.client.clone(), "/zk-locks/quickstart/mutex")?;
        info!("worker {worker} queues for the mutex");
        let guard = mutex.lock()?;
        let now_inside = inside.enter();
        let node = cookbook::short(guard.node_path().unwrap_or_default());
        let seq = paths::sequence_after(node, "lock-").unwrap_or(-1);
        info!(
            "worker {worker} holds the mutex (node {node}, fencing token {})",
            guard.fencing_token()?
        );
        turns.lock().unwrap().push((worker, seq));
        ensure(
            now_inside == 1,
            format!("{now_inside} workers inside the mutex"),
        )?;
        inside.work_then_leave();
        guard.unlock()?;
        info!("worker {worker} released the mutex");
        Ok(())
    })?;
    let turns = turns.into_inner().unwrap();
    let order: Vec<usize> = turns.iter().map(|t| t.0).collect();
    ensure(
        turns.windows(2).all(|w| w[0].1 < w[1].1),
        "the mutex was not granted in queue order",
    )?;
    info!("mutex turns in queue order: workers {order:?}");
    Ok(turns)
}

/// Act 2: workers 0 and 4 write, the others read. Returns the most readers inside at once.
fn read_write_act(sessions: &[TestClient]) -> AnyResult<usize> {
    info!("--- act 2: InterProcessReadWriteLock at /zk-locks/quickstart/rw ---");
    let readers = Occupancy::default();
    let writers = Occupancy::default();
    every_worker(sessions, |worker, conn| {
        let rw = InterProcessReadWriteLock::new(conn.client.clone(), "/zk-locks/quickstart/rw")?;
        if worker % 4 == 0 {
            info!("worker {worker} queues to WRITE");
            let guard = rw.write_lock().lock()?;
            let w = writers.enter();
            let r = readers.now();
            info!("worker {worker} WRITES (alone: {r} readers, {w} writer inside)");
            ensure(
                w == 1 && r == 0,
                format!("writer with {w} writers, {r} readers"),
            )?;
            writers.work_then_leave();
            guard.unlock()?;
        } else {
            info!("worker {worker} queues to read");
            let guard = rw.read_lock().lock()?;
            let r = readers.enter();
            let w = writers.now();
            info!("worker {worker} reads ({r} readers inside)");
            ensure(w == 0, format!("reader alongside {w} writer(s)"))?;
            readers.work_then_leave();
            guard.unlock()?;
        }
        Ok(())
    })?;
    let max = readers.most();
    info!("readers shared the lock (up to {max} at once); writers were always alone");
    Ok(max)
}

/// Act 3: a semaphore of 3 leases. Returns the most leases held at once.
fn semaphore_act(sessions: &[TestClient]) -> AnyResult<usize> {
    info!("--- act 3: InterProcessSemaphoreV2 of {LEASES} at /zk-locks/quickstart/pool ---");
    let held = Occupancy::default();
    every_worker(sessions, |worker, conn| {
        let pool =
            InterProcessSemaphoreV2::new(conn.client.clone(), "/zk-locks/quickstart/pool", LEASES)?;
        info!("worker {worker} asks for a lease");
        let lease = pool.acquire()?;
        let now = held.enter();
        info!(
            "worker {worker} got {} ({now} of {LEASES} in use)",
            cookbook::short(lease.node_path())
        );
        ensure(now <= LEASES, format!("{now} leases of {LEASES} in use"))?;
        held.work_then_leave();
        lease.close()?;
        Ok(())
    })?;
    let max = held.most();
    info!("never more than {LEASES} leases at once (saw up to {max})");
    Ok(max)
}

/// How many workers are inside a lock at once, and the most seen inside together.
#[derive(Default)]
struct Occupancy {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Occupancy {
    /// One more worker inside; returns how many are inside now.
    fn enter(&self) -> usize {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        now
    }

    /// The worker inside does its work, then leaves (before it releases the lock, so the
    /// next one in never counts it).
    fn work_then_leave(&self) {
        thread::sleep(WORK);
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    /// How many are inside now.
    fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }

    /// The most that were inside together.
    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

/// Runs `work(worker, session)` for every session at once, one thread each (as one process
/// each would), and returns the first error.
fn every_worker(
    sessions: &[TestClient],
    work: impl Fn(usize, &TestClient) -> AnyResult<()> + Sync,
) -> AnyResult<()> {
    thread::scope(|scope| {
        let work = &work;
        let workers: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(worker, conn)| scope.spawn(move || work(worker, conn)))
            .collect();
        for w in workers {
            w.join().map_err(|_| "a worker panicked")??;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quickstart_runs_the_three_acts() {
        let story = run(&cookbook::memory_args()).unwrap();
        assert_eq!(story.mutex_turns.len(), WORKERS);
        let mut workers: Vec<usize> = story.mutex_turns.iter().map(|t| t.0).collect();
        workers.sort_unstable();
        assert_eq!(workers, (0..WORKERS).collect::<Vec<_>>());
        assert!(story.mutex_turns.windows(2).all(|w| w[0].1 < w[1].1));
        assert!((1..=WORKERS - 2).contains(&story.max_readers));
        assert!((1..=LEASES).contains(&story.max_leases));
    }
}
