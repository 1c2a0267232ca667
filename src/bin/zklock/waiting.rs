//! Acquiring the lock: a worker thread connects, takes the lock and later releases it (a mutex
//! and the read/write sides are released by the thread that took them), while the main thread
//! waits for its events, and withdraws from the queue on SIGINT/SIGTERM/SIGHUP (delivered as
//! events too, by [`crate::signals`]): it cancels the worker's wait ([`CancelToken`]), which
//! deletes the worker's node and returns, the session untouched.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
use zk_locks::locks::{
    Acquire, CancelToken, HeldNode, InterProcessLock, InterProcessMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreV2,
};
use zk_locks::{Error, SharedClient};

use crate::cli::{Kind, RunArgs, Security};
use crate::connecting::{close, connect, not_allowed};
use crate::exit;
use crate::signals;

// ---------------------------------------------------------------------------------------------
// Waiting for the lock

/// What the worker thread reports.
pub(crate) enum Event {
    Connected(Arc<NativeClient>),
    Acquired(Arc<HeldNode>),
    TimedOut,
    /// The wait was cancelled (after a stop signal): the worker's node is deleted.
    Cancelled,
    Failed(Error),
    /// The watcher saw the lock held through this node (its path) lost. Named, so that a
    /// watcher of an earlier `--elect` round cannot pass for the current one's.
    Lost(String),
    /// The watcher saw the lock held through this node (its path) `Suspect` until close to
    /// the moment its session can expire (`Session::safe_until`, given): the command must be
    /// gone by then.
    Expiring(String, Instant),
    /// The worker released the lock (after main asked).
    Released,
    /// A signal zklock handles (see [`crate::signals`]).
    Signal(i32),
}

/// The lock, held by the worker thread, and the channels to that thread.
pub(crate) struct Held {
    pub(crate) client: Option<Arc<NativeClient>>,
    pub(crate) node: Arc<HeldNode>,
    /// For the watcher that reports a lost lock.
    pub(crate) loss_tx: Sender<Event>,
    /// Tells the worker to release.
    pub(crate) release_tx: Sender<()>,
}

/// Starts the worker and waits, interruptibly, until it holds the lock. `Err` is the exit
/// status when it does not (timed out, not connected, not allowed, interrupted). The worker
/// reports on `events_tx`, where the signals arrive too (one channel for every round of
/// `--elect`, so that no signal falls between two rounds).
pub(crate) fn acquire(
    args: &RunArgs,
    events_tx: &Sender<Event>,
    events: &Receiver<Event>,
) -> Result<Held, i32> {
    let events_tx = events_tx.clone();
    let loss_tx = events_tx.clone();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let cancel = CancelToken::new();
    let request = Request {
        cancel: cancel.clone(),
        security: args.security.clone(),
        hosts: args.connect.clone(),
        session_timeout: args.session_timeout,
        tick_time: args.tick_time,
        connect_timeout: args.connect_timeout,
        kind: args.kind,
        path: args.path.clone(),
        timeout: args.timeout,
        // An empty id is no id: the node then holds `<host> <pid>`, as the library's
        // selector stores without one (an empty node would name nobody in `holders`).
        id: args
            .elect
            .then(|| args.id.clone())
            .flatten()
            .filter(|id| !id.is_empty()),
    };
    let spawned = std::thread::Builder::new()
        .name("zklock-holder".into())
        .spawn(move || hold(&request, &events_tx, &release_rx));
    if let Err(e) = spawned {
        eprintln!("zklock: cannot start a thread: {e}");
        return Err(exit::LOCK_ERROR);
    }

    // Phase 1: connect and wait for the lock, interruptibly.
    let mut client: Option<Arc<NativeClient>> = None;
    let node = loop {
        let Ok(event) = events.recv() else {
            eprintln!("zklock: the lock thread ended unexpectedly");
            close(&client);
            return Err(exit::LOCK_ERROR);
        };
        match event {
            Event::Signal(signo) if signals::is_stop(signo) => {
                eprintln!(
                    "zklock: interrupted by signal {signo} while waiting for {}",
                    args.path
                );
                // Cancelling the wait deletes our node, so the queue moves on at once.
                withdraw(&cancel, events, &mut client, args);
                close(&client);
                return Err(exit::SIGNAL_BASE + signo);
            }
            Event::Connected(c) => client = Some(c),
            Event::Acquired(node) => break node,
            Event::TimedOut => {
                eprintln!(
                    "zklock: timed out after {:?} waiting for {}",
                    args.timeout.unwrap_or_default(),
                    args.path
                );
                close(&client);
                return Err(exit::TIMED_OUT);
            }
            Event::Failed(e @ Error::Connect { .. }) => {
                eprintln!("zklock: {e}");
                return Err(exit::UNAVAILABLE);
            }
            // Another kind of lock holds the path: ours would not exclude it.
            Event::Failed(e) if not_allowed(&e) || matches!(e, Error::OtherLockKind { .. }) => {
                eprintln!("zklock: cannot acquire {}: {e}", args.path);
                close(&client);
                return Err(exit::UNAVAILABLE);
            }
            Event::Failed(e) => {
                eprintln!("zklock: cannot acquire {}: {e}", args.path);
                close(&client);
                return Err(exit::LOCK_ERROR);
            }
            Event::Signal(_)
            | Event::Cancelled
            | Event::Lost(_)
            | Event::Expiring(..)
            | Event::Released => {}
        }
    };
    log::info!("acquired {} as {}", args.path, node.path());
    Ok(Held {
        client,
        node,
        loss_tx,
        release_tx,
    })
}

/// Cancels the worker's wait and waits for it to end (its node deleted), at most a session
/// timeout, or until another stop signal: zklock then exits anyway, and closing its session
/// deletes whatever is left (also a lock granted just before the cancel).
fn withdraw(
    cancel: &CancelToken,
    events: &Receiver<Event>,
    client: &mut Option<Arc<NativeClient>>,
    args: &RunArgs,
) {
    cancel.cancel();
    let until = Instant::now().checked_add(args.session_timeout);
    loop {
        let left = until.map_or(args.session_timeout, |u| {
            u.saturating_duration_since(Instant::now())
        });
        match events.recv_timeout(left) {
            Ok(Event::Cancelled) => {
                log::info!("withdrew from the queue of {}", args.path);
                return;
            }
            Ok(Event::Acquired(_) | Event::TimedOut | Event::Failed(_)) => return,
            Ok(Event::Signal(signo)) if signals::is_stop(signo) => return,
            // Connected just now: main closes this client on its way out.
            Ok(Event::Connected(c)) => *client = Some(c),
            Ok(_) => {}
            Err(_) => {
                log::warn!("the wait for {} did not end in time", args.path);
                return;
            }
        }
    }
}

/// What the worker is to take.
struct Request {
    /// Cancels the wait (main, on a stop signal).
    cancel: CancelToken,
    security: Security,
    hosts: String,
    session_timeout: Duration,
    /// `--tick-time`: the ensemble's `tickTime`, when stated.
    tick_time: Option<Duration>,
    connect_timeout: Option<Duration>,
    kind: Kind,
    path: String,
    timeout: Option<Duration>,
    /// `--elect --id`: the mutex node's data (a LeaderSelector's participant id).
    id: Option<String>,
}

/// The worker: connects, acquires, reports, and releases when told to (on the same thread,
/// as a reentrant mutex requires). Main may stop listening at any point (it then exits).
fn hold(request: &Request, events: &Sender<Event>, release: &Receiver<()>) {
    let connected = connect(
        &request.hosts,
        request.session_timeout,
        request.tick_time,
        request.connect_timeout,
        &request.security,
    );
    let client = match connected {
        Ok(c) => c,
        Err(e) => {
            let _ = events.send(Event::Failed(e));
            return;
        }
    };
    let _ = events.send(Event::Connected(client.clone()));
    let shared: SharedClient = client;
    let path = request.path.as_str();
    let mut how = Acquire::new().cancel(&request.cancel);
    if let Some(t) = request.timeout {
        how = how.timeout(t);
    }
    let result = match request.kind {
        Kind::Mutex => InterProcessMutex::new(shared, path).and_then(|m| {
            let m = match &request.id {
                Some(id) => m.with_data(id.as_bytes()),
                None => m,
            };
            hold_lock(&m, &how, events, release)
        }),
        Kind::Read => InterProcessReadWriteLock::new(shared, path)
            .and_then(|rw| hold_lock(rw.read_lock(), &how, events, release)),
        Kind::Write => InterProcessReadWriteLock::new(shared, path)
            .and_then(|rw| hold_lock(rw.write_lock(), &how, events, release)),
        Kind::Semaphore(max) => InterProcessSemaphoreV2::new(shared, path, max)
            .and_then(|s| hold_lease(&s, &how, events, release)),
    };
    match result {
        Ok(()) => {}
        Err(Error::Cancelled { .. }) => {
            let _ = events.send(Event::Cancelled);
        }
        Err(e) => {
            let _ = events.send(Event::Failed(e));
        }
    }
}

fn hold_lock<L: InterProcessLock>(
    lock: &L,
    how: &Acquire,
    events: &Sender<Event>,
    release: &Receiver<()>,
) -> Result<(), Error> {
    let acquired = lock.try_acquire_with(how)?;
    if !acquired {
        let _ = events.send(Event::TimedOut);
        return Ok(());
    }
    let Some(node) = lock.held_nodes().into_iter().next() else {
        return Err(Error::NotAcquired {
            path: "(the lock)".into(),
        });
    };
    let _ = events.send(Event::Acquired(node));
    // Main says when (or drops the sender when it exits without releasing).
    if release.recv().is_ok() {
        if let Err(e) = lock.release() {
            log::warn!("releasing the lock: {e}");
        }
        let _ = events.send(Event::Released);
    }
    Ok(())
}

fn hold_lease(
    semaphore: &InterProcessSemaphoreV2,
    how: &Acquire,
    events: &Sender<Event>,
    release: &Receiver<()>,
) -> Result<(), Error> {
    let lease = semaphore.acquire_with(how)?;
    let Some(lease) = lease else {
        let _ = events.send(Event::TimedOut);
        return Ok(());
    };
    let _ = events.send(Event::Acquired(lease.held_node().clone()));
    if release.recv().is_ok() {
        if let Err(e) = lease.close() {
            log::warn!("returning the lease: {e}");
        }
        let _ = events.send(Event::Released);
    } else {
        std::mem::forget(lease);
    }
    Ok(())
}
