//! Test support (feature `testing`), like Curator's `curator-test`: real ZooKeeper servers and
//! clusters on loopback ports, and a fault-injecting proxy.
//!
//! - [`TestingServer`]: one standalone ZooKeeper 3.8 (Debian's jars, plain `java`, no root),
//!   optionally with a TLS port ([`TestingServer::start_tls`], certificates in [`TlsFiles`]);
//! - [`TestingCluster`]: an n-member quorum on 127.0.0.1, or ([`TestingCluster::builder`])
//!   with its own clock and each member in its own network namespace, where [`partition`]
//!   cuts a member off from the others while clients still reach it;
//! - session bounds: servers and members keep ZooKeeper's own (`minSessionTimeout` two ticks,
//!   `maxSessionTimeout` twenty) unless a test states others with
//!   [`ServerBuilder::min_session_timeout`] / [`ServerBuilder::max_session_timeout`] (and the
//!   same on [`ClusterBuilder`]); the shared servers state a longest of 60 s;
//! - [`FaultProxy`]: cut / freeze / refuse connections, expire a session for real;
//! - [`shared_server`]: one lazily started server per test process ([`shared_tls_server`]:
//!   the same with a TLS port);
//! - [`require_server`]: the skip-or-fail rule for machines without Java or ZooKeeper;
//! - [`curator`]: compile and run Java programs against Debian's Curator 5.4 jars;
//! - [`harness`]: the one test harness (in-memory or real backend, faults per session, unique
//!   roots, waiting, watch counting, four-letter words, the cookbook's command line);
//!
//! When Java or the jars are missing, tests skip with a note, unless the environment sets
//! `ZK_LOCKS_REQUIRE_SERVER=1` (CI does), where they fail with a clear message instead.
//! `ZK_LOCKS_ZOOKEEPER_CLASSPATH` overrides the classpath (default: Debian's
//! `/usr/share/java/zookeeper.jar`, whose manifest names its dependencies).

mod cluster;
pub mod curator;
mod cut_off;
pub mod harness;
pub mod partition;
mod process;
mod proxy;
mod server;
mod tls;

use std::sync::OnceLock;

pub use cluster::{ClusterBuilder, TestingCluster};
pub use cut_off::CutOffMember;
pub use proxy::FaultProxy;
pub use server::{ServerBuilder, TestingServer};
pub use tls::{shared_tls_server, TlsFiles};

/// The longest session the shared servers ([`shared_server`], [`shared_tls_server`]) grant
/// (their `maxSessionTimeout`); their least is ZooKeeper's own, two ticks (1 s).
pub const SHARED_MAX_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The environment variable that turns a missing ZooKeeper into a test failure.
pub const REQUIRE_SERVER_ENV: &str = "ZK_LOCKS_REQUIRE_SERVER";

pub(crate) fn server_required() -> bool {
    std::env::var(REQUIRE_SERVER_ENV).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Whether tests against a real server can run here: `true` when Java and the ZooKeeper jars
/// are present. Otherwise prints a skip note and returns `false` — or panics with the reason
/// when `ZK_LOCKS_REQUIRE_SERVER=1`.
pub fn require_server() -> bool {
    match process::missing_requirements() {
        None => true,
        Some(missing) if server_required() => panic!(
            "{REQUIRE_SERVER_ENV}=1 but a real ZooKeeper cannot run here: {missing}. \
             Run ./scripts/test.sh, which installs them."
        ),
        Some(missing) => {
            eprintln!("skipping: no real ZooKeeper ({missing}); set {REQUIRE_SERVER_ENV}=1 to fail instead");
            false
        }
    }
}

/// Same rule as [`require_server`]; kept under the name other test files use.
pub fn require_java() -> bool {
    require_server()
}

/// One server per test process, started on first use and shared by every test (each test
/// should work under its own root path). `None` (after a skip note) when Java or the jars are
/// missing, unless `ZK_LOCKS_REQUIRE_SERVER=1`, which panics instead. Panics when the server
/// fails to start although everything is installed.
///
/// Tests must not stop or restart the shared server: use a [`FaultProxy`] in front of it, or
/// an own [`TestingServer`].
///
/// It grants sessions from 1 s (ZooKeeper's own least, two ticks) to
/// [`SHARED_MAX_SESSION_TIMEOUT`] (60 s, where ZooKeeper's own longest is 10 s): the tests of
/// a whole test binary share it, some with sessions patient with bulk work on a loaded
/// machine. A test that needs other bounds starts its own ([`TestingServer::builder`]).
pub fn shared_server() -> Option<&'static TestingServer> {
    static SERVER: OnceLock<Option<TestingServer>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            if !require_server() {
                return None;
            }
            match TestingServer::builder()
                .max_session_timeout(SHARED_MAX_SESSION_TIMEOUT)
                .start()
            {
                Ok(server) => Some(server),
                Err(e) => panic!("could not start the shared ZooKeeper test server: {e}"),
            }
        })
        .as_ref()
}

/// `now + timeout`, or a century ahead when an `Instant` cannot hold it: the test kit's
/// waits take any `Duration` (`Duration::MAX` waits without limit) and never overflow.
pub(crate) fn deadline_after(timeout: std::time::Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(std::time::Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// The test kit's waits take any `Duration`: `Duration::MAX` is no limit, not a panic.
    #[test]
    fn waits_take_any_duration() {
        super::harness::eventually(Duration::MAX, "a condition that holds", || true);
        let proxy = super::FaultProxy::start("127.0.0.1:9".parse().unwrap()).unwrap();
        assert_eq!(proxy.wait_for_refusals(0, Duration::MAX), 0);
        let e = crate::client::memory::MemoryEnsemble::new();
        let c = e.connect();
        super::harness::wait_for_session(c.as_ref(), Duration::MAX, "connected", |s| {
            s.state.is_connected()
        });
    }
}
