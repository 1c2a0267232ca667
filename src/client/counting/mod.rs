//! Request counting: how many ZooKeeper calls a recipe makes, by operation.
//!
//! Lock recipes are judged by their load on the ensemble (Curator's herd-effect fix is about
//! exactly that), so tests and benches need a cheap way to count requests. The in-memory
//! backend counts natively ([`Counters`]); with the `testing` feature, `CountingClient` wraps
//! any [`ZkClient`](super::ZkClient) (including `Arc<dyn ZkClient>`) and counts with the same type.
//!
//! ```
//! # #[cfg(feature = "testing")] {
//! use zk_locks::client::counting::CountingClient;
//! use zk_locks::client::memory::MemoryEnsemble;
//! use zk_locks::{CreateMode, ZkClient};
//!
//! let client = CountingClient::new(MemoryEnsemble::new().connect());
//! client.create("/a", b"", CreateMode::Persistent)?;
//! client.exists("/a")?;
//! let counters = client.counters();
//! assert_eq!((counters.create, counters.exists, counters.requests()), (1, 1, 2));
//! # }
//! # Ok::<(), zk_locks::ZkError>(())
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

// A test hook (requests counted by wrapping a client): in test builds only.
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
mod client;
#[cfg(feature = "testing")]
pub use client::CountingClient;

/// A [`ZkClient`](super::ZkClient) operation, for counters, fault injection and request hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// [`ZkClient::create`](super::ZkClient::create).
    Create,
    /// [`ZkClient::delete`](super::ZkClient::delete).
    Delete,
    /// [`ZkClient::exists`](super::ZkClient::exists).
    Exists,
    /// [`ZkClient::get_data`](super::ZkClient::get_data).
    GetData,
    /// [`ZkClient::get_children`](super::ZkClient::get_children).
    GetChildren,
    /// [`ZkClient::set_data`](super::ZkClient::set_data).
    SetData,
    /// [`ZkClient::multi`](super::ZkClient::multi) (one request, whatever it holds).
    Multi,
}

/// Requests made by one client, by operation (failed requests included), plus the watch
/// callbacks delivered to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// `create` calls.
    pub create: u64,
    /// `delete` calls.
    pub delete: u64,
    /// `exists` calls.
    pub exists: u64,
    /// `get_data` calls.
    pub get_data: u64,
    /// `get_children` calls.
    pub get_children: u64,
    /// `set_data` calls.
    pub set_data: u64,
    /// `multi` calls (one request each, whatever they hold).
    pub multi: u64,
    /// Watch callbacks delivered (not a request).
    pub watch_events: u64,
    /// Times the caller waited for the server: one per request, one per
    /// [`ZkClient::pipeline`](super::ZkClient::pipeline) call through a `CountingClient` (whatever the backend does
    /// with it), none for [`ZkClient::delete_unawaited`](super::ZkClient::delete_unawaited), so a recipe's round trips can be
    /// asserted.
    pub round_trips: u64,
}

impl Counters {
    /// All requests (every operation, not the watch events): the load put on the ensemble.
    pub fn requests(&self) -> u64 {
        self.create
            + self.delete
            + self.exists
            + self.get_data
            + self.get_children
            + self.set_data
            + self.multi
    }

    /// The count of one operation.
    pub fn get(&self, op: Op) -> u64 {
        match op {
            Op::Create => self.create,
            Op::Delete => self.delete,
            Op::Exists => self.exists,
            Op::GetData => self.get_data,
            Op::GetChildren => self.get_children,
            Op::SetData => self.set_data,
            Op::Multi => self.multi,
        }
    }
}

/// Lock-free counters behind [`Counters`] snapshots (shared with event threads).
#[derive(Debug, Default)]
pub(crate) struct AtomicCounters {
    ops: [AtomicU64; 7],
    watch_events: AtomicU64,
    round_trips: AtomicU64,
}

impl AtomicCounters {
    fn index(op: Op) -> usize {
        match op {
            Op::Create => 0,
            Op::Delete => 1,
            Op::Exists => 2,
            Op::GetData => 3,
            Op::GetChildren => 4,
            Op::SetData => 5,
            Op::Multi => 6,
        }
    }

    /// One request in a round trip of its own.
    pub(crate) fn request(&self, op: Op) {
        self.ops[Self::index(op)].fetch_add(1, Ordering::Relaxed);
        self.round_trips.fetch_add(1, Ordering::Relaxed);
    }

    /// A request nobody waits for: counted, no round trip.
    #[cfg(feature = "testing")] // only CountingClient counts these
    pub(crate) fn unawaited(&self, op: Op) {
        self.ops[Self::index(op)].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests sent together: each is counted, the round trip once.
    #[cfg(feature = "testing")] // only CountingClient counts these
    pub(crate) fn pipelined(&self, ops: impl IntoIterator<Item = Op>) {
        for op in ops {
            self.ops[Self::index(op)].fetch_add(1, Ordering::Relaxed);
        }
        self.round_trips.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn watch_event(&self) {
        self.watch_events.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Counters {
        let op = |op| self.ops[Self::index(op)].load(Ordering::Relaxed);
        Counters {
            create: op(Op::Create),
            delete: op(Op::Delete),
            exists: op(Op::Exists),
            get_data: op(Op::GetData),
            get_children: op(Op::GetChildren),
            set_data: op(Op::SetData),
            multi: op(Op::Multi),
            watch_events: self.watch_events.load(Ordering::Relaxed),
            round_trips: self.round_trips.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn reset(&self) {
        for c in &self.ops {
            c.store(0, Ordering::Relaxed);
        }
        self.watch_events.store(0, Ordering::Relaxed);
        self.round_trips.store(0, Ordering::Relaxed);
    }
}
