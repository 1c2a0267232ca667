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
//!
//! The cut, freeze and watch-restore cases of `sessions` and `native_restore` also run over
//! TLS (feature `tls`), as their `native_tls::case`: our own client to the secure port of the
//! shared TLS test server, through the same fault proxy.
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

/// One `#[test]` per case over TLS, when built with the `tls` feature:
/// `over_tls!([case, ...])` runs each `fn case(link)` of the module (a case taking
/// `impl Into<backend::On>` or a `backend::Link`) as `native_tls::case`.
macro_rules! over_tls {
    ([$($case:ident),* $(,)?]) => {
        #[cfg(feature = "tls")]
        mod native_tls {
            $(
                #[test]
                fn $case() {
                    super::$case(crate::backend::Link::Tls);
                }
            )*
        }
    };
}

/// One `#[test]` per case and link, for cases of our own client taking a `backend::Link`:
/// `on_both_links!([case, ...])` runs each as `tcp::case`, and as `native_tls::case` with the
/// `tls` feature.
macro_rules! on_both_links {
    ([$($case:ident),* $(,)?]) => {
        mod tcp {
            $(
                #[test]
                fn $case() {
                    super::$case(crate::backend::Link::Tcp);
                }
            )*
        }
        over_tls!([$($case),*]);
    };
}

mod backend;
mod connecting;
mod crate_limits;
mod native_api;
mod native_restore;
mod operations;
mod sessions;
