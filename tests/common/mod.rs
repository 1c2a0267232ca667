//! The lock suites' `suite!`: one test body, one `#[test]` per backend. Everything else is
//! the harness, `zk_locks::testing::harness`, re-exported here for the suites.

pub use zk_locks::testing::harness::*;

/// One `#[test]` per case and backend: `suite!([case, ...])` runs each
/// `fn case(b: &dyn Backend)` of the test file as `memory::case` (in-memory ensemble),
/// `real::case` (a real server through the `zookeeper`-crate backend) and `native::case` (a
/// real server through our own client); the real-server ones are skipped when no server can
/// run here, a failure under `ZK_LOCKS_REQUIRE_SERVER=1`. `suite!(tls [case, ...])` adds
/// `native_tls::case` (feature `tls`): our own client over TLS to a TLS server's
/// `secureClientPort`, with the same faults (the proxy forwards TLS bytes as they come).
#[macro_export]
macro_rules! suite {
    (tls [$($case:ident),* $(,)?]) => {
        suite!([$($case),*]);
        #[cfg(feature = "tls")]
        mod native_tls {
            $(
                #[test]
                fn $case() {
                    if let Some(b) = zk_locks::testing::harness::Real::native_tls() {
                        super::$case(&b);
                    }
                }
            )*
        }
    };
    ([$($case:ident),* $(,)?]) => {
        mod memory {
            $(
                #[test]
                fn $case() {
                    super::$case(&zk_locks::testing::harness::Memory::new());
                }
            )*
        }
        mod real {
            $(
                #[test]
                fn $case() {
                    if let Some(b) = zk_locks::testing::harness::Real::new() {
                        super::$case(&b);
                    }
                }
            )*
        }
        mod native {
            $(
                #[test]
                fn $case() {
                    if let Some(b) = zk_locks::testing::harness::Real::native() {
                        super::$case(&b);
                    }
                }
            )*
        }
    };
}
