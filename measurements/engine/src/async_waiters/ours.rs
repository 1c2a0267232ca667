//! zk-locks' blocking API as an async service uses it today (docs/async.md): every acquire
//! is `tokio::task::spawn_blocking(move || mutex.try_lock_owned_with(&how))`, one blocking
//! pool thread per waiting acquire (the runtime's `max_blocking_threads` is raised above the
//! waiters, so none queues for a thread), on `NativeClient` sessions. A waiter is given up
//! with its `CancelToken`; a holding waiter waits for its gate on its blocking thread, then
//! releases there (`unlock`, the delete waited for).

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
use zk_locks::{
    Acquire, CancelToken, Error, InterProcessLock, InterProcessMutex, OwnedLockGuard, SharedClient,
    ZkClient,
};

use super::side::{How, Outcome, Side, Tally, Waiter};

/// Our side: a holder session, the waiters' sessions, the holders' guards.
#[derive(Default)]
pub(super) struct Ours {
    holder: Option<SharedClient>,
    sessions: Vec<SharedClient>,
    held: Vec<OwnedLockGuard<InterProcessMutex>>,
}

pub(super) fn connect(connect: &str, timeout: Duration) -> Result<SharedClient, String> {
    NativeClient::connect(connect, timeout)
        .map(|c| c as SharedClient)
        .map_err(|e| format!("connecting to {connect}: {e}"))
}

/// The holder's session at `holder` and `sessions` waiters' sessions at `waiters`: what both
/// of our sides open. Connecting blocks (the driver's thread, not a runtime worker).
pub(super) fn connect_sessions(
    holder: &str,
    waiters: &str,
    sessions: usize,
    timeout: Duration,
) -> Result<(Option<SharedClient>, Vec<SharedClient>), String> {
    let waiting = (0..sessions)
        .map(|_| connect(waiters, timeout))
        .collect::<Result<_, _>>()?;
    Ok((Some(connect(holder, timeout)?), waiting))
}

impl Side for Ours {
    fn name(&self) -> &'static str {
        "zk-locks blocking API (spawn_blocking)"
    }

    async fn open(
        &mut self,
        holder: &str,
        waiters: &str,
        sessions: usize,
        timeout: Duration,
    ) -> Result<(), String> {
        (self.holder, self.sessions) = connect_sessions(holder, waiters, sessions, timeout)?;
        Ok(())
    }

    async fn hold(&mut self, dirs: &[String]) -> Result<(), String> {
        let holder = self.holder.clone().ok_or("no holder session")?;
        for dir in dirs {
            let mutex = InterProcessMutex::new(holder.clone(), dir).map_err(|e| e.to_string())?;
            // Blocking on the driver's thread, which is not one of the runtime's workers.
            let guard = Arc::new(mutex)
                .lock_owned()
                .map_err(|e| format!("holding {dir}: {e}"))?;
            self.held.push(guard);
        }
        Ok(())
    }

    async fn release(&mut self) -> Result<(), String> {
        // Each release is a delete waited for: one blocking task each, so the holders let go
        // together as the async client's background deletes do.
        for guard in self.held.drain(..) {
            tokio::task::spawn_blocking(move || guard.unlock());
        }
        Ok(())
    }

    fn start(&self, dir: &str, session: usize, how: How, tally: &Arc<Tally>) -> Waiter {
        let client = self.sessions[session % self.sessions.len()].clone();
        let (path, tally) = (dir.to_string(), tally.clone());
        let token = CancelToken::new();
        let runtime = tokio::runtime::Handle::current();
        let (waiting, cancelling) = (token.clone(), token);
        let handle = tokio::task::spawn_blocking(move || {
            // The waiter's own mutex object: its cost is the waiter's.
            let mutex = match InterProcessMutex::new(client, &path) {
                Ok(m) => Arc::new(m),
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            if let How::CancelAfter(delay) = &how {
                let delay = *delay;
                let token = waiting.clone();
                runtime.spawn(async move {
                    tokio::time::sleep(delay).await;
                    token.cancel();
                });
            }
            match mutex.try_lock_owned_with(&Acquire::new().cancel(&waiting)) {
                Ok(Some(guard)) => {
                    tally.acquired();
                    let started = match &how {
                        How::Hold(gate) => {
                            gate.wait_blocking();
                            Some((gate, Instant::now()))
                        }
                        _ => None,
                    };
                    let unlocked = guard.unlock();
                    if let Some((gate, started)) = started {
                        gate.released(started.elapsed());
                    }
                    match unlocked {
                        Ok(()) => Outcome::Acquired,
                        Err(e) => Outcome::Failed(format!("release: {e}")),
                    }
                }
                Ok(None) | Err(Error::Cancelled { .. }) => Outcome::Cancelled,
                Err(e) => Outcome::Failed(e.to_string()),
            }
        });
        Waiter::new(Box::new(move || cancelling.cancel()), handle)
    }

    async fn close(&mut self) {
        self.held.clear();
        for client in self.sessions.drain(..).chain(self.holder.take()) {
            client.close();
        }
    }
}
