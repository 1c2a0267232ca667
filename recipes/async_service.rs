//! Async service: the locks from tokio, awaited without a thread. Each acquire is a future
//! of the library's own (`std::task` only, no runtime in the library) on the engine the
//! blocking calls run, so the runtime's two workers carry dozens of waiting tasks. Three
//! service instances (one session each), four acts:
//!
//! 1. **Per-entity locks**: 24 jobs (tasks) each lock their account (`lock_owned_async`), take
//!    one of 2 leases of a rate-limited downstream (`acquire_async`) and hold both across an
//!    await: never two in an account, never 3 leases out.
//! 2. **Cancelled by drop**: a wait for a busy account dropped by `tokio::time::timeout`
//!    leaves the queue at once.
//! 3. **A leader task** per instance (`LeaderLatch::await_leadership_async`): when the leader
//!    leaves the election, the next one leads with a larger term.
//! 4. **Shutdown**: the service's `CancelToken` (Ctrl-C from a terminal) ends a wait given it
//!    (`try_lock_owned_async(Acquire::new().cancel(&token))`: `Error::Cancelled`, its node
//!    deleted), a holder's work and the leader tasks; the latches close with `close_async`.
//!    Other blocking calls (listing a queue) go to `spawn_blocking`.
//!
//! ```sh
//! cargo run --example async_service
//! cargo run --example async_service -- --connect 127.0.0.1:2181
//! ```

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::info;
use tokio::{sync::mpsc, task::JoinSet};
use zk_locks::locks::{Acquire, CancelToken, InterProcessSemaphoreV2, LeaderLatch};
use zk_locks::testing::harness::cookbook::{self, ensure, AnyError, AnyResult};
use zk_locks::testing::harness::TestClient;
use zk_locks::{Error, InterProcessLock, InterProcessMutex};

const ROOT: &str = "/zk-locks/async_service";
/// Service instances (one session each), jobs, accounts (one lock each), downstream leases.
pub const INSTANCES: usize = 3;
pub const JOBS: usize = 24;
const ACCOUNTS: usize = 4;
pub const LEASES: usize = 2;
/// One step of simulated work (an await): long enough for the others to queue meanwhile.
const STEP: Duration = Duration::from_millis(10);
/// A generous bound on anything the story waits for (a loaded machine, a real server).
const PATIENCE: Duration = Duration::from_secs(30);

/// What happened, for the test that runs this recipe.
#[derive(Debug, Default)]
pub struct Story {
    /// Jobs done in act 1 (each checked its account's and the downstream's exclusion).
    pub jobs_done: usize,
    /// The terms of the first two leaders, in the order they led.
    pub terms: Vec<i64>,
    /// The waiter stopped by the shutdown ended with `Error::Cancelled` (else it was granted
    /// as the holder let go, and gave the lock back at once).
    pub waiter_cancelled: bool,
}

/// Where a leader task says it leads: (instance, term).
type Led = mpsc::UnboundedSender<(usize, i64)>;

/// One service instance: its session and the lock objects its tasks share, in `Arc`s (the
/// async acquires take `self: &Arc<Self>`; their futures are `Send + 'static`).
struct Instance {
    _session: TestClient,
    accounts: Vec<Arc<InterProcessMutex>>,
    downstream: Arc<InterProcessSemaphoreV2>,
    latch: Arc<LeaderLatch>,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), |args| run_with(args, true));
}

/// Runs the four acts (without Ctrl-C: for the tests).
pub fn run(args: &[String]) -> AnyResult<Story> {
    run_with(args, false)
}

fn run_with(args: &[String], ctrl_c: bool) -> AnyResult<Story> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("async_service on {}", options.describe());
    let mut instances = Vec::new();
    for i in 0..INSTANCES {
        let session = backend.try_connect()?;
        let (client, path) = (&session.client, |name: &str| format!("{ROOT}/{name}"));
        let account = |a| InterProcessMutex::new(client.clone(), &path(&format!("account-{a}")));
        let accounts = (0..ACCOUNTS).map(|a| account(a).map(Arc::new));
        let pool = InterProcessSemaphoreV2::new(client.clone(), &path("downstream"), LEASES)?;
        let latch = LeaderLatch::new(client.clone(), &path("leader"), format!("instance-{i}"))?;
        instances.push(Instance {
            accounts: accounts.collect::<Result<_, _>>()?,
            downstream: Arc::new(pool),
            latch: Arc::new(latch),
            _session: session,
        });
    }
    // Two workers and no thread per waiter: the 24 jobs wait on them together.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(service(&instances, ctrl_c))
}

async fn service(instances: &[Instance], ctrl_c: bool) -> AnyResult<Story> {
    let mut story = Story::default();
    // The service's shutdown: every wait given this token ends when it is cancelled.
    let shutdown = CancelToken::new();
    if ctrl_c {
        let stop = shutdown.clone();
        tokio::spawn(async move { tokio::signal::ctrl_c().await.map(|()| stop.cancel()) });
    }
    // The leader tasks run beside the service's work until the shutdown (act 3).
    let (led, mut leaders) = mpsc::unbounded_channel();
    let mut leading = JoinSet::new();
    for (i, me) in instances.iter().enumerate() {
        me.latch.start()?; // returns at once: the latch's own thread runs its election
        leading.spawn(lead(i, me.latch.clone(), shutdown.clone(), led.clone()));
    }

    info!("--- act 1: {JOBS} jobs lock their account and lease the downstream ---");
    story.jobs_done = jobs(instances).await?;

    info!("--- act 2: a wait for a busy account, dropped by a timeout ---");
    let busy = instances[0].accounts[0].lock_owned_async().await?;
    let patient = instances[1].accounts[0].lock_owned_async();
    let waited = tokio::time::timeout(STEP * 5, patient).await;
    ensure(waited.is_err(), "granted a held lock")?;
    // Dropped by the timeout while queued: its node's delete was sent then.
    queue_reaches(&instances[0].accounts[0], 1).await?;
    info!("the dropped wait left the queue");
    drop(busy);

    info!("--- act 3: the leader leaves the election; the next one leads ---");
    let (first, term) = leaders.recv().await.ok_or("nobody led")?;
    let latch = instances[first].latch.clone();
    latch.close_async().await?; // its delete and its thread's end, awaited without a thread
    let (_, next) = leaders.recv().await.ok_or("nobody led next")?;
    story.terms = vec![term, next];
    ensure(next > term, "the terms did not grow")?;

    info!("--- act 4: shutdown while a job holds account 1 and another waits ---");
    story.waiter_cancelled = shut_down(instances, &shutdown).await?;
    while let Some(done) = leading.join_next().await {
        done??; // the leader tasks saw the shutdown too
    }
    for (i, me) in instances.iter().enumerate().filter(|(i, _)| *i != first) {
        me.latch.close_async().await?;
        info!("instance {i} left the election");
    }
    for lock in &instances[0].accounts {
        queue_reaches(lock, 0).await?;
    }
    let (pool, latch) = (instances[0].downstream.clone(), instances[0].latch.clone());
    let nodes = move || Ok(pool.participant_nodes()?.len() + latch.participants()?.len());
    ensure(blocking(nodes).await? == 0, "nodes were left behind")?;
    info!("stopped; nothing left behind");
    Ok(story)
}

/// Act 1: each job is a task that locks its account, then leases the downstream, and checks
/// that it is alone in the account and that at most `LEASES` are out. Returns the jobs done.
async fn jobs(instances: &[Instance]) -> AnyResult<usize> {
    // How many are inside each account (`0..ACCOUNTS`) and hold a lease (`ACCOUNTS`).
    let inside: Arc<Vec<AtomicUsize>> = Arc::new((0..=ACCOUNTS).map(|_| 0.into()).collect());
    let mut jobs = JoinSet::new();
    for job in 0..JOBS {
        let (me, a) = (&instances[job % INSTANCES], job % ACCOUNTS);
        let (account, pool) = (me.accounts[a].clone(), me.downstream.clone());
        let inside = inside.clone();
        jobs.spawn(async move {
            let guard = account.lock_owned_async().await?; // queued: no thread waits
            let lease = pool.acquire_async().await?;
            let alone = inside[a].fetch_add(1, SeqCst) == 0;
            let leases = inside[ACCOUNTS].fetch_add(1, SeqCst) + 1;
            ensure(alone && leases <= LEASES, "exclusion broken")?;
            tokio::select! {
                () = tokio::time::sleep(STEP) => {} // the work: guard and lease kept across it
                // Ready if the lock stops being Held (session suspended or lost, node gone).
                state = guard.wait_while_held_async() => Err(format!("the lock is {state:?}"))?,
            }
            inside[ACCOUNTS].fetch_sub(1, SeqCst);
            inside[a].fetch_sub(1, SeqCst);
            drop((lease, guard)); // released: the deletes are sent, not awaited
            Ok::<_, AnyError>(())
        });
    }
    let mut done = 0;
    while let Some(job) = jobs.join_next().await {
        job??;
        done += 1;
    }
    info!("{done} jobs done, each alone in its account, at most {LEASES} leases out");
    Ok(done)
}

/// Act 4: a holder works in steps until the shutdown; a waiter queues behind it with the
/// shutdown token. True when the cancel ended the wait (`Error::Cancelled`, node deleted).
async fn shut_down(instances: &[Instance], shutdown: &CancelToken) -> AnyResult<bool> {
    let (held, waiting) = (&instances[0].accounts[1], instances[1].accounts[1].clone());
    let guard = held.lock_owned_async().await?;
    let stop = shutdown.clone();
    let holder = tokio::spawn(async move {
        while !stop.is_cancelled() {
            tokio::time::sleep(STEP).await; // a step of work; the shutdown is seen between steps
        }
        drop(guard);
    });
    let how = Acquire::new().cancel(shutdown);
    let waiter = tokio::spawn(async move { waiting.try_lock_owned_async(how).await });
    queue_reaches(held, 2).await?;
    info!("shutdown");
    shutdown.cancel();
    let cancelled = match tokio::time::timeout(PATIENCE, waiter).await?? {
        Err(Error::Cancelled { .. }) => true,
        // Granted as the holder let go: a stopping service starts no new work (drops it).
        outcome => outcome.map(drop).map(|()| false)?,
    };
    holder.await?;
    info!("the waiter stopped (by the cancel: {cancelled}); the holder released");
    Ok(cancelled)
}

/// A leader task: awaits leadership (no thread waits), leads until its spell ends (its
/// `ended()` token), then awaits it again; until the shutdown or its latch is closed.
async fn lead(me: usize, latch: Arc<LeaderLatch>, stop: CancelToken, led: Led) -> AnyResult<()> {
    loop {
        let leadership = tokio::select! {
            got = latch.await_leadership_async() => match got {
                Ok(leadership) => leadership,
                Err(Error::NotParticipating { .. }) => return Ok(()), // closed: left the election
                Err(e) => return Err(e.into()),
            },
            () = stop.cancelled() => return Ok(()),
        };
        info!("instance {me} leads (term {})", leadership.term());
        let _ = led.send((me, leadership.term()));
        loop {
            tokio::select! {
                () = tokio::time::sleep(STEP * 5) => {} // a round of the leader's housekeeping
                () = leadership.ended().cancelled() => break,
                () = stop.cancelled() => return Ok(()),
            }
        }
        info!("instance {me} no longer leads");
    }
}

/// Waits until `lock`'s queue has `n` nodes. `participant_nodes` is a blocking call (one
/// `get_children`), so it runs on the blocking pool, as any blocking call from async code.
async fn queue_reaches(lock: &Arc<InterProcessMutex>, n: usize) -> AnyResult<()> {
    let lock = lock.clone();
    blocking(move || {
        let until = Instant::now() + PATIENCE;
        while lock.participant_nodes()?.len() != n {
            ensure(Instant::now() < until, format!("the queue never had {n}"))?;
            std::thread::sleep(Duration::from_millis(5)); // poll pacing
        }
        Ok(())
    })
    .await
}

/// Runs blocking library code on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> AnyResult<T> + Send + 'static,
) -> AnyResult<T> {
    tokio::task::spawn_blocking(f).await?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(story: &Story) {
        assert_eq!(story.jobs_done, JOBS);
        assert!(story.terms.len() == 2 && story.terms[1] > story.terms[0]);
    }

    #[test]
    fn async_service_excludes_cancels_leads_and_shuts_down() {
        check(&run(&cookbook::memory_args()).unwrap());
    }

    #[test]
    fn async_service_on_a_real_server() {
        let Some(args) = cookbook::shared_server_args() else {
            return;
        };
        check(&run(&args).unwrap());
    }
}
