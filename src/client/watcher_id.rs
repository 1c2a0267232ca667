//! Naming a watcher so that it can be removed unfired ([`ZkClient::remove_watcher`]).
//!
//! A [`Watcher`](super::Watcher) is a boxed one-shot callback with no identity of its own.
//! A caller that may stop caring before it fires (a lock waiter that timed out, was
//! cancelled or closed) names it: the read that registers it runs inside [`registering_as`],
//! and the backend records the name with the callback when it registers it. The rule kept:
//! **a name is never reused** (one process-wide counter), so removing by name can never
//! remove another waiter's watcher, whatever fired or was freed in between.
//!
//! [`ZkClient::remove_watcher`]: super::ZkClient::remove_watcher

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The name of one watcher, unique in the process (see [`registering_as`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WatcherId(u64);

static NEXT: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The name of the watcher being registered on this thread, inside `registering_as`.
    static REGISTERING: Cell<Option<WatcherId>> = const { Cell::new(None) };
}

impl WatcherId {
    /// A name no other watcher of this process has.
    pub fn new() -> WatcherId {
        WatcherId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for WatcherId {
    fn default() -> Self {
        WatcherId::new()
    }
}

/// Runs `register` (a `get_data` or `get_children` with a watcher, on this thread) so that
/// the watcher it registers is named `id`, for [`ZkClient::remove_watcher`]. Backends that
/// cannot remove a watcher ignore the name.
///
/// [`ZkClient::remove_watcher`]: super::ZkClient::remove_watcher
pub fn registering_as<T>(id: WatcherId, register: impl FnOnce() -> T) -> T {
    struct Reset(Option<WatcherId>);
    impl Drop for Reset {
        fn drop(&mut self) {
            REGISTERING.with(|r| r.set(self.0));
        }
    }
    let _reset = Reset(REGISTERING.with(|r| r.replace(Some(id))));
    register()
}

/// The name of the watcher being registered on this thread (backends read it when a read
/// with a watcher is made).
pub(crate) fn registering() -> Option<WatcherId> {
    REGISTERING.with(|r| r.get())
}
