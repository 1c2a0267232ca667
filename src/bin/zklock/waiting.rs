//! Acquiring the lock: a worker thread connects, takes the lock and later releases it (a mutex
//! and the read/write sides are released by the thread that took them), while the main thread
//! waits for its events, and withdraws from the queue on SIGINT/SIGTERM/SIGHUP (delivered as
//! events too, by [`crate::signals`]).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::native::NativeClient;
use zk_locks::locks::{
    HeldNode, InterProcessLock, InterProcessMutex, InterProcessReadWriteLock,
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
    Failed(Error),
    /// The watcher saw the lock lost.
    Lost,
    /// The worker released the lock (after main asked).
    Released,
    /// A signal zklock handles (see [`crate::signals`]).
    Signal(i32),
}

/// The lock, held by the worker thread, and the channels to that thread.
pub(crate) struct Held {
    pub(crate) client: Option<Arc<NativeClient>>,
    pub(crate) node: Arc<HeldNode>,
    /// What the worker (and the loss watcher) report.
    pub(crate) events: Receiver<Event>,
    /// For the watcher that reports a lost lock.
    pub(crate) loss_tx: Sender<Event>,
    /// Tells the worker to release.
    pub(crate) release_tx: Sender<()>,
}

/// Starts the worker and waits, interruptibly, until it holds the lock. `Err` is the exit
/// status when it does not (timed out, not connected, not allowed, interrupted).
pub(crate) fn acquire(args: &RunArgs) -> Result<Held, i32> {
    let (events_tx, events) = mpsc::channel();
    if let Err(e) = signals::deliver_to(events_tx.clone()) {
        eprintln!("zklock: cannot handle signals: {e}");
        return Err(exit::LOCK_ERROR);
    }
    let loss_tx = events_tx.clone();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let request = Request {
        security: args.security.clone(),
        hosts: args.connect.clone(),
        session_timeout: args.session_timeout,
        kind: args.kind,
        path: args.path.clone(),
        timeout: args.timeout,
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
                // Closing the session deletes our node at once, so the queue moves on.
                eprintln!(
                    "zklock: interrupted by signal {signo} while waiting for {}",
                    args.path
                );
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
            Event::Failed(e) if not_allowed(&e) => {
                eprintln!("zklock: cannot acquire {}: {e}", args.path);
                close(&client);
                return Err(exit::UNAVAILABLE);
            }
            Event::Failed(e) => {
                eprintln!("zklock: cannot acquire {}: {e}", args.path);
                close(&client);
                return Err(exit::LOCK_ERROR);
            }
            Event::Signal(_) | Event::Lost | Event::Released => {}
        }
    };
    log::info!("acquired {} as {}", args.path, node.path());
    Ok(Held {
        client,
        node,
        events,
        loss_tx,
        release_tx,
    })
}

/// What the worker is to take.
struct Request {
    security: Security,
    hosts: String,
    session_timeout: Duration,
    kind: Kind,
    path: String,
    timeout: Option<Duration>,
}

/// The worker: connects, acquires, reports, and releases when told to (on the same thread,
/// as a reentrant mutex requires). Main may stop listening at any point (it then exits).
fn hold(request: &Request, events: &Sender<Event>, release: &Receiver<()>) {
    let client = match connect(&request.hosts, request.session_timeout, &request.security) {
        Ok(c) => c,
        Err(e) => {
            let _ = events.send(Event::Failed(e));
            return;
        }
    };
    let _ = events.send(Event::Connected(client.clone()));
    let shared: SharedClient = client;
    let path = request.path.as_str();
    let result = match request.kind {
        Kind::Mutex => InterProcessMutex::new(shared, path)
            .and_then(|m| hold_lock(&m, request.timeout, events, release)),
        Kind::Read => InterProcessReadWriteLock::new(shared, path)
            .and_then(|rw| hold_lock(rw.read_lock(), request.timeout, events, release)),
        Kind::Write => InterProcessReadWriteLock::new(shared, path)
            .and_then(|rw| hold_lock(rw.write_lock(), request.timeout, events, release)),
        Kind::Semaphore(max) => InterProcessSemaphoreV2::new(shared, path, max)
            .and_then(|s| hold_lease(&s, request.timeout, events, release)),
    };
    if let Err(e) = result {
        let _ = events.send(Event::Failed(e));
    }
}

fn hold_lock<L: InterProcessLock>(
    lock: &L,
    timeout: Option<Duration>,
    events: &Sender<Event>,
    release: &Receiver<()>,
) -> Result<(), Error> {
    let acquired = match timeout {
        Some(t) => lock.acquire_timeout(t)?,
        None => lock.acquire().map(|()| true)?,
    };
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
    timeout: Option<Duration>,
    events: &Sender<Event>,
    release: &Receiver<()>,
) -> Result<(), Error> {
    let lease = match timeout {
        Some(t) => semaphore.acquire_timeout(t)?,
        None => Some(semaphore.acquire()?),
    };
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
