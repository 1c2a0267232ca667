//! Conversions between the crate's types and this library's: errors, stats, modes, paths,
//! watchers.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use ::zookeeper as zk;
use parking_lot::Mutex;

use crate::client::{CreateMode, EventType, Stat, WatchedEvent, Watcher, ZkError, ZkResult};

pub(super) fn from_server(chroot: Option<&str>, path: &str) -> String {
    match chroot {
        None => path.to_string(),
        Some(chroot) => match path.strip_prefix(chroot) {
            Some("") => "/".to_string(),
            Some(rest) if rest.starts_with('/') => rest.to_string(),
            _ => path.to_string(),
        },
    }
}

pub(super) fn map_error(e: zk::ZkError) -> ZkError {
    use zk::ZkError as C;
    match e {
        C::NoNode => ZkError::NoNode,
        C::NodeExists => ZkError::NodeExists,
        C::NotEmpty => ZkError::NotEmpty,
        C::BadVersion => ZkError::BadVersion,
        C::NoChildrenForEphemerals => ZkError::NoChildrenForEphemerals,
        C::BadArguments => ZkError::BadArguments,
        C::ConnectionLoss => ZkError::ConnectionLoss,
        C::SessionExpired => ZkError::SessionExpired,
        C::OperationTimeout => ZkError::OperationTimeout,
        C::NoAuth => ZkError::NoAuth,
        C::AuthFailed => ZkError::AuthFailed,
        C::InvalidACL => ZkError::InvalidAcl,
        C::SessionMoved => ZkError::SessionMoved,
        C::NotReadOnly => ZkError::NotReadOnly,
        C::MarshallingError => ZkError::MarshallingError,
        // Codes the crate does not know decode as Unimplemented (throttling, request timeout,
        // quota...): the outcome is unknown, so it stays retryable.
        C::Unimplemented => ZkError::Unimplemented,
        C::APIError
        | C::DataInconsistency
        | C::EphemeralOnLocalSession
        | C::InvalidCallback
        | C::NoWatcher
        | C::RuntimeInconsistency
        | C::SystemError => ZkError::SystemError,
    }
}

pub(super) fn map_stat(s: &zk::Stat) -> Stat {
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        ctime: s.ctime,
        mtime: s.mtime,
        version: s.version,
        cversion: s.cversion,
        aversion: s.aversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
        pzxid: s.pzxid,
    }
}

pub(super) fn map_mode(mode: CreateMode) -> zk::CreateMode {
    match mode {
        CreateMode::Persistent => zk::CreateMode::Persistent,
        CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
        // Deliberate: the crate's Container creates a persistent node anyway (measured:
        // ephemeral_owner 0, never reaped). Saying Persistent makes that explicit; recipes
        // that want their parents reaped must delete them themselves.
        CreateMode::Container => zk::CreateMode::Persistent,
    }
}

/// A one-shot watcher as the crate wants it (`Fn`, called on its event thread), plus the
/// handle to disarm it. Panics are caught: a panicking watcher kills the crate's event thread
/// and, with it, the client.
pub(super) type WatchSlot = Arc<Mutex<Option<Watcher>>>;

pub(super) fn crate_watcher(
    watcher: Watcher,
    chroot: Option<String>,
) -> (impl Fn(zk::WatchedEvent) + Send, WatchSlot) {
    let slot: WatchSlot = Arc::new(Mutex::new(Some(watcher)));
    let fire_slot = slot.clone();
    let fire = move |event: zk::WatchedEvent| {
        let event_type = match event.event_type {
            zk::WatchedEventType::NodeCreated => EventType::NodeCreated,
            zk::WatchedEventType::NodeDeleted => EventType::NodeDeleted,
            zk::WatchedEventType::NodeDataChanged => EventType::NodeDataChanged,
            zk::WatchedEventType::NodeChildrenChanged => EventType::NodeChildrenChanged,
            _ => return,
        };
        let Some(watcher) = fire_slot.lock().take() else {
            return;
        };
        let path = from_server(chroot.as_deref(), event.path.as_deref().unwrap_or("/"));
        let delivered = catch_unwind(AssertUnwindSafe(move || {
            watcher(WatchedEvent { event_type, path })
        }));
        if delivered.is_err() {
            log::error!("a watcher panicked; ignored");
        }
    };
    (fire, slot)
}

pub(super) fn check_path(path: &str) -> ZkResult<()> {
    crate::paths::validate_path(path).map_err(|_| ZkError::BadArguments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_paths_through_the_chroot() {
        assert_eq!(from_server(Some("/app"), "/app"), "/");
        assert_eq!(from_server(Some("/app"), "/app/x"), "/x");
        assert_eq!(from_server(None, "/x"), "/x");
    }

    #[test]
    fn unknown_codes_are_retryable() {
        assert!(map_error(zk::ZkError::Unimplemented).is_retryable());
        assert!(map_error(zk::ZkError::ConnectionLoss).is_retryable());
        assert!(!map_error(zk::ZkError::NoNode).is_retryable());
    }
}
