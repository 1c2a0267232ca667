//! [`TestingCluster`]: an n-node ZooKeeper quorum on loopback ports (like Curator's
//! `TestingCluster`), or in network namespaces where members can be cut off
//! ([`ClusterBuilder`], [`super::partition`]).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::partition::Network;
use super::process::{free_port, lost_a_port_race, Node, NodeConfig, Timing};
use crate::error::{Error, Result};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);

/// The mode a cluster member reports in `srvr`.
fn mode_of(srvr: &str) -> Option<&str> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(str::trim)
}

/// A ZooKeeper ensemble of n JVMs on 127.0.0.1 (`server.N=127.0.0.1:<quorum>:<election>`,
/// `myid` files, temp dirs), or each in its own network namespace on its own address
/// ([`ClusterBuilder::network_namespaces`]). Members are numbered from 0. Drop kills them all
/// and removes the namespaces.
pub struct TestingCluster {
    // Declared first so that it drops first: the JVMs die before their namespaces go.
    nodes: Vec<Mutex<Node>>,
    network: Option<Network>,
}

impl std::fmt::Debug for TestingCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestingCluster")
            .field("connect_string", &self.connect_string())
            .finish()
    }
}

/// How to start a [`TestingCluster`]: its size, its servers' clock and session bounds, and
/// whether each member gets its own network namespace. Defaults: tickTime 500 ms, initLimit
/// 20, syncLimit 10, ZooKeeper's own session bounds (2 to 20 ticks: 1 s to 10 s at the default
/// tick, whatever tick is set), all members on 127.0.0.1.
///
/// ```no_run
/// use std::time::Duration;
/// use zk_locks::testing::{partition, TestingCluster};
/// # fn main() -> zk_locks::Result<()> {
/// if partition::require_partition() {
///     let cluster = TestingCluster::builder(3)
///         .tick_time(Duration::from_secs(2))
///         .sync_limit(5)
///         .network_namespaces(true)
///         .start()?;
///     let follower = (0..3).find(|&i| Some(i) != cluster.leader()).unwrap();
///     cluster.cut_off(follower)?; // its clients still reach it; the other members do not
///     cluster.heal(follower)?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ClusterBuilder {
    members: usize,
    timing: Timing,
    namespaces: bool,
}

impl ClusterBuilder {
    /// The servers' `tickTime` (whole milliseconds, at least 1): their heartbeat, the unit of
    /// the limits and of session expiry (sessions are 2 to 20 ticks).
    pub fn tick_time(mut self, tick: Duration) -> ClusterBuilder {
        self.timing.tick_time = tick;
        self
    }

    /// `initLimit`: ticks a follower has to connect to and sync with the leader.
    pub fn init_limit(mut self, ticks: u32) -> ClusterBuilder {
        self.timing.init_limit = ticks;
        self
    }

    /// `syncLimit`: ticks of silence after which a follower gives up on the leader (and closes
    /// its clients), and the leader on the follower.
    pub fn sync_limit(mut self, ticks: u32) -> ClusterBuilder {
        self.timing.sync_limit = ticks;
        self
    }

    /// `minSessionTimeout` (whole milliseconds): the shortest session the members grant; a
    /// client asking for less gets this. Unstated, ZooKeeper's own: two ticks. A test that
    /// wants sessions shorter than two ticks says so here (ZooKeeper allows it, and a client
    /// that counts on "a session is at least two ticks" is then wrong).
    pub fn min_session_timeout(mut self, timeout: Duration) -> ClusterBuilder {
        self.timing.min_session_timeout = Some(timeout);
        self
    }

    /// `maxSessionTimeout` (whole milliseconds): the longest session the members grant; a
    /// client asking for more gets this. Unstated, ZooKeeper's own: twenty ticks.
    pub fn max_session_timeout(mut self, timeout: Duration) -> ClusterBuilder {
        self.timing.max_session_timeout = Some(timeout);
        self
    }

    /// Each member in its own network namespace on its own address `10.a.b.N`, behind a
    /// bridge in the root namespace (`10.a.b.1`), so that
    /// [`TestingCluster::cut_off`] can place a partition. Needs root and `ip`: see
    /// [`partition::require_partition`](super::partition::require_partition).
    pub fn network_namespaces(mut self, on: bool) -> ClusterBuilder {
        self.namespaces = on;
        self
    }

    /// Starts the members and waits until they form a quorum (a leader and n-1 followers).
    /// A loopback start that lost one of its ports to another socket before a member bound it
    /// is made again on new ports (three times at most); members in namespaces have their own
    /// addresses and the usual ports (2181, 2888, 3888), which nothing else can take.
    ///
    /// Errors: [`Error::InvalidArgument`] for no members, a tick or session bound of no whole
    /// millisecond, a limit of 0 or a least session above the longest; [`Error::Io`] when the namespaces cannot be made; [`Error::Connect`] (with
    /// the members' log tails) when no quorum forms within 90 s.
    pub fn start(self) -> Result<TestingCluster> {
        let invalid = |name, reason: &str| {
            Err(Error::InvalidArgument {
                name,
                reason: reason.into(),
            })
        };
        if self.members == 0 {
            return invalid("n", "a cluster needs at least one member");
        }
        if let Some((name, reason)) = self.timing.invalid() {
            return invalid(name, reason);
        }
        if self.namespaces {
            return self.start_once(Some(Network::create(self.members)?));
        }
        let mut tries = 0;
        loop {
            tries += 1;
            match self.start_once(None) {
                Err(e) if tries < 3 && lost_a_port_race(&e) => continue,
                done => return done,
            }
        }
    }

    fn start_once(&self, network: Option<Network>) -> Result<TestingCluster> {
        let mut members = Vec::new();
        for i in 0..self.members {
            members.push(match &network {
                None => (
                    Ipv4Addr::LOCALHOST,
                    free_port()?,
                    free_port()?,
                    free_port()?,
                ),
                Some(net) => (net.member_addr(i), 2181, 2888, 3888),
            });
        }
        let servers: Vec<String> = members
            .iter()
            .enumerate()
            .map(|(i, (host, _, quorum, election))| {
                format!("server.{}={host}:{quorum}:{election}", i + 1)
            })
            .collect();
        let mut nodes = Vec::new();
        for (i, (host, client, _, _)) in members.iter().enumerate() {
            nodes.push(Mutex::new(Node::create(NodeConfig {
                host: *host,
                netns: network.as_ref().map(|net| net.namespace(i)),
                timing: self.timing,
                client_port: *client,
                quorum: Some((i as u32 + 1, servers.clone())),
                secure_port: None,
            })?));
        }
        let cluster = TestingCluster { nodes, network };
        for node in &cluster.nodes {
            node.lock().spawn()?;
        }
        cluster.wait_for_quorum(STARTUP_TIMEOUT)?;
        Ok(cluster)
    }
}

impl TestingCluster {
    /// Starts `n` members on 127.0.0.1 with the default clock and waits until they form a
    /// quorum: `TestingCluster::builder(n).start()`.
    pub fn start(n: usize) -> Result<TestingCluster> {
        Self::builder(n).start()
    }

    /// A cluster of `n` members to configure before [`ClusterBuilder::start`].
    pub fn builder(n: usize) -> ClusterBuilder {
        ClusterBuilder {
            members: n,
            timing: Timing::default(),
            namespaces: false,
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a cluster has at least one member.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `host1:port1,host2:port2,...` in member order (hosts are 127.0.0.1, or the members'
    /// own addresses in namespaces).
    pub fn connect_string(&self) -> String {
        self.connect_string_of(|_| true)
    }

    /// The connect string of member `i` alone: a client that must stay on it.
    pub fn member_connect_string(&self, i: usize) -> String {
        self.address(i).to_string()
    }

    /// The connect string of every member but `i`: a client on the majority side of a cut.
    pub fn connect_string_except(&self, i: usize) -> String {
        self.connect_string_of(|j| j != i)
    }

    fn connect_string_of(&self, pick: impl Fn(usize) -> bool) -> String {
        (0..self.nodes.len())
            .filter(|&j| pick(j))
            .map(|j| self.address(j).to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Member `i`'s client address.
    pub fn address(&self, i: usize) -> SocketAddr {
        self.nodes[i].lock().client_addr()
    }

    /// The client port of member `i`.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].lock().client_port
    }

    /// Cuts member `i` off from every other member, silently: packets between them are
    /// dropped both ways (no reset, no ICMP), while clients (the root namespace) still reach
    /// it. A follower cut off goes on answering its clients' pings and reads alone, holds
    /// their writes and `sync`s (they need the leader), and closes its clients once it has
    /// not heard the leader for syncLimit × tickTime. Cutting a member already cut does
    /// nothing.
    ///
    /// Errors: [`Error::InvalidArgument`] unless the cluster was started with
    /// [`ClusterBuilder::network_namespaces`]; [`Error::Io`] when `ip` fails.
    pub fn cut_off(&self, i: usize) -> Result<()> {
        self.network()?.set_cut(i, true)
    }

    /// Undoes [`TestingCluster::cut_off`] of member `i`: its links come back, except those to
    /// members still cut off. Does not wait for it to rejoin
    /// ([`TestingCluster::wait_for_quorum`] does). Same errors as `cut_off`.
    pub fn heal(&self, i: usize) -> Result<()> {
        self.network()?.set_cut(i, false)
    }

    fn network(&self) -> Result<&Network> {
        self.network.as_ref().ok_or_else(|| Error::InvalidArgument {
            name: "cluster",
            reason: "members can be cut off only in a cluster started with \
                     ClusterBuilder::network_namespaces(true)"
                .into(),
        })
    }

    /// SIGKILLs member `i` (data kept).
    pub fn kill(&self, i: usize) {
        self.nodes[i].lock().kill();
    }

    /// Freezes member `i` (SIGSTOP): its sockets stay open, it answers nothing, as a member
    /// stuck in a long GC pause. [`TestingCluster::thaw`] resumes it; drop kills it anyway.
    pub fn freeze(&self, i: usize) {
        self.nodes[i].lock().set_frozen(true);
    }

    /// Resumes member `i` after [`TestingCluster::freeze`] (SIGCONT).
    pub fn thaw(&self, i: usize) {
        self.nodes[i].lock().set_frozen(false);
    }

    /// Whether member `i`'s JVM exited on its own (it crashed) since it was last started; a
    /// member stopped by [`TestingCluster::kill`] has not. [`TestingCluster::restart`] starts
    /// it again.
    pub fn has_died(&self, i: usize) -> bool {
        self.nodes[i].lock().died()
    }

    /// Starts member `i` again (same ports, same data); does not wait for it to join.
    pub fn restart(&self, i: usize) -> Result<()> {
        self.nodes[i].lock().spawn()
    }

    /// Member `i`'s server log (its JVM's output), removed with the cluster: read it to tell
    /// what an election or a member did when a test fails.
    pub fn log_path(&self, i: usize) -> std::path::PathBuf {
        self.nodes[i].lock().log_path()
    }

    /// A four-letter-word command to member `i`.
    pub fn four_letter(&self, i: usize, cmd: &str) -> Result<String> {
        let addr = self.nodes[i].lock().client_addr();
        super::harness::four_letter(addr, cmd)
    }

    /// The member that currently leads (by `srvr`'s `Mode: leader`), if any answers so.
    pub fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| {
            self.nodes[i].lock().is_running()
                && self
                    .four_letter(i, "srvr")
                    .map(|r| mode_of(&r) == Some("leader"))
                    .unwrap_or(false)
        })
    }

    /// Waits until every running member serves (leader, follower or standalone) and one of them
    /// leads; fails after `timeout` with the log tails, and at once when a member that was
    /// started (and not killed) has exited: the ensemble is not what the caller asked for.
    pub fn wait_for_quorum(&self, timeout: Duration) -> Result<()> {
        let deadline = crate::testing::deadline_after(timeout);
        loop {
            let mut serving = 0;
            let mut running = 0;
            let mut leader = false;
            for i in 0..self.nodes.len() {
                {
                    let node = self.nodes[i].lock();
                    if node.died() {
                        return Err(node.startup_error(format!("member {i} exited on its own")));
                    }
                    if !node.is_running() {
                        continue;
                    }
                }
                running += 1;
                if let Ok(reply) = self.four_letter(i, "srvr") {
                    match mode_of(&reply) {
                        Some("leader") | Some("standalone") => {
                            leader = true;
                            serving += 1
                        }
                        Some("follower") => serving += 1,
                        _ => {}
                    }
                }
            }
            if running > 0 && serving == running && leader {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let tails: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| {
                        let n = n.lock();
                        format!(
                            "--- member at {}:\n{}",
                            n.client_addr(),
                            super::process::log_tail(&n.log_path(), 1500)
                        )
                    })
                    .collect();
                return Err(Error::Connect {
                    hosts: self.connect_string(),
                    reason: format!(
                        "no quorum within {timeout:?} ({serving}/{running} serving)\n{}",
                        tails.join("\n")
                    ),
                    source: None,
                });
            }
            // Polling child processes for readiness: nothing to wait on instead.
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
