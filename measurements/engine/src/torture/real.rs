//! The real environment: a 3-node cluster, every session reaching every member through
//! its own fault proxy.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::config::{pause, Env, FaultKind};
use super::timeline::FaultLog;
use zk_locks::client::native::NativeClient;
use zk_locks::testing::harness::{watches, ClientKind};
use zk_locks::testing::{FaultProxy, TestingCluster};
use zk_locks::{SharedClient, ZkClient};

/// A 3-node cluster; every session reaches every member through its own [`FaultProxy`], so
/// a cut, freeze or expiry hits one session only, and server faults hit every session.
pub struct RealEnv {
    pub(super) cluster: TestingCluster,
    pub(super) proxies: Vec<Vec<FaultProxy>>,
    pub(super) clients: Mutex<Vec<SharedClient>>,
    pub(super) client_kind: ClientKind,
    pub(super) session_timeout: Duration,
    pub(super) next_member: Mutex<usize>,
    pub(super) last_outage: Mutex<Duration>,
}

pub(super) fn member_addr(cluster: &TestingCluster, i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], cluster.port(i)))
}

impl RealEnv {
    /// Starts the cluster, the proxies and `sessions` clients of `kind`.
    pub fn start(
        sessions: usize,
        session_timeout: Duration,
        kind: ClientKind,
    ) -> zk_locks::Result<RealEnv> {
        let cluster = TestingCluster::start(3)?;
        let mut proxies = Vec::new();
        let mut clients = Vec::new();
        for s in 0..sessions {
            let mine = (0..cluster.len())
                .map(|i| FaultProxy::start(member_addr(&cluster, i)))
                .collect::<zk_locks::Result<Vec<_>>>()?;
            // Rotated so the sessions' first choices spread over the members.
            let n = mine.len();
            let hosts: Vec<String> = (0..n).map(|k| mine[(k + s) % n].connect_string()).collect();
            let client =
                kind.connect_within(&hosts.join(","), session_timeout, Duration::from_secs(30))?;
            proxies.push(mine);
            clients.push(client);
        }
        Ok(RealEnv {
            cluster,
            proxies,
            clients: Mutex::new(clients),
            client_kind: kind,
            session_timeout,
            next_member: Mutex::new(0),
            last_outage: Mutex::new(Duration::ZERO),
        })
    }

    /// The cluster (for four-letter words in tests).
    pub fn cluster(&self) -> &TestingCluster {
        &self.cluster
    }

    pub(super) fn client(&self, i: usize) -> SharedClient {
        self.clients.lock()[i].clone()
    }

    /// Waits (bounded) until `client` has reported a session loss since `losses`.
    pub(super) fn wait_for_loss(
        &self,
        client: &dyn ZkClient,
        losses: u64,
        patience: Duration,
    ) -> bool {
        let deadline = Instant::now() + patience;
        loop {
            let s = client.session().snapshot();
            if s.losses > losses {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            client.session().wait_for_change(s.epoch, Some(deadline));
        }
    }

    pub(super) fn restart_member(&self, i: usize) -> Result<(), String> {
        self.cluster.kill(i);
        self.cluster.restart(i).map_err(|e| e.to_string())?;
        self.cluster
            .wait_for_quorum(Duration::from_secs(90))
            .map_err(|e| e.to_string())
    }
}

impl Env for RealEnv {
    fn name(&self) -> &'static str {
        match self.client_kind {
            ClientKind::Native => "native-3-node",
            ClientKind::Crate => "crate-3-node",
        }
    }

    fn clients(&self) -> Vec<SharedClient> {
        self.clients.lock().clone()
    }

    fn inject(&self, kind: FaultKind, victim: usize, _log: &FaultLog) -> Result<(), String> {
        *self.last_outage.lock() = Duration::ZERO;
        let proxies = &self.proxies[victim];
        let client = self.client(victim);
        match kind {
            FaultKind::Cut | FaultKind::CountBlip => {
                proxies.iter().for_each(FaultProxy::cut);
                Ok(())
            }
            FaultKind::Freeze => {
                let losses = client.session().snapshot().losses;
                let started = Instant::now();
                proxies.iter().for_each(FaultProxy::freeze);
                // Frozen until the client gives its session up, and at least 1.5 session
                // timeouts, so the server expires it as well.
                let noticed = self.wait_for_loss(&client, losses, self.session_timeout * 4);
                let min = self.session_timeout * 3 / 2;
                pause(min.saturating_sub(started.elapsed()));
                proxies.iter().for_each(FaultProxy::thaw);
                if noticed {
                    Ok(())
                } else {
                    Err("the frozen client never reported its session lost".into())
                }
            }
            FaultKind::Expire | FaultKind::DowngradeExpiry => {
                let snapshot = client.session().snapshot();
                let id = snapshot.session_id.ok_or("no session id")?;
                let proxy = proxies
                    .iter()
                    .find(|p| p.session_ids().contains(&id) && p.session_id() == Some(id))
                    .ok_or("no open connection of the current session")?;
                proxy.expire_session().map_err(|e| e.to_string())?;
                if self.wait_for_loss(&client, snapshot.losses, self.session_timeout * 4) {
                    Ok(())
                } else {
                    Err(format!(
                        "session 0x{id:x} expired but the client never noticed"
                    ))
                }
            }
            FaultKind::ServerRestart => {
                let leader = self.cluster.leader();
                let i = {
                    let mut next = self.next_member.lock();
                    let mut i = *next % self.cluster.len();
                    if Some(i) == leader {
                        i = (i + 1) % self.cluster.len();
                    }
                    *next = i + 1;
                    i
                };
                self.restart_member(i)
            }
            FaultKind::LeaderRestart => {
                let leader = self.cluster.leader().ok_or("no leader")?;
                let killed = Instant::now();
                self.cluster.kill(leader);
                // Let the other two elect a leader before the old one comes back.
                let deadline = Instant::now() + Duration::from_secs(60);
                while self.cluster.leader().is_none_or(|l| l == leader) {
                    if Instant::now() >= deadline {
                        break;
                    }
                    pause(Duration::from_millis(100));
                }
                *self.last_outage.lock() = killed.elapsed();
                self.cluster.restart(leader).map_err(|e| e.to_string())?;
                self.cluster
                    .wait_for_quorum(Duration::from_secs(90))
                    .map_err(|e| e.to_string())
            }
            FaultKind::CreateLookupLoss
            | FaultKind::AdmissionLeaseLoss
            | FaultKind::DowngradeSilentSession => {
                Err("needs request-level injection (memory backend only)".into())
            }
        }
    }

    fn heal(&self) {
        for p in self.proxies.iter().flatten() {
            p.thaw();
            p.refuse(false);
        }
    }

    fn nodes_under(&self, dirs: &[String]) -> Vec<String> {
        // A fresh observer each time, straight to the members: the proxies are the clients'.
        let observer =
            match NativeClient::connect(&self.cluster.connect_string(), Duration::from_secs(10)) {
                Ok(o) => o,
                Err(e) => return vec![format!("<observer could not connect: {e}>")],
            };
        let mut left = Vec::new();
        for d in dirs {
            match observer.get_children(d, None) {
                Ok(children) => left.extend(children.into_iter().map(|c| format!("{d}/{c}"))),
                Err(zk_locks::ZkError::NoNode) => {}
                Err(e) => left.push(format!("<listing {d} failed: {e}>")),
            }
        }
        observer.close();
        left
    }

    fn watches_under(&self, prefix: &str) -> usize {
        (0..self.cluster.len())
            .map(|i| {
                let out = self.cluster.four_letter(i, "wchp").unwrap_or_default();
                watches::watches_under(&out, prefix)
            })
            .sum()
    }

    fn total_watches(&self) -> usize {
        (0..self.cluster.len())
            .map(|i| {
                let out = self.cluster.four_letter(i, "wchs").unwrap_or_default();
                watches::total_watches(&out)
            })
            .sum()
    }

    fn close_clients(&self) {
        for c in self.clients.lock().iter() {
            c.close();
        }
    }

    fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    fn last_outage(&self) -> Duration {
        *self.last_outage.lock()
    }

    fn describe_watches_under(&self, prefix: &str) -> Vec<String> {
        let observer =
            match NativeClient::connect(&self.cluster.connect_string(), Duration::from_secs(10)) {
                Ok(o) => o,
                Err(e) => return vec![format!("<observer could not connect: {e}>")],
            };
        let sessions: Vec<String> = self
            .clients
            .lock()
            .iter()
            .map(|c| format!("{:?}", c.session().snapshot()))
            .collect();
        let mut out = Vec::new();
        for i in 0..self.cluster.len() {
            let wchp = self.cluster.four_letter(i, "wchp").unwrap_or_default();
            for (p, session) in watches::watches_in(&wchp) {
                if !watches::is_under(p, prefix) {
                    continue;
                }
                let node = match observer.exists(p) {
                    Ok(Some(stat)) => format!(
                        "exists (owner 0x{:x}, children {}, mzxid 0x{:x}, pzxid 0x{:x})",
                        stat.ephemeral_owner, stat.num_children, stat.mzxid, stat.pzxid
                    ),
                    Ok(None) => "gone".into(),
                    Err(e) => format!("<exists failed: {e}>"),
                };
                out.push(format!("server {i}: {p} watched by {session}: {node}"));
            }
        }
        out.push(format!("sessions: {}", sessions.join("; ")));
        observer.close();
        out
    }
}
