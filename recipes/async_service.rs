//! Async service: the locks from tokio, with no async runtime in the library. The library
//! blocks, so a task takes an owned guard (`lock_owned` / `try_lock_owned_for` on an
//! `Arc<InterProcessMutex>`) inside `tokio::task::spawn_blocking`; the guard is `Send +
//! 'static`, so the task keeps it across its `.await`s, checks `guard.state()` between them
//! (no request, except the first look after a reconnect) and gives it back through
//! `spawn_blocking` too (the release is one delete).
//!
//! 1. **Turns**: three service instances (one session each) take the lock in turn, each
//!    holding it across several awaits; never two inside.
//! 2. **Lost between awaits**: the holder's session expires while it works; its next look at
//!    the guard says `Lost`, it stops at once, and a rival gets the lock.
//! 3. **Shutdown**: a holder works and a waiter queues; the shutdown signal (Ctrl-C when run
//!    from a terminal; here the conductor sends it) stops the waiter's wait and the holder's
//!    work; both leave nothing in the lock directory.
//!
//! A waiting acquire stops on shutdown through a `CancelToken`: the service has one token,
//! cancelled by the task that watches the shutdown signal, and every acquire is one
//! `try_lock_owned_with(&Acquire::new().cancel(&token))` on the blocking pool (`acquire`
//! below). The cancel wakes the waiting thread, which deletes its queue node (the waiter
//! behind it moves up) and returns `Error::Cancelled` within about one round trip; its
//! session and its client's other locks are untouched.
//!
//! ```sh
//! cargo run --example async_service
//! cargo run --example async_service -- --connect 127.0.0.1:2181
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::info;
use tokio::sync::watch;
use zk_locks::locks::{Acquire, CancelToken};
use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};
use zk_locks::testing::harness::{self, Backend, ClientKind, Real, TestClient};
use zk_locks::testing::FaultProxy;
use zk_locks::{Error, InterProcessLock, InterProcessMutex, LockState, OwnedLockGuard};

const LOCK: &str = "/zk-locks/async_service/lock";
/// Service instances in the first act.
pub const INSTANCES: usize = 3;
/// Steps of work (each one await) a holder does in the first act.
const STEPS: usize = 3;
/// One step of simulated work: long enough for the others to queue meanwhile.
const STEP: Duration = Duration::from_millis(15);
/// A generous bound on anything the story waits for (a loaded machine, a real server).
const PATIENCE: Duration = Duration::from_secs(30);

/// The service's shutdown signal: `true` once the service must stop. A `watch` channel, so
/// async code awaits it (`changed`); `cancel_on` turns it into a [`CancelToken`] for the
/// blocking acquires.
type Shutdown = watch::Receiver<bool>;

/// What happened, for the test that runs this recipe.
#[derive(Debug, Default)]
pub struct Story {
    /// Turns taken in the first act (one per instance).
    pub turns: usize,
    /// Most holders seen inside at once in the first act.
    pub most_inside: usize,
    /// How the holder's work ended when its session expired (second act).
    pub lost_holder_ended: Option<Ended>,
    /// Whether the rival got the lock after the loss.
    pub rival_took_over: bool,
    /// How the holder's work ended on shutdown (third act).
    pub shutdown_holder_ended: Option<Ended>,
    /// Whether the waiter stopped waiting, without the lock, on shutdown.
    pub waiter_gave_up: bool,
    /// Nodes of the waiter's session left in the queue once it gave up (the cancel deletes
    /// its node before the acquire returns).
    pub waiter_nodes_left: usize,
    /// Nodes left in the lock directory at the end.
    pub left_behind: usize,
}

/// How a holder's work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every step done.
    Done,
    /// The guard said `Lost` between two awaits.
    Lost,
    /// The shutdown signal came.
    Shutdown,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), |args| run_with(args, true));
}

/// Runs the three acts on a multi-threaded tokio runtime (without Ctrl-C: for the tests).
pub fn run(args: &[String]) -> AnyResult<Story> {
    run_with(args, false)
}

/// Runs the three acts; `ctrl_c`: Ctrl-C is the shutdown signal too.
fn run_with(args: &[String], ctrl_c: bool) -> AnyResult<Story> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("async_service on {}", options.describe());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(service(backend.as_ref(), ctrl_c))
}

async fn service(backend: &dyn Backend, ctrl_c: bool) -> AnyResult<Story> {
    let (stop, shutdown) = watch::channel(false);
    let stop = Arc::new(stop);
    if ctrl_c {
        // Ctrl-C from a terminal is the service's shutdown signal (the third act sends it
        // itself).
        let on_signal = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                info!("Ctrl-C: shutting down");
                let _ = on_signal.send(true);
            }
        });
    }
    let cancel = cancel_on(shutdown.clone());
    let mut story = Story::default();
    turns(backend, &shutdown, &cancel, &mut story).await?;
    lost_between_awaits(backend, &shutdown, &cancel, &mut story).await?;
    shutdown_while_waiting(backend, &stop, &shutdown, &cancel, &mut story).await?;
    let observer = InterProcessMutex::new(backend.try_connect()?.client.clone(), LOCK)?;
    story.left_behind = blocking(move || Ok(observer.participant_nodes()?.len())).await?;
    ensure(
        story.left_behind == 0,
        "nodes were left in the lock directory",
    )?;
    info!("done: every act kept its promise");
    Ok(story)
}

/// The service's cancel token: cancelled by a task of its own when the shutdown signal
/// comes (or its sender goes), so that every blocking acquire given it stops waiting.
fn cancel_on(mut shutdown: Shutdown) -> CancelToken {
    let token = CancelToken::new();
    let on_shutdown = token.clone();
    tokio::spawn(async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
        on_shutdown.cancel();
    });
    token
}

/// Takes the lock on a blocking thread, giving up when the shutdown comes: one owned acquire
/// given the service's token, which the shutdown cancels; the waiter then leaves the queue
/// (its node deleted) and `None` comes back. A lock granted just before the cancel was seen
/// is given back: a service that stops starts no new work. That check reads the shutdown
/// signal itself, not only the token: the token is cancelled by a task of its own, which may
/// not have run yet when a holder that saw the signal has already let the lock go.
async fn acquire(
    lock: Arc<InterProcessMutex>,
    cancel: &CancelToken,
    shutdown: &Shutdown,
) -> AnyResult<Option<OwnedLockGuard<InterProcessMutex>>> {
    let (how, cancel, shutdown) = (
        Acquire::new().cancel(cancel),
        cancel.clone(),
        shutdown.clone(),
    );
    blocking(move || match lock.try_lock_owned_with(&how) {
        Ok(Some(guard)) if cancel.is_cancelled() || *shutdown.borrow() => {
            guard.unlock()?;
            Ok(None)
        }
        Ok(guard) => Ok(guard),
        Err(Error::Cancelled { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    })
    .await
}

/// Gives the lock back on a blocking thread (one delete; a `Lost` guard answers at once).
async fn release(guard: OwnedLockGuard<InterProcessMutex>) -> AnyResult<()> {
    blocking(move || Ok(guard.unlock()?)).await
}

/// Works in steps (`steps`: `None` until told to stop), one await each, and looks at the guard
/// before each step: `Held` works, `Suspect` pauses (the session may be gone: another instance
/// may hold the lock), `Lost` stops for good.
async fn work(
    guard: &OwnedLockGuard<InterProcessMutex>,
    steps: Option<usize>,
    shutdown: &mut Shutdown,
    inside: &Occupancy,
) -> Ended {
    let mut done = 0;
    loop {
        if *shutdown.borrow() {
            return Ended::Shutdown;
        }
        match guard.state() {
            LockState::Held => {}
            LockState::Suspect => {
                tokio::select! {
                    _ = tokio::time::sleep(STEP) => continue,
                    _ = shutdown.changed() => return Ended::Shutdown,
                }
            }
            _ => return Ended::Lost,
        }
        if steps.is_some_and(|n| done >= n) {
            return Ended::Done;
        }
        inside.enter();
        let ended = tokio::select! {
            _ = tokio::time::sleep(STEP) => None,
            _ = shutdown.changed() => Some(Ended::Shutdown),
        };
        inside.leave();
        if let Some(ended) = ended {
            return ended;
        }
        done += 1;
    }
}

/// Act 1: every instance takes the lock once and holds it across `STEPS` awaits.
async fn turns(
    backend: &dyn Backend,
    shutdown: &Shutdown,
    cancel: &CancelToken,
    story: &mut Story,
) -> AnyResult<()> {
    info!("--- act 1: {INSTANCES} instances take {LOCK} in turn ---");
    let inside = Arc::new(Occupancy::default());
    let mut tasks = Vec::new();
    for instance in 0..INSTANCES {
        let session = backend.try_connect()?;
        let lock = Arc::new(InterProcessMutex::new(session.client.clone(), LOCK)?);
        let (inside, mut shutdown, cancel) = (inside.clone(), shutdown.clone(), cancel.clone());
        tasks.push(tokio::spawn(async move {
            let _session = session;
            let Some(guard) = acquire(lock, &cancel, &shutdown).await? else {
                return Err("stopped before it got the lock".into());
            };
            info!(
                "instance {instance} holds the lock (fencing token {})",
                guard.fencing_token()?
            );
            let ended = work(&guard, Some(STEPS), &mut shutdown, &inside).await;
            release(guard).await?;
            info!("instance {instance} released the lock");
            ensure(
                ended == Ended::Done,
                format!("instance {instance}: {ended:?}"),
            )
        }));
    }
    for task in tasks {
        task.await??;
        story.turns += 1;
    }
    story.most_inside = inside.most();
    ensure(
        story.most_inside == 1,
        format!("{} holders inside at once", story.most_inside),
    )
}

/// Act 2: the holder's session expires while it works; it notices at its next look.
async fn lost_between_awaits(
    backend: &dyn Backend,
    shutdown: &Shutdown,
    cancel: &CancelToken,
    story: &mut Story,
) -> AnyResult<()> {
    info!("--- act 2: the holder's session expires between two awaits ---");
    let (holder, proxy) = match backend.connect_string() {
        None => (backend.try_connect()?, None),
        Some(hosts) => {
            let (server, chroot) = harness::first_server(&hosts)?;
            let proxy = FaultProxy::start(server)?;
            let via = format!("{}{chroot}", proxy.connect_string());
            let real = Real::at(&via, ClientKind::Native, cookbook::SESSION_TIMEOUT);
            (real.try_connect()?, Some(proxy))
        }
    };
    let lock = Arc::new(InterProcessMutex::new(holder.client.clone(), LOCK)?);
    let guard = acquire(lock, cancel, shutdown)
        .await?
        .ok_or("stopped before it got the lock")?;
    info!("holder holds the lock and works");
    let expire = blocking(move || {
        expire(&holder, proxy.as_ref())?;
        Ok(holder)
    });
    let (mut shutdown, inside) = (shutdown.clone(), Occupancy::default());
    let (ended, holder) = tokio::join!(work(&guard, None, &mut shutdown, &inside), expire);
    let _holder = holder?;
    info!("holder saw {ended:?} at its next look and stopped working");
    story.lost_holder_ended = Some(ended);
    ensure(ended == Ended::Lost, format!("the holder ended {ended:?}"))?;
    release(guard).await?;

    let rival_session = backend.try_connect()?;
    let rival = Arc::new(InterProcessMutex::new(rival_session.client.clone(), LOCK)?);
    let rival_guard = blocking(move || Ok(rival.try_lock_owned_for(PATIENCE)?)).await?;
    story.rival_took_over = rival_guard.is_some();
    ensure(story.rival_took_over, "the rival never got the lock")?;
    info!("the rival holds the lock");
    release(rival_guard.ok_or("no rival guard")?).await
}

/// Expires the holder's session: on the embedded ensemble at once; on a real one through the
/// proxy in front of it (the client learns on its next reconnect).
fn expire(holder: &TestClient, proxy: Option<&FaultProxy>) -> AnyResult<()> {
    let losses = holder.client.session().snapshot().losses;
    match (holder.memory(), proxy) {
        (Some(memory), _) => memory.expire(),
        (None, Some(proxy)) => drop(proxy.expire_session()?),
        (None, None) => return Err("no way to expire this session".into()),
    }
    let until = Instant::now() + PATIENCE;
    while holder.client.session().snapshot().losses == losses {
        ensure(
            Instant::now() < until,
            "the client never saw its session expire",
        )?;
        std::thread::sleep(Duration::from_millis(10)); // poll pacing
    }
    Ok(())
}

/// Act 3: the shutdown signal stops a waiting acquire and a holder's work.
async fn shutdown_while_waiting(
    backend: &dyn Backend,
    stop: &watch::Sender<bool>,
    shutdown: &Shutdown,
    cancel: &CancelToken,
    story: &mut Story,
) -> AnyResult<()> {
    info!("--- act 3: shutdown while one instance holds and another waits ---");
    let (holder_session, waiter_session) = (backend.try_connect()?, backend.try_connect()?);
    let holder_lock = Arc::new(InterProcessMutex::new(holder_session.client.clone(), LOCK)?);
    let waiter_lock = Arc::new(InterProcessMutex::new(waiter_session.client.clone(), LOCK)?);
    let guard = acquire(holder_lock.clone(), cancel, shutdown)
        .await?
        .ok_or("stopped before it got the lock")?;
    let mut holder_shutdown = shutdown.clone();
    let holder = tokio::spawn(async move {
        let ended = work(&guard, None, &mut holder_shutdown, &Occupancy::default()).await;
        release(guard).await.map(|()| ended)
    });
    let waiter_id = waiter_session
        .client
        .session()
        .session_id()
        .ok_or("the waiter has no session")?;
    let waiting = (waiter_lock, cancel.clone(), shutdown.clone());
    let waiter = tokio::spawn(async move { acquire(waiting.0, &waiting.1, &waiting.2).await });
    // Signal once the waiter is in the queue (its node beside the holder's).
    let queue = holder_lock.clone();
    blocking(move || {
        let until = Instant::now() + PATIENCE;
        while queue.participant_nodes()?.len() < 2 {
            ensure(Instant::now() < until, "the waiter never queued")?;
            std::thread::sleep(Duration::from_millis(5)); // poll pacing
        }
        Ok(())
    })
    .await?;
    info!("the waiter queues; shutdown signal");
    stop.send(true)?;
    let waited = tokio::time::timeout(PATIENCE, waiter).await??;
    story.waiter_gave_up = waited?.is_none();
    ensure(
        story.waiter_gave_up,
        "the waiter got the lock after shutdown",
    )?;
    // The cancel deleted the waiter's node before its acquire returned; the holder may still
    // be on its way out.
    let queue = holder_lock.clone();
    let participants = blocking(move || Ok(queue.participants()?)).await?;
    story.waiter_nodes_left = participants
        .iter()
        .filter(|p| p.session_id == waiter_id)
        .count();
    ensure(
        story.waiter_nodes_left == 0,
        "the cancelled waiter left its node in the queue",
    )?;
    info!("the waiter left the queue: its node is gone");
    let ended = tokio::time::timeout(PATIENCE, holder).await???;
    story.shutdown_holder_ended = Some(ended);
    info!("the waiter stopped waiting; the holder stopped ({ended:?}) and released");
    ensure(
        ended == Ended::Shutdown,
        format!("the holder ended {ended:?}"),
    )
}

/// Runs blocking library code on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> AnyResult<T> + Send + 'static,
) -> AnyResult<T> {
    tokio::task::spawn_blocking(f).await?
}

/// How many holders are inside at once, and the most seen together.
#[derive(Default)]
struct Occupancy {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Occupancy {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(story: &Story) {
        assert_eq!(story.turns, INSTANCES);
        assert_eq!(story.most_inside, 1);
        assert_eq!(story.lost_holder_ended, Some(Ended::Lost));
        assert!(story.rival_took_over);
        assert_eq!(story.shutdown_holder_ended, Some(Ended::Shutdown));
        assert!(story.waiter_gave_up);
        assert_eq!(story.waiter_nodes_left, 0);
        assert_eq!(story.left_behind, 0);
    }

    #[test]
    fn async_service_takes_turns_stops_on_loss_and_on_shutdown() {
        check(&run(&cookbook::memory_args()).unwrap());
    }

    /// The real-ensemble path: the holder's session is expired through a `FaultProxy`.
    #[test]
    fn async_service_on_a_real_server() {
        let Some(args) = cookbook::shared_server_args() else {
            return;
        };
        check(&run(&args).unwrap());
    }
}
