//! [`TestingCluster`]: an n-node ZooKeeper quorum on loopback ports (like Curator's
//! `TestingCluster`).

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::process::{free_port, lost_a_port_race, Node, NodeConfig};
use crate::error::{Error, Result};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);

/// The mode a cluster member reports in `srvr`.
fn mode_of(srvr: &str) -> Option<&str> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(str::trim)
}

/// A ZooKeeper ensemble of n JVMs on 127.0.0.1 (`server.N=127.0.0.1:<quorum>:<election>`,
/// `myid` files, temp dirs). Members are numbered from 0. Drop kills them all.
pub struct TestingCluster {
    nodes: Vec<Mutex<Node>>,
}

impl std::fmt::Debug for TestingCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestingCluster")
            .field("connect_string", &self.connect_string())
            .finish()
    }
}

impl TestingCluster {
    /// Starts `n` members and waits until they form a quorum (a leader and n-1 followers).
    /// A start that lost one of its ports to another socket before a member bound it is made
    /// again on new ports (three times at most).
    pub fn start(n: usize) -> Result<TestingCluster> {
        if n == 0 {
            return Err(Error::InvalidArgument {
                name: "n",
                reason: "a cluster needs at least one member".into(),
            });
        }
        let mut tries = 0;
        loop {
            tries += 1;
            match Self::start_once(n) {
                Err(e) if tries < 3 && lost_a_port_race(&e) => continue,
                done => return done,
            }
        }
    }

    fn start_once(n: usize) -> Result<TestingCluster> {
        let mut ports = Vec::new();
        for _ in 0..n {
            ports.push((free_port()?, free_port()?, free_port()?));
        }
        let servers: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, quorum, election))| {
                format!("server.{}=127.0.0.1:{quorum}:{election}", i + 1)
            })
            .collect();
        let mut nodes = Vec::new();
        for (i, (client, _, _)) in ports.iter().enumerate() {
            nodes.push(Mutex::new(Node::create(NodeConfig {
                client_port: *client,
                quorum: Some((i as u32 + 1, servers.clone())),
                secure_port: None,
            })?));
        }
        let cluster = TestingCluster { nodes };
        for node in &cluster.nodes {
            node.lock().spawn()?;
        }
        cluster.wait_for_quorum(STARTUP_TIMEOUT)?;
        Ok(cluster)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a cluster has at least one member.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...` in member order.
    pub fn connect_string(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.lock().client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The client port of member `i`.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].lock().client_port
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

    /// Starts member `i` again (same ports, same data); does not wait for it to join.
    pub fn restart(&self, i: usize) -> Result<()> {
        self.nodes[i].lock().spawn()
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
                            "--- member on port {}:\n{}",
                            n.client_port,
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
