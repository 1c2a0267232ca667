//! zk-locks' async acquire: every waiter is a tokio task awaiting
//! `Arc<InterProcessMutex>::lock_owned_async()` (no `spawn_blocking` anywhere on this side),
//! on `NativeClient` sessions. A queued waiter is given up by dropping its future (aborting
//! the task), a waiter mid-create by `tokio::time::timeout` around it; a guard is released by
//! dropping it (its delete sent, not awaited), in the waiter's task. The holders take their
//! locks with the same future and drop their guards from tasks of their own.

use std::sync::Arc;
use std::time::Duration;

use zk_locks::{InterProcessLock, InterProcessMutex, OwnedLockGuard, SharedClient, ZkClient};

use super::ours::connect_sessions;
use super::side::{How, Outcome, Side, Tally, Waiter};

/// Our async side: a holder session, the waiters' sessions, the holders' guards.
#[derive(Default)]
pub(super) struct OursAsync {
    holder: Option<SharedClient>,
    sessions: Vec<SharedClient>,
    held: Vec<OwnedLockGuard<InterProcessMutex>>,
}

impl Side for OursAsync {
    fn name(&self) -> &'static str {
        "zk-locks async (lock_owned_async tasks)"
    }

    async fn open(
        &mut self,
        holder: &str,
        waiters: &str,
        sessions: usize,
        timeout: Duration,
    ) -> Result<(), String> {
        // The same client's sessions as on the blocking side.
        (self.holder, self.sessions) = connect_sessions(holder, waiters, sessions, timeout)?;
        Ok(())
    }

    async fn hold(&mut self, dirs: &[String]) -> Result<(), String> {
        let holder = self.holder.clone().ok_or("no holder session")?;
        for dir in dirs {
            let mutex = InterProcessMutex::new(holder.clone(), dir).map_err(|e| e.to_string())?;
            let guard = Arc::new(mutex)
                .lock_owned_async()
                .await
                .map_err(|e| format!("holding {dir}: {e}"))?;
            self.held.push(guard);
        }
        Ok(())
    }

    async fn release(&mut self) -> Result<(), String> {
        // Each guard dropped in a task of its own: its delete is sent, not awaited.
        for guard in self.held.drain(..) {
            tokio::spawn(async move { drop(guard) });
        }
        Ok(())
    }

    fn start(&self, dir: &str, session: usize, how: How, tally: &Arc<Tally>) -> Waiter {
        let client = self.sessions[session % self.sessions.len()].clone();
        let (path, tally) = (dir.to_string(), tally.clone());
        let handle = tokio::spawn(async move {
            // The waiter's own mutex object: its cost is the waiter's.
            let mutex = match InterProcessMutex::new(client, &path) {
                Ok(m) => Arc::new(m),
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            let acquired = match &how {
                &How::CancelAfter(delay) => {
                    match tokio::time::timeout(delay, mutex.lock_owned_async()).await {
                        Ok(result) => result,
                        // The future is dropped here, wherever it was: that is the cancel.
                        Err(_) => return Outcome::Cancelled,
                    }
                }
                How::Keep | How::Cancellable | How::Hold(_) => mutex.lock_owned_async().await,
            };
            Outcome::of(acquired, &how, &tally).await
        });
        let abort = handle.abort_handle();
        Waiter::new(Box::new(move || abort.abort()), handle)
    }

    async fn close(&mut self) {
        self.held.clear();
        for client in self.sessions.drain(..).chain(self.holder.take()) {
            client.close();
        }
    }
}
