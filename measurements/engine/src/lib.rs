//! zk-locks' measurement engines, kept out of the library: users of `zk-locks` need neither.
//!
//! - [`async_waiters`]: many waiting acquires in one tokio process, zk-locks' blocking API
//!   beside `zookeeper-client`'s async lock: threads, memory per waiter, drain, and what
//!   cancelled acquires leave behind (the program `measurements/async_waiters.rs`, the test
//!   `tests/async_waiters_smoke.rs`);
//! - [`chart`]: bar charts as SVG, drawn by the programs beside their tables (`--svg DIR`);
//! - [`compare`]: zk-locks against Curator 5.4, side by side on one server (the program
//!   `measurements/compare.rs`, the test `tests/compare_smoke.rs`);
//! - [`failover`]: zk-locks against Curator 5.4 on a 3-member cluster while the leader or
//!   the holder's member dies or freezes (the program `measurements/failover.rs`);
//! - [`holder_cost`]: the requests and leader CPU that proving holders' sessions to the quorum
//!   costs, idle against holding (the program `measurements/holder_cost.rs`, the test
//!   `tests/holder_cost_smoke.rs`);
//! - [`overlap`]: zk-locks against Curator 5.4 when the leader expires a holder's session that
//!   still hears from its member (a follower cut off, a link frozen past the session): how
//!   long two holders believe they hold one mutex (the program `measurements/overlap.rs`);
//! - [`torture`]: sessions loop on every recipe while faults strike, then a checker proves
//!   exclusion and fencing (the soak `measurements/torture.rs`, `rw_exclusion_loop.rs`, and
//!   the CI-sized run `tests/torture.rs`).

#![warn(missing_docs)]

pub mod async_waiters;
pub mod chart;
pub mod compare;
pub mod failover;
pub mod holder_cost;
mod java_driver;
pub mod overlap;
pub mod torture;
