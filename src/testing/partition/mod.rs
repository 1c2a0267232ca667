//! Member partitions for a [`TestingCluster`](super::TestingCluster): every member in its own
//! network namespace, so that one member can be cut off from the others (packets dropped both
//! ways, no reset, no ICMP) while the test's clients still reach it.
//!
//! - [`available`]: whether namespaces can be made here, and why not;
//! - [`require_partition`]: the skip-or-fail rule, as [`require_server`](super::require_server);
//! - `netns`: the network itself (a bridge in the root namespace, a namespace, veth pair and
//!   address per member), the cut and the heal, its removal on drop and of dead runs' leftovers.
//!
//! Start such a cluster with
//! [`TestingCluster::builder`](super::TestingCluster::builder)`(n).network_namespaces(true)`;
//! cut with [`TestingCluster::cut_off`](super::TestingCluster::cut_off) and undo with
//! [`TestingCluster::heal`](super::TestingCluster::heal).
//!
//! Namespaces need root (`CAP_NET_ADMIN`) and `ip` (iproute2). Elsewhere tests that need them
//! are skipped with a note, unless `ZK_LOCKS_REQUIRE_SERVER=1` (CI, `scripts/test.sh` run as
//! root), where they fail with the reason.

mod netns;

use std::path::PathBuf;
use std::sync::OnceLock;

pub(crate) use netns::Network;

/// The `ip` binary: the first on `PATH`, else `/usr/sbin/ip` or `/sbin/ip` (root's `PATH` may
/// lack the sbin dirs under a test runner). Plain `ip` when none exists: running it then fails
/// with "not found", which is the reason [`available`] gives.
pub(crate) fn ip_command() -> PathBuf {
    static IP: OnceLock<PathBuf> = OnceLock::new();
    IP.get_or_init(|| {
        let on_path = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .unwrap_or_default();
        on_path
            .into_iter()
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .map(|dir| dir.join("ip"))
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("ip"))
    })
    .clone()
}

/// `Ok` when this process can make network namespaces (it runs as root and `ip netns`, a
/// bridge and a veth pair work: checked once, by making and removing them); otherwise the
/// reason. Java and ZooKeeper are checked apart, by [`require_server`](super::require_server).
///
/// ```
/// match zk_locks::testing::partition::available() {
///     Ok(()) => println!("member partitions can run here"),
///     Err(reason) => println!("no member partitions: {reason}"),
/// }
/// ```
pub fn available() -> Result<(), String> {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    AVAILABLE.get_or_init(netns::probe).clone()
}

/// Whether tests that cut members off can run here: `true` when a real ZooKeeper can run
/// ([`require_server`](super::require_server)) and namespaces are [`available`]. Otherwise
/// prints a skip note and returns `false`, or panics with the reason when
/// `ZK_LOCKS_REQUIRE_SERVER=1`.
pub fn require_partition() -> bool {
    if !super::require_server() {
        return false;
    }
    match available() {
        Ok(()) => true,
        Err(reason) if super::server_required() => panic!(
            "{}=1 but member partitions cannot run here: {reason}. They need root and `ip` \
             (iproute2); ./scripts/test.sh runs as root.",
            super::REQUIRE_SERVER_ENV
        ),
        Err(reason) => {
            eprintln!(
                "skipping: no member partitions ({reason}); set {}=1 to fail instead",
                super::REQUIRE_SERVER_ENV
            );
            false
        }
    }
}
