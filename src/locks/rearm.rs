//! Work re-run after every reconnect. Watches do not survive a reconnect on the `zookeeper`
//! crate (and none survive a new session), so whatever must keep a watch armed — a
//! revocation watch, a [`super::SharedCount`] — arms it again from here. Where the backend
//! restores watches (`ZkClient::restores_watches`) the restored one is still armed: a task
//! that arms unconditionally doubles it (two notifications per change after one reconnect).

use std::sync::Arc;
use std::thread;

use crate::client::SharedClient;
use crate::session::{ListenerId, SessionSnapshot};

/// The task an [`OnReconnect`] runs.
pub(crate) type Task = Arc<dyn Fn() + Send + Sync>;

/// Runs a task on a fresh thread after every transition to a connected state (a reconnect of
/// the same session or a new session), until dropped.
pub(crate) struct OnReconnect {
    client: SharedClient,
    listener_id: ListenerId,
}

impl OnReconnect {
    /// Starts running `task` (on a thread named `name`) after each reconnect. It is not run
    /// now: the caller arms its watch itself.
    pub(crate) fn start(client: SharedClient, name: &'static str, task: Task) -> OnReconnect {
        let listener_id = client.session().subscribe(move |s: &SessionSnapshot| {
            if s.state.is_connected() {
                // Session listeners must not call the client: the task runs on its own thread.
                let task = task.clone();
                spawn(name, move || task());
            }
        });
        OnReconnect {
            client,
            listener_id,
        }
    }
}

impl Drop for OnReconnect {
    fn drop(&mut self) {
        self.client.session().unsubscribe(self.listener_id);
    }
}

impl std::fmt::Debug for OnReconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnReconnect")
    }
}

/// Runs `f` on a new thread named `name`; a failure to start one is logged (there is nobody
/// to return it to: the callers are watch and session callbacks).
pub(crate) fn spawn(name: &'static str, f: impl FnOnce() + Send + 'static) {
    if let Err(e) = thread::Builder::new().name(name.into()).spawn(f) {
        log::error!("cannot start thread {name}: {e}");
    }
}
