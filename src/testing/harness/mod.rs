//! The one test harness: the answer to "in-memory or real server?" for the lock suites, the
//! conformance suite, the cookbook (`recipes/`) and the measurement programs
//! (`measurements/`), as Curator's `curator-test` and kazoo's `testing/harness.py` are theirs.
//!
//! - `backend`: the [`Backend`] trait (sessions as [`TestClient`]s with their [`Faults`],
//!   fresh roots, the server's watch count, a patience), [`Memory`] (the in-memory
//!   ensemble) and [`unique_root`];
//! - `real`: [`Real`], a real server as a backend (the shared test server with a
//!   [`FaultProxy`](crate::testing::FaultProxy) per session, or an ensemble by connect
//!   string), and [`ClientKind`], which client a session uses (ours or the crate's);
//! - `wait`: [`eventually`], [`wait_connected`], [`wait_for_session`], [`reach_state`],
//!   [`children`];
//! - `admin`: [`four_letter`] (the one implementation of four-letter words) and
//!   [`first_server`] (a connect string read by `client::connect_string`, as every client
//!   reads it);
//! - [`watches`]: reading the server's watch listings (`wchp`, `wchs`), the one place that
//!   decides which watches belong to a root;
//! - [`cookbook`]: what every recipe program shares (command line, log format, exit status,
//!   checked promises).
//!
//! The shared real server itself and the skip-or-fail rule are
//! [`shared_server`](crate::testing::shared_server) and
//! [`require_server`](crate::testing::require_server).

mod admin;
mod backend;
pub mod cookbook;
mod real;
mod wait;
pub mod watches;

pub use admin::{first_server, four_letter};
pub use backend::{unique_root, Backend, Faults, Memory, TestClient};
pub use real::{ClientKind, Real, REAL_SESSION_TIMEOUT};
pub use wait::{
    children, eventually, owned_nodes, reach_state, wait_connected, wait_for_session, wants_proof,
};
