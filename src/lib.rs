//! # zk-locks
//!
//! Blocking ZooKeeper distributed locks for threaded Rust services, wire-compatible with
//! Apache Curator 5.4's lock recipes: the same lock paths, znode names and ordering, so a Rust
//! process and a JVM process running Curator can contend for one lock safely. Built to stay
//! correct under connection loss, session expiry, server restarts and process death, and to
//! tell a holder when its lock can no longer be trusted.
//!
//! ## Choosing a backend
//!
//! Every recipe takes a [`SharedClient`] (`Arc<dyn ZkClient>`). One client is one ZooKeeper
//! session; share it between the threads of a process (as Curator shares one
//! `CuratorFramework`). Three implementations:
//!
//! - [`client::native::NativeClient`] — **the one to use for a real ensemble**: our own
//!   blocking ZooKeeper client with the Java client's session rules (a connection blip keeps
//!   the session and every lock, watches are restored after a reconnect, expiry is detected by
//!   the client itself), real containers, `create2`, pipelining, `multi`, digest auth:
//!
//!   ```no_run
//!   use std::time::Duration;
//!   use zk_locks::client::native::NativeClient;
//!
//!   let client = NativeClient::connect("zk1:2181,zk2:2181,zk3:2181/app", Duration::from_secs(10))?;
//!   # Ok::<(), zk_locks::Error>(())
//!   ```
//!
//! - `client::zookeeper::ZookeeperClient` (feature `zookeeper-crate`) — the same over the
//!   `zookeeper` crate, with a session layer that works around that crate's defects (see the
//!   module docs for the list and the limits that remain: an aged client loses its session on
//!   a connection cut);
//!
//! - [`client::memory::MemoryEnsemble`] — an in-memory ZooKeeper with fault injection
//!   (connection loss before/after a request, suspend/resume, expiry). For tests, demos, and
//!   every example in these docs: `MemoryEnsemble::new().connect()` is one new session.
//!
//! With the `testing` feature, `testing::TestingServer` / `TestingCluster` start real
//! ZooKeeper servers for integration tests and `testing::FaultProxy` breaks their links.
//!
//! ## A first lock
//!
//! [`InterProcessMutex`] is Curator's mutex: FIFO, reentrant per thread. [`InterProcessLock::lock`]
//! blocks and returns a [`LockGuard`] that releases on drop; [`InterProcessLock::try_lock_for`]
//! gives up after a timeout (leaving nothing behind).
//!
//! ```
//! use std::time::Duration;
//! use zk_locks::client::memory::MemoryEnsemble;
//! use zk_locks::{InterProcessLock, InterProcessMutex};
//!
//! let ensemble = MemoryEnsemble::new();
//! // Two sessions, as two processes would have.
//! let ours = InterProcessMutex::new(ensemble.connect(), "/locks/orders")?;
//! let theirs = InterProcessMutex::new(ensemble.connect(), "/locks/orders")?;
//!
//! let guard = ours.lock()?;
//! assert!(theirs.try_lock_for(Duration::from_millis(20))?.is_none()); // held elsewhere
//! drop(guard);                                                         // released
//! assert!(theirs.try_lock_for(Duration::from_secs(5))?.is_some());
//! # Ok::<(), zk_locks::Error>(())
//! ```
//!
//! Curator's `acquire` / `acquire_timeout` / `release` are there too, on the same trait.
//! Bad input (an invalid path, a semaphore of 0 leases, releasing a lock the thread does not
//! hold) is a typed [`Error`], never a panic.
//!
//! ## Guards and lock loss
//!
//! A ZooKeeper lock lives as long as the session that created its node. A guard says where it
//! stands ([`LockGuard::state`]):
//!
//! - [`LockState::Held`] — the node exists and belongs to our live session;
//! - [`LockState::Suspect`] — the connection is suspended, or (on `NativeClient`) that the
//!   ensemble's leader keeps the session was not proven for two thirds of its timeout; the
//!   session may expire any moment and another process then gets the lock: pause work that
//!   needs exclusion ([`Session::safe_until`] is the last instant the lock is sure to be ours);
//! - [`LockState::Lost`] — the session was lost (or the client closed, or the node deleted):
//!   stop, the lock is someone else's.
//!
//! [`LockGuard::wait_while_held`] blocks until the state leaves `Held`, watching the guard's
//! node meanwhile (a deletion by someone else ends it as `Lost`). `state()` asks the server
//! only on its first call after a reconnect; see [`HeldNode::state`](locks::HeldNode::state).
//!
//! ```
//! use zk_locks::client::memory::MemoryEnsemble;
//! use zk_locks::{InterProcessLock, InterProcessMutex, LockState};
//!
//! let ensemble = MemoryEnsemble::new();
//! let client = ensemble.connect();
//! let mutex = InterProcessMutex::new(client.clone(), "/locks/job")?;
//! let guard = mutex.lock()?;
//! assert_eq!(guard.state(), LockState::Held);
//!
//! client.suspend(); // the link goes down: the session may still be alive
//! assert_eq!(guard.state(), LockState::Suspect);
//! client.expire();  // the server expires the session meanwhile...
//! client.resume();  // ...which the client learns when the link comes back
//! assert_eq!(guard.state(), LockState::Lost);
//! # Ok::<(), zk_locks::Error>(())
//! ```
//!
//! ## Owned guards
//!
//! A [`LockGuard`] borrows its lock and stays on its thread (a reentrant hold belongs to a
//! thread). To store a hold in a struct, move it to another thread, or keep it across an
//! `.await`, take an [`OwnedLockGuard`] on an `Arc` of the lock with
//! [`InterProcessLock::lock_owned`] / [`InterProcessLock::try_lock_owned_for`] /
//! [`InterProcessLock::try_lock_owned_with`] (a timeout and/or a [`CancelToken`]): `Send`,
//! `Sync`, `'static`, the same `state()`, waits and fencing token, released on drop by
//! whichever thread drops it. An owned hold belongs to its guard: each is a contender of its
//! own, not reentrant (see [`OwnedLockGuard`]). `spawn_blocking(move || mutex.lock())` is
//! refused with "`*const ()` cannot be sent between threads safely": that is the borrowed
//! guard; use `lock_owned`. A [`CancelToken`] and a runtime's own token (tokio-util's
//! `CancellationToken`) drive each other through [`CancelToken::on_cancel`], and
//! [`CancelToken::cancelled`] is a future for `select!`.
//!
//! ## Async
//!
//! In async code, await the acquire: [`InterProcessLock::lock_owned_async`] and
//! [`InterProcessLock::try_lock_owned_async`] on an `Arc` of any recipe, and
//! [`InterProcessSemaphoreV2::acquire_async`] and its siblings, wait without a thread on the
//! engine the blocking calls run (`std::task` alone: the library has no async runtime and
//! works with any executor). **Dropping the future cancels it** at any point without
//! blocking and without leaving a node; the guard or lease it returns releases on drop
//! without waiting for the delete ([`OwnedLockGuard::unlock_async`] awaits it).
//! `recipes/async_service.rs` is a tokio service built on them; the "Async use" guide below
//! says what wakes a waiting future and what it costs.
//!
//! ## Fencing
//!
//! Checking the state is not enough when the holder can stall (a GC pause) between the check and
//! a write. [`LockGuard::fencing_token`] is the lock node's `czxid` — the zxid of the
//! transaction that created it, increasing across the whole ensemble — so a later holder
//! always has a larger token. Send it with each write; the resource rejects tokens smaller than
//! the largest it has seen (see `recipes/fencing.rs`).
//!
//! ```
//! use zk_locks::client::memory::MemoryEnsemble;
//! use zk_locks::{InterProcessLock, InterProcessMutex};
//!
//! let ensemble = MemoryEnsemble::new();
//! let mutex = InterProcessMutex::new(ensemble.connect(), "/locks/store")?;
//! let first = mutex.lock()?.fencing_token()?;   // the guard is dropped at the `;`
//! let second = mutex.lock()?.fencing_token()?;
//! assert!(second > first);
//! # Ok::<(), zk_locks::Error>(())
//! ```
//!
//! For state kept in ZooKeeper itself, [`LockGuard::fenced_multi`] lets the server fence the
//! write: one transaction that checks the lock node still exists before the writes, refused
//! with [`Error::LockLost`] once it is gone (see `recipes/fenced_config.rs`).
//!
//! The token costs one `exists` request on first use (then it is cached), so holders that do
//! not need it pay nothing: an uncontended acquire and release is three requests.
//!
//! ```
//! use zk_locks::client::memory::MemoryEnsemble;
//! use zk_locks::{InterProcessLock, InterProcessMutex};
//!
//! let client = MemoryEnsemble::new().connect();
//! let mutex = InterProcessMutex::new(client.clone(), "/locks/hot")?;
//! drop(mutex.lock()?);     // the first use also creates the lock directory
//! client.reset_counters();
//! drop(mutex.lock()?);
//! assert_eq!(client.counters().requests(), 3); // create, get_children, delete
//! # Ok::<(), zk_locks::Error>(())
//! ```
//!
//! ## The recipe family
//!
//! | Type | Curator | What |
//! |---|---|---|
//! | [`InterProcessMutex`] | `InterProcessMutex` | reentrant mutex |
//! | [`locks::InterProcessReadWriteLock`] | `InterProcessReadWriteLock` | readers or one writer; write→read downgrade |
//! | [`locks::InterProcessSemaphoreV2`] | `InterProcessSemaphoreV2` | N leases ([`locks::Lease`]), optionally sized by a [`locks::SharedCount`] |
//! | [`locks::InterProcessSemaphoreMutex`] | `InterProcessSemaphoreMutex` | one lease, not reentrant |
//! | [`locks::InterProcessMultiLock`] | `InterProcessMultiLock` | all or nothing over any of the above |
//! | [`locks::Revoker`] | `Revoker` | ask a holder to release (`__REVOKE__`) |
//! | [`LeaderLatch`] | `LeaderLatch` | leader election: await leadership, a [`Leadership`] with a term |
//! | [`LeaderSelector`] | `LeaderSelector` | leader election: a callback runs while leading |
//!
//! All implement [`InterProcessLock`] (the semaphore hands out [`locks::Lease`]s instead).
//! Runnable scenarios live in `recipes/` (`cargo run --example quickstart`, `lock_lost`,
//! `fencing`, `fenced_config`, `multi_lock`, `leader_election`, `leader_latch`, `processes`,
//! `stolen_lock`, `async_service`).
//!
//! ## Curator compatibility
//!
//! Node names (`_c_<uuid>-lock-<seq>`, `__READ__`, `__WRIT__`, `lease-`), directory layout,
//! sort order and watch choice are Curator's, so mixed Rust/Curator contenders exclude each
//! other. Differences: missing parents are created `PERSISTENT` (not `CONTAINER`) through the
//! `zookeeper` crate, whose container mode is broken ([`client::native::NativeClient`]
//! creates real containers); a read→write upgrade is refused with
//! [`Error::UpgradeNotSupported`] (Curator blocks forever); a multi-lock timeout is one
//! deadline for all locks. kazoo's lock nodes are not compatible with Curator's (nor ours).
//! A write→read downgrade keeps the writer's place (as Curator 5.5 does, CURATOR-621);
//! Curator 5.4's own downgrade lets a queued writer in while the downgraded reader reads, so
//! do not downgrade from Curator 5.4 clients where writers may queue.
//!
//! ## Layers
//!
//! - [`client`]: the [`ZkClient`] trait and its backends;
//! - [`session`]: the connection-state machine (Connected, Suspended, Reconnected, Lost) and
//!   the connection epoch every waiter and holder observes;
//! - [`locks`]: the recipes, their guards and lock states (the engine and the drivers are
//!   crate-private);
//! - [`paths`], [`retry`], [`error`]: path rules, retry policies, typed errors;
//! - `testing` (feature `testing`): real ZooKeeper servers, clusters and a fault proxy.

#![warn(missing_docs)]
// docs.rs (`--cfg docsrs`, nightly) labels each item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod client;
pub mod error;
pub mod locks;
pub mod paths;
mod primitives;
pub mod retry;
pub mod session;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use client::{CreateMode, SharedClient, Stat, WatchedEvent, ZkClient, ZkError};
pub use error::{Error, LockKindName, Result};
// Every recipe and the types one names with it, where the mutex is.
pub use locks::{
    Acquire, CancelToken, HeldNode, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, LeaderLatch,
    LeaderSelector, Leadership, Lease, LockEvent, LockGuard, LockObserver, LockState,
    OwnedLockGuard, Participant, ParticipantKind, ReadLock, Revoker, SharedCount, WriteLock,
};
pub use session::{ConnectionState, Session, SessionSnapshot};

/// The names a lock-taking module needs, in one `use`: the [`InterProcessLock`] trait (its
/// methods are how every recipe is taken), the recipes, their guards, and the crate's
/// [`Result`].
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::prelude::*;
///
/// let rw = InterProcessReadWriteLock::new(MemoryEnsemble::new().connect(), "/locks/catalog")?;
/// let reading = rw.read_lock().lock()?;
/// assert_eq!(reading.state(), LockState::Held);
/// # Ok::<(), zk_locks::Error>(())
/// ```
pub mod prelude {
    pub use crate::{
        Acquire, CancelToken, Error, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
        InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2,
        LeaderLatch, LeaderSelector, Leadership, Lease, LockGuard, LockState, OwnedLockGuard,
        Result, SharedClient, ZkClient,
    };
}

// The README's and the documents' examples compile and run (`cargo test --doc`), so they
// cannot drift from the API. `docs/` is in the package (`include` in Cargo.toml) for them.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/async.md")]
#[doc = include_str!("../docs/clients.md")]
#[doc = include_str!("../docs/curator.md")]
#[doc = include_str!("../docs/lock-loss.md")]
#[doc = include_str!("../docs/observability.md")]
#[doc = include_str!("../docs/performance.md")]
#[doc = include_str!("../docs/security.md")]
#[doc = include_str!("../docs/waiting.md")]
#[doc = include_str!("../docs/zklock.md")]
struct DocsDoctests;
