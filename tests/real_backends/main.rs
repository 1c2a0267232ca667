//! Both real backends on a real ZooKeeper 3.8: one body per case, run once through the
//! `zookeeper`-crate backend (`zookeeper_crate::case`) and once through our own client
//! (`native::case`), each given its `ClientKind`. Where the backends differ, the case says so
//! explicitly; what only one backend has lives in a module named for it.
//!
//! - `connecting`: connect strings and timeouts (bad input is a typed error naming it), no
//!   server, chroot;
//! - `operations`: requests, ephemeral owners, watches, panicking callbacks, close;
//! - `sessions`: the session under faults (FaultProxy): cuts, freezes, a targeted expiry, a
//!   server restart, a leader kill;
//! - `crate_limits`: the `zookeeper` crate only: its documented limits and the defects its
//!   session layer works around;
//! - `native_restore`: our own client only: watches and credentials restored after a
//!   reconnect (SetWatches, in batches);
//! - `native_api`: our own client only: session id and negotiated timeout, create2,
//!   containers, pipelining, multi, sync, auth, timeouts too long for an `Instant`.
//!
//! Real-server cases are skipped when no server can run here, a failure under
//! `ZK_LOCKS_REQUIRE_SERVER=1`. No sleeps as synchronisation: tests wait on
//! `Session::wait_for_change` or channels, always with a deadline.

/// One `#[test]` per case and backend: `on_both_backends!([case, ...])` runs each
/// `fn case(kind: ClientKind)` of the module as `zookeeper_crate::case` and `native::case`.
macro_rules! on_both_backends {
    ([$($case:ident),* $(,)?]) => {
        mod zookeeper_crate {
            $(
                #[test]
                fn $case() {
                    super::$case(zk_locks::testing::harness::ClientKind::Crate);
                }
            )*
        }
        mod native {
            $(
                #[test]
                fn $case() {
                    super::$case(zk_locks::testing::harness::ClientKind::Native);
                }
            )*
        }
    };
}

mod backend;
mod connecting;
mod crate_limits;
mod native_api;
mod native_restore;
mod operations;
mod sessions;
