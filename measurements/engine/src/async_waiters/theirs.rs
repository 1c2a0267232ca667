//! `zookeeper-client` 0.11 (crates.io, the `tokio` feature): an async ZooKeeper client with a
//! Curator-compatible lock, used as its README shows: `Client::lock(LockPrefix::new_curator(dir,
//! "lock-"), b"", LockOptions::new(Acls::anyone_all()).with_ancestor_options(Persistent))`,
//! the returned `LockClient` released by dropping it (a background delete). Every waiter is a
//! tokio task; a queued waiter is given up by dropping its lock future (aborting the task), a
//! waiter mid-create by `tokio::time::timeout` around the lock future, as the crate's docs
//! suggest ("a timed lock is easy to construct with `select!` and `sleep`"). A holding waiter
//! waits for its gate in its task, then drops its lock there.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use super::side::{How, Outcome, Side, Tally, Waiter};

/// Their side: a holder session, the waiters' sessions, the holders' locks.
#[derive(Default)]
pub(super) struct Theirs {
    holder: Option<zk::Client>,
    sessions: Vec<zk::Client>,
    held: Vec<zk::OwnedLockClient>,
}

async fn connect(connect: &str, timeout: Duration) -> Result<zk::Client, String> {
    zk::Client::connector()
        .with_session_timeout(timeout)
        .connect(connect)
        .await
        .map_err(|e| format!("zookeeper-client connecting to {connect}: {e}"))
}

/// Takes the lock at `dir` on `client`, making the directory (persistent) if missing.
async fn lock<'a>(client: &'a zk::Client, dir: &str) -> Result<zk::LockClient<'a>, zk::Error> {
    let prefix = zk::LockPrefix::new_curator(dir, "lock-")?;
    let options = zk::LockOptions::new(zk::Acls::anyone_all())
        .with_ancestor_options(zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))?;
    client.lock(prefix, b"", options).await
}

impl Side for Theirs {
    fn name(&self) -> &'static str {
        "zookeeper-client 0.11 (tokio tasks)"
    }

    async fn open(
        &mut self,
        holder: &str,
        waiters: &str,
        sessions: usize,
        timeout: Duration,
    ) -> Result<(), String> {
        self.holder = Some(connect(holder, timeout).await?);
        for _ in 0..sessions {
            self.sessions.push(connect(waiters, timeout).await?);
        }
        Ok(())
    }

    async fn hold(&mut self, dirs: &[String]) -> Result<(), String> {
        let holder = self.holder.as_ref().ok_or("no holder session")?;
        for dir in dirs {
            let held = lock(holder, dir)
                .await
                .map_err(|e| format!("holding {dir}: {e}"))?;
            self.held.push(held.into_owned());
        }
        Ok(())
    }

    async fn release(&mut self) -> Result<(), String> {
        // Dropping a lock deletes its node in the background.
        self.held.clear();
        Ok(())
    }

    fn start(&self, dir: &str, session: usize, how: How, tally: &Arc<Tally>) -> Waiter {
        let client = self.sessions[session % self.sessions.len()].clone();
        let (dir, tally) = (dir.to_string(), tally.clone());
        let handle = tokio::spawn(async move {
            let acquired = match &how {
                &How::CancelAfter(delay) => {
                    match tokio::time::timeout(delay, lock(&client, &dir)).await {
                        Ok(result) => result,
                        // The lock future is dropped here, wherever it was.
                        Err(_) => return Outcome::Cancelled,
                    }
                }
                How::Keep | How::Cancellable | How::Hold(_) => lock(&client, &dir).await,
            };
            Outcome::of(acquired, &how, &tally).await
        });
        let abort = handle.abort_handle();
        Waiter::new(Box::new(move || abort.abort()), handle)
    }

    async fn close(&mut self) {
        self.held.clear();
        // A client's session closes once its last handle is dropped.
        self.sessions.clear();
        self.holder = None;
    }
}
