//! The torture engine, used by the soak program (`measurements/torture.rs`) and by its CI-sized run
//! (`tests/torture.rs`): sessions loop on every recipe while a fault thread breaks their
//! connections, sessions and servers; a checker then proves exclusion, fencing, and that
//! nothing (node or watch) is left behind.
//!
//! Each session runs one worker thread per recipe, every iteration being
//! acquire → `is_valid()` → enter → fenced write → tiny section → exit → `is_valid()` → release.
//! Sections are recorded with `Instant`s (one process, one monotonic clock), and only sections
//! whose holder was valid at both ends count for exclusion. To stay sound on a loaded machine
//! the enter time is taken *after* the validity check and the exit time *before* the second
//! one: a holder valid at both checks held the lock during the whole recorded interval
//! (a session never comes back once lost, and a node found deleted stays lost) — unless the
//! server ended its session without warning meanwhile, which its client learns only after
//! others could see its nodes go: such sections are set aside (`expired-sections`) and left to
//! fencing.
//!
//! The leader elections (a latch and a selector election) are recipes too: each spell of
//! leadership is a section (its term as the token, `is_leading()` checked at both ends), then
//! leadership is given up; besides exclusion, the checker proves that every term is held by
//! one participant only and that terms never go back in time order.
//!
//! The environment ([`Env`]) is either a real 3-node cluster with one
//! [`FaultProxy`](zk_locks::testing::FaultProxy) per (session, server) — so a cut, a freeze or an expiry hits exactly one session — and,
//! where network namespaces can be made, members that can be cut off from each other (the
//! member partition); or the in-memory ensemble, whose faults are exact and fast.
//!
//! The engine, one job per file:
//! - `config`: the recipes, the fault kinds, the [`Env`] trait and the run's [`Config`];
//! - `workers`: the worker threads and the shared state they report to;
//! - `elections`: the latch and selector workers (each spell of leadership one section);
//! - `run`: [`run`] itself (workers, the fault thread, the final checks);
//! - `faults`: the composite faults the fault thread drives (fencing probe, expiry during a
//!   downgrade, count blip) and waiting for the server to settle;
//! - `checks`: recorded sections, the [`FencedStore`], [`check_exclusion`], the elections'
//!   [`check_terms`] and the [`Summary`];
//! - `timeline`: when each fault struck whom ([`FaultLog`]), to name the faults behind a
//!   violation and to set aside holders whose session the server ended without warning;
//! - `real` and `memory`: the two environments, [`RealEnv`] and [`MemoryEnv`].

mod checks;
mod config;
mod elections;
mod faults;
mod memory;
mod real;
mod run;
mod timeline;
mod workers;

pub use checks::{check_exclusion, check_terms, FencedStore, Section, StaleToken, Summary};
pub use config::{Config, Env, FaultKind, NodeOracle, Recipe, SEMAPHORE_MAX};
pub use memory::MemoryEnv;
pub use real::RealEnv;
pub use run::run;
pub use timeline::{expired_unannounced, FaultLog, FaultRecord};
pub use zk_locks::testing::harness::ClientKind;
