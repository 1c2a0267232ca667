//! # zk-locks
//!
//! Blocking ZooKeeper distributed locks for threaded Rust services, wire-compatible with
//! Apache Curator's lock recipes: the same lock paths, znode names and ordering, so a Rust
//! process and a JVM process running Curator can contend for one lock safely.
//!
//! Layers, bottom up:
//! - [`client`]: the [`client::ZkClient`] trait and its two backends (a real ensemble through
//!   the `zookeeper` crate, and an in-memory ensemble with fault injection);
//! - [`session`]: the connection-state machine (Connected, Suspended, Reconnected, Lost) and
//!   the connection epoch every waiter and holder observes;
//! - [`paths`], [`retry`], [`error`]: path rules, retry policies, typed errors;
//! - `testing` (feature `testing`): real ZooKeeper servers, clusters and a fault proxy for tests.

#![warn(missing_docs)]

pub mod client;
pub mod error;
pub mod locks;
pub mod paths;
pub mod retry;
pub mod session;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{CreateMode, SharedClient, Stat, WatchedEvent, ZkClient, ZkError};
pub use error::{Error, Result};
pub use locks::{InterProcessLock, InterProcessMutex, LockGuard, LockState};
pub use session::{ConnectionState, Session, SessionSnapshot};
