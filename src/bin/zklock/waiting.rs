//! Acquiring the lock: a worker thread connects, takes the lock and later releases it (a mutex
//! and the read/write sides are released by the thread that took them), while the main thread
//! waits for it, honours `--timeout` and withdraws from the queue on SIGINT/SIGTERM/SIGHUP.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
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

// ---------------------------------------------------------------------------------------------
// Signals

/// The last SIGINT/SIGTERM/SIGHUP received (0: none). The handler only stores it: the main
/// loop polls it, because nothing else is async-signal-safe.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signo: libc::c_int) {
    SIGNAL.store(signo, Ordering::SeqCst);
}

fn install_signal_handlers() {
    for signo in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is valid; the handler only does an atomic store, which
        // is async-signal-safe; SA_RESTART keeps other threads' system calls going.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signo, &action, std::ptr::null_mut()) != 0 {
                log::warn!("cannot install a handler for signal {signo}");
            }
        }
    }
}

pub(crate) fn take_signal() -> Option<i32> {
    match SIGNAL.swap(0, Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

// ---------------------------------------------------------------------------------------------
// Waiting for the lock

/// How often the main loop looks at the signal flag and the child.
pub(crate) const TICK: Duration = Duration::from_millis(10);

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
    install_signal_handlers();
    let (events_tx, events) = mpsc::channel();
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
        if let Some(signo) = take_signal() {
            // Closing the session deletes our node at once, so the queue moves on.
            eprintln!(
                "zklock: interrupted by signal {signo} while waiting for {}",
                args.path
            );
            if let Some(c) = &client {
                zk_locks::ZkClient::close(c.as_ref());
            }
            return Err(exit::SIGNAL_BASE + signo);
        }
        match events.recv_timeout(TICK) {
            Ok(Event::Connected(c)) => client = Some(c),
            Ok(Event::Acquired(node)) => break node,
            Ok(Event::TimedOut) => {
                eprintln!(
                    "zklock: timed out after {:?} waiting for {}",
                    args.timeout.unwrap_or_default(),
                    args.path
                );
                close(&client);
                return Err(exit::TIMED_OUT);
            }
            Ok(Event::Failed(e @ Error::Connect { .. })) => {
                eprintln!("zklock: {e}");
                return Err(exit::UNAVAILABLE);
            }
            Ok(Event::Failed(e)) if not_allowed(&e) => {
                eprintln!("zklock: cannot acquire {}: {e}", args.path);
                close(&client);
                return Err(exit::UNAVAILABLE);
            }
            Ok(Event::Failed(e)) => {
                eprintln!("zklock: cannot acquire {}: {e}", args.path);
                close(&client);
                return Err(exit::LOCK_ERROR);
            }
            Ok(Event::Lost | Event::Released) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                eprintln!("zklock: the lock thread ended unexpectedly");
                close(&client);
                return Err(exit::LOCK_ERROR);
            }
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
