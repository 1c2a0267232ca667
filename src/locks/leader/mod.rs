//! Leader election on the lock engine, wire-compatible with Curator 5.4's leader recipes.
//!
//! - [`LeaderLatch`] (`latch.rs`): join an election, await leadership, lead until closed or
//!   lost; listeners ([`LeaderLatchListener`], `listeners.rs`) and close modes
//!   ([`CloseMode`]). Its own thread (`campaign.rs`) queues the node through the engine and
//!   follows its state.
//! - [`LeaderSelector`] (`selector.rs`): a callback run on the selector's thread while it
//!   leads, leadership given up when it returns; requeue, auto requeue, interrupt. Its
//!   election is the crate's `InterProcessMutex` (Curator's layout: `lock-` nodes).
//! - [`Leadership`] (`leadership.rs`): what a leader holds, whichever recipe elected it — the
//!   election node's state (the `HeldNode` rules every lock holder has), its term (the
//!   node's fencing token), a token cancelled when the spell ends, fenced writes.
//! - `awaited.rs`: a latch's leadership and its close awaited by futures ([`AwaitLeadership`],
//!   [`ClosingLatch`]), woken by the latch's thread; no thread waits.
//! - `phase.rs`: the life both recipes share (latent, started once, closed once) and the
//!   error for a call in the wrong phase.
//!
//! The rule every file here keeps: **at no moment do two participants both read their
//! leadership `Held`.** A participant leads only while its node reads `Held` by the lock
//! holder's rules, which turn `Suspect` as soon as the link is in doubt (before the server
//! can expire the session and elect another), and a leader stops (its spell's token
//! cancelled, listeners told) before its node is deleted.

mod awaited;
mod campaign;
mod latch;
mod leadership;
mod listeners;
mod phase;
mod selector;

pub use awaited::{AwaitLeadership, ClosingLatch};
pub use latch::{CloseMode, LeaderLatch};
pub use leadership::Leadership;
pub use listeners::{LeaderLatchListener, LeaderListenerId};
pub use selector::LeaderSelector;
