//! The fault thread's composite faults: the fencing probe, the expiry during a downgrade,
//! the count blip, and waiting for the server to settle.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::checks::FencedStore;
use super::config::{Env, FaultKind, Recipe, SEMAPHORE_MAX};
use super::timeline::FaultRecord;
use super::workers::{DowngradeRequest, Run};
use zk_locks::locks::{standard_sort_key, InterProcessReadWriteLock, Revoker, LOCK_NAME};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

/// The fencing probe's lock path.
pub(super) fn probe_path(root: &str) -> String {
    format!("{root}/fence-probe")
}

/// What the fencing probes saw.
#[derive(Default)]
pub(super) struct Probe {
    pub(super) store: FencedStore,
    pub(super) runs: Mutex<u64>,
    pub(super) refused: Mutex<u64>,
    pub(super) not_lost: Mutex<u64>,
}

/// A freeze with a fencing probe around it: the victim session holds `<root>/fence-probe` and
/// writes; its links freeze past the session timeout (a long GC pause, as far as the server
/// can tell); another session takes the lock and writes; then the victim, "waking up", writes
/// with its old token without looking at its guard — the store must refuse it, and the guard
/// must say `Lost`. Without the probe lock (contention, faults), it is a plain freeze.
pub(super) fn fence_probe(
    env: &dyn Env,
    clients: &[SharedClient],
    run: &Run,
    victim: usize,
    probe: &Probe,
) -> Result<(), String> {
    let config = &run.config;
    let path = probe_path(&config.root);
    let holder =
        InterProcessMutex::new(clients[victim].clone(), &path).map_err(|e| e.to_string())?;
    let guard = holder.try_lock_for(config.acquire_timeout).ok().flatten();
    let held = guard.as_ref().map(|_| run.hold(victim));
    let old = guard.as_ref().and_then(|g| g.fencing_token().ok());
    if let Some(old) = old {
        probe.store.acquired(old);
        let _ = probe.store.write(old);
    }
    inject(env, run, FaultKind::Freeze, victim)?;
    let (Some(guard), Some(old)) = (guard, old) else {
        return Ok(());
    };
    let successor_client = clients[(victim + 1) % clients.len()].clone();
    let successor = InterProcessMutex::new(successor_client, &path).map_err(|e| e.to_string())?;
    let timeout = config.acquire_timeout + env.session_timeout() * 2;
    if let Ok(Some(g)) = successor.try_lock_for(timeout) {
        if let Ok(new) = g.fencing_token() {
            probe.store.acquired(new);
            let _ = probe.store.write(new);
            *probe.runs.lock() += 1;
            if probe.store.write(old).is_err() {
                *probe.refused.lock() += 1;
            }
            if guard.state() != zk_locks::LockState::Lost {
                *probe.not_lost.lock() += 1;
            }
        }
    }
    drop(guard);
    drop(held);
    Ok(())
}

/// Injects `kind` on `victim` (every session for a server fault), records it in the run's
/// log, and counts it in `holder_hits` when the session it struck held a lock or lease as it
/// began (any session, for a server fault).
pub(super) fn inject(
    env: &dyn Env,
    run: &Run,
    kind: FaultKind,
    victim: usize,
) -> Result<(), String> {
    let struck = (!kind.strikes_all()).then_some(victim);
    let held = run.holding(struck);
    let log = &run.log;
    let result = log.record(kind, struck, kind.expires_unannounced(), || {
        env.inject(kind, victim, log)
    });
    if result.is_ok() && held {
        *run.tally.lock().holder_hits.entry(kind).or_default() += 1;
    }
    result
}

/// The semaphore's maximum.
pub(super) fn count_path(root: &str) -> String {
    format!("{root}/sem-max")
}

/// Ends the victim's session while its read/write worker holds the write lock and is about
/// to downgrade (`kind`: an expiry, or a move to a new session that the client reports only
/// afterwards); the worker then asks for the read lock, which must not be granted as a
/// downgrade of the lost write lock (the checker sees a reader beside the next writer).
///
/// To make the check sharp, the fault thread then takes the write lock through another session
/// and holds it while the victim asks for the read lock: a read granted meanwhile is a
/// violation, whatever the other workers do.
pub(super) fn expire_during_downgrade(
    env: &dyn Env,
    clients: &[SharedClient],
    run: &Run,
    victim: usize,
    kind: FaultKind,
) -> Result<(), String> {
    let start = Instant::now();
    let result = end_session_at_downgrade(env, clients, run, victim, kind);
    if kind == FaultKind::DowngradeSilentSession {
        env.report_session_change(victim);
        run.log.push(FaultRecord {
            kind,
            victim: Some(victim),
            start,
            end: Instant::now(),
            unannounced_expiry: true,
        });
    }
    result
}

fn end_session_at_downgrade(
    env: &dyn Env,
    clients: &[SharedClient],
    run: &Run,
    victim: usize,
    kind: FaultKind,
) -> Result<(), String> {
    let (reached_tx, reached) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel();
    let (read_tx, read) = mpsc::channel();
    *run.downgrade.lock() = Some(DowngradeRequest {
        worker: victim,
        reached: reached_tx,
        resume: resume_rx,
        read: read_tx,
    });
    let patience = run.config.acquire_timeout * 4 + env.session_timeout() * 4;
    if reached.recv_timeout(patience).is_err() {
        run.downgrade.lock().take();
        return Err("the read/write worker never reached a downgrade".into());
    }
    inject(env, run, kind, victim)?;
    let path = Recipe::ReadWrite.path(&run.config.root);
    let other = clients[(victim + 1) % clients.len()].clone();
    let rw = InterProcessReadWriteLock::new(other, &path).map_err(|e| e.to_string())?;
    let write = rw
        .write_lock()
        .try_lock_for(run.config.acquire_timeout)
        .map_err(|e| e.to_string())?;
    drop(resume); // the victim asks for the read lock now
    let Some(write) = write else { return Ok(()) };
    // A wrongly granted read comes at once; a correct one waits behind our write lock, which
    // is released after this pause (a slow wrong grant then goes unseen, never the reverse).
    let early = read.recv_timeout(env.session_timeout() / 4);
    if matches!(early, Ok(true)) && write.is_valid() {
        let mut tally = run.tally.lock();
        tally.downgrade_violations += 1;
    }
    drop(write);
    let _ = read.recv_timeout(run.config.acquire_timeout * 2);
    Ok(())
}

/// Cuts the victim's connections (its watches go), then changes the semaphore's maximum from
/// another session; the victim's `SharedCount` must show the new value within the patience.
pub(super) fn count_blip(env: &dyn Env, run: &Run, victim: usize) -> Result<(), String> {
    inject(env, run, FaultKind::CountBlip, victim)?;
    let counts = run.counts.lock().clone();
    let watcher = counts
        .get(&victim)
        .ok_or("no semaphore worker on the victim")?;
    let setter = counts
        .iter()
        .find(|(w, _)| **w != victim)
        .map(|(_, c)| c)
        .ok_or("no other semaphore worker")?;
    let max = SEMAPHORE_MAX as i32;
    let next = if setter.get_count() == max {
        max - 1
    } else {
        max
    };
    setter.set_count(next).map_err(|e| e.to_string())?;
    let patience = env.session_timeout() * 4;
    if settle(patience, || usize::from(watcher.get_count() != next)) != 0 {
        run.tally.lock().stale_counts += 1;
    }
    Ok(())
}

/// Polls `count` until it is 0 or `patience` passes; returns the last count.
pub(super) fn settle(patience: Duration, mut count: impl FnMut() -> usize) -> usize {
    let deadline = Instant::now() + patience;
    loop {
        let n = count();
        if n == 0 || Instant::now() >= deadline {
            return n;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Asks the mutex's holder to release (Curator's `__REVOKE__`), from session `client`: one
/// request per fault, so revocations meet every fault's reconnects. A request whose outcome is
/// unknown may have been applied, so it counts as made.
pub(super) fn revoke_mutex_holder(client: &SharedClient, run: &Run) {
    if !run.config.recipes.contains(&Recipe::Mutex) {
        return;
    }
    let dir = Recipe::Mutex.path(&run.config.root);
    let Ok(mut children) = client.get_children(&dir, None) else {
        return;
    };
    children.sort_by(|a, b| standard_sort_key(a, LOCK_NAME).cmp(standard_sort_key(b, LOCK_NAME)));
    let Some(holder) = children.first() else {
        return;
    };
    match Revoker::attempt_revoke(client, &format!("{dir}/{holder}")) {
        Ok(()) => {}
        Err(e) if e.is_retryable() => {}
        Err(_) => return,
    }
    run.revocations.requests.fetch_add(1, Ordering::SeqCst);
}
