//! An in-memory ZooKeeper ensemble with fault injection.
//!
//! [`MemoryEnsemble`] models one ZooKeeper 3.8 server faithfully enough for the lock recipes to
//! be tested against it deterministically: a tree of nodes with full [`Stat`](crate::client::Stat)s from one global
//! zxid counter, sessions owning ephemeral nodes, per-parent sequence numbers taken from the
//! parent's child-creation counter, container nodes, one-shot data/child watches delivered in commit order
//! on a per-client event thread, and the server's error codes in the server's order of checks.
//! The tests in `tests/conformance` run the same bodies against this model and a real server.
//!
//! Each [`MemoryClient`] (from [`MemoryEnsemble::connect`]) is one client with one session at
//! a time. Faults are injected per client: a one-shot connection loss before or after a request
//! is applied ([`Fault`]), a link that goes down and comes back ([`MemoryClient::suspend`] /
//! [`MemoryClient::resume`]), a session the client gives up on while its link is down
//! ([`MemoryClient::give_up_session`]), server-side session expiry ([`MemoryClient::expire`]), delayed
//! watch delivery, and a hook that runs before each request ([`MemoryClient::on_request`]).
//! Every connection-state change goes through the client's [`Session`](crate::session::Session), exactly as the real
//! backend reports them, and is reported synchronously (before the faulting call returns) so
//! tests stay deterministic.
//!
//! Like the `zookeeper` crate, a client by default loses every watch when its connection comes
//! back ([`MemoryClient::set_watches_survive_reconnect`]); recipes must cope with that.
//!
//! The model, one job per file:
//! - `ensemble`: [`MemoryEnsemble`], the handle on the shared server state (new clients, test
//!   inspection, server-side expiry, the container sweep);
//! - `client`: [`MemoryClient`], its request path (count, hook, faults, apply) and its
//!   [`ZkClient`](crate::client::ZkClient) implementation;
//! - `faults`: [`Fault`] and [`FaultTiming`], and the client's fault API (link down and back,
//!   a session given up, expiry, delayed watch delivery, request hooks);
//! - `tree`: the data tree and the server's checks for each request;
//! - `multi`: transactions, applied in order and undone as a whole when one operation fails;
//! - `acl`: [`MemoryOptions`] (credentials, ACL provider), identities and the server's ACL
//!   rules (`world`, `auth`, `digest`; anything else is refused, never treated as open);
//! - `watches`: the session and client registries, one-shot watches, the event thread.
//!
//! ```
//! use zk_locks::client::memory::MemoryEnsemble;
//! use zk_locks::{CreateMode, ZkClient};
//!
//! let ensemble = MemoryEnsemble::new();
//! let client = ensemble.connect();
//! client.create("/app", b"hello", CreateMode::Persistent)?;
//! let node = client.create("/app/lock-", b"", CreateMode::EphemeralSequential)?;
//! assert_eq!(node, "/app/lock-0000000000");
//! let (data, stat) = client.get_data("/app", None)?;
//! assert_eq!((data.as_slice(), stat.num_children), (&b"hello"[..], 1));
//! client.close(); // the ephemeral node goes with the session
//! assert_eq!(ensemble.children("/app"), Some(vec![]));
//! # Ok::<(), zk_locks::ZkError>(())
//! ```

mod acl;
mod client;
mod ensemble;
mod faults;
mod multi;
mod tree;
mod watches;

pub use super::counting::{Counters, Op};
pub use acl::MemoryOptions;
pub use client::MemoryClient;
pub use ensemble::MemoryEnsemble;
pub use faults::{Fault, FaultTiming, RequestHook};
