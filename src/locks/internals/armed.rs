//! The watcher a wait registered last, removed from its client when the wait ends without
//! it firing (`ZkClient::remove_watcher`): a wait that times out, is cancelled or closed
//! leaves no callback on the client until the watched node changes.
//!
//! The rule kept: **only this wait's own watcher is removed** — it is named by a
//! `WatcherId` no other watcher has, so a removal never takes another waiter's callback,
//! and removing one that fired already is a no-op.

use crate::client::{SharedClient, WatcherId};

/// The last watcher a wait registered on its client (none yet, or removed).
pub(crate) struct ArmedWatcher<'a> {
    client: &'a SharedClient,
    armed: Option<(String, WatcherId)>,
}

impl<'a> ArmedWatcher<'a> {
    pub(crate) fn new(client: &'a SharedClient) -> ArmedWatcher<'a> {
        ArmedWatcher {
            client,
            armed: None,
        }
    }

    /// Records the watcher `id` registered (or maybe registered: a failed read leaves none,
    /// and removing it is then a no-op) by a read of `path`.
    pub(crate) fn set(&mut self, path: &str, id: WatcherId) {
        self.armed = Some((path.to_string(), id));
    }

    /// Removes the recorded watcher from the client if it has not fired (no request).
    pub(crate) fn remove(&mut self) {
        if let Some((path, id)) = self.armed.take() {
            self.client.remove_watcher(&path, id);
        }
    }
}

impl Drop for ArmedWatcher<'_> {
    /// A wait that unwinds (a panic, an early return) leaves no callback either.
    fn drop(&mut self) {
        self.remove();
    }
}
