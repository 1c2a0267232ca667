//! The real environment: a 3-node cluster, every session reaching every member through
//! its own fault proxy; optionally each member in its own network namespace, so that a member
//! can be cut off from the others ([`FaultKind::MemberPartition`]).

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
    /// Members restarted because they exited on their own (see [`RealEnv::serve_again`]).
    pub(super) member_crashes: Mutex<u64>,
}

impl RealEnv {
    /// Starts the cluster on loopback, the proxies and `sessions` clients of `kind`.
    pub fn start(
        sessions: usize,
        session_timeout: Duration,
        kind: ClientKind,
    ) -> zk_locks::Result<RealEnv> {
        Self::start_with(sessions, session_timeout, kind, false)
    }

    /// [`RealEnv::start`], with each member in its own network namespace when `namespaces`
    /// (needed by [`FaultKind::MemberPartition`]; see
    /// [`partition::available`](zk_locks::testing::partition::available)). The servers'
    /// clock is the test kit's default either way (tickTime 500 ms, syncLimit 10); they grant
    /// sessions of 1 s (two ticks) to 60 s, the range the torture's command line takes.
    pub fn start_with(
        sessions: usize,
        session_timeout: Duration,
        kind: ClientKind,
        namespaces: bool,
    ) -> zk_locks::Result<RealEnv> {
        let cluster = TestingCluster::builder(3)
            .max_session_timeout(Duration::from_secs(60))
            .network_namespaces(namespaces)
            .start()?;
        let mut proxies = Vec::new();
        let mut clients = Vec::new();
        for s in 0..sessions {
            let mine = (0..cluster.len())
                .map(|i| FaultProxy::start(cluster.address(i)))
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
            member_crashes: Mutex::new(0),
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

    /// Restarts every member that exited on its own, counting it in `member_crashes`. ZooKeeper
    /// 3.8.0's followers can: an NPE in `Learner.syncWithLeader` while they sync with a new
    /// leader (ZOOKEEPER-4394), seen here after restarts and elections. A server's crash is not
    /// a fault of the client under torture; left alone it would make every later wait for the
    /// quorum fail (a member that died), and an ensemble of two lose its quorum at the next
    /// leader kill.
    fn restart_crashed(&self) -> zk_locks::Result<()> {
        for i in 0..self.cluster.len() {
            if self.cluster.has_died(i) {
                *self.member_crashes.lock() += 1;
                self.cluster.restart(i)?;
            }
        }
        Ok(())
    }

    /// Waits until every member serves and one leads, restarting those that crash meanwhile
    /// ([`RealEnv::restart_crashed`]).
    pub(super) fn serve_again(&self) -> Result<(), String> {
        for _ in 0..3 {
            self.restart_crashed().map_err(|e| e.to_string())?;
            match self.cluster.wait_for_quorum(Duration::from_secs(90)) {
                Ok(()) => return Ok(()),
                Err(_) if (0..self.cluster.len()).any(|i| self.cluster.has_died(i)) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("members crashed three times in a row".into())
    }

    /// The member session `victim` is connected to, as the members' `cons` tell.
    fn member_of(&self, victim: usize) -> Option<usize> {
        let id = self.client(victim).session().snapshot().session_id?;
        let sid = format!("sid=0x{id:x}");
        (0..self.cluster.len()).find(|&i| {
            self.cluster
                .four_letter(i, "cons")
                .is_ok_and(|cons| cons.contains(&sid))
        })
    }

    /// Cuts off the follower session `victim` is on (a victim on the leader is first moved
    /// to a follower: its link to the leader cut, and refused until it is elsewhere) for 1.5
    /// session timeouts, then heals it and waits for the quorum. Had the session stayed on the
    /// cut member, the leader would have expired it by the heal (it hears no touch of it),
    /// while the member, still short of syncLimit × tickTime (5 s) without the leader, goes on
    /// answering its pings: the session must move to the majority side by itself.
    fn partition_member(&self, victim: usize) -> Result<(), String> {
        let patience = self.session_timeout * 4;
        let on = |pick: &dyn Fn(usize) -> bool| {
            let deadline = Instant::now() + patience;
            loop {
                match self.member_of(victim) {
                    Some(m) if pick(m) => return Ok(m),
                    _ if Instant::now() >= deadline => {
                        return Err("the victim's session is on no member (cons)".to_string())
                    }
                    // Polling the members' `cons`: nothing to wait on.
                    _ => pause(Duration::from_millis(100)),
                }
            }
        };
        let leader = self.cluster.leader().ok_or("no leader")?;
        let mut member = on(&|_| true)?;
        if member == leader {
            let to_leader = &self.proxies[victim][leader];
            to_leader.refuse(true);
            to_leader.cut();
            let moved = on(&|m| m != leader);
            to_leader.refuse(false);
            member = moved?;
        }
        self.cluster.cut_off(member).map_err(|e| e.to_string())?;
        pause(self.session_timeout * 3 / 2);
        self.cluster.heal(member).map_err(|e| e.to_string())?;
        self.serve_again()
    }

    pub(super) fn restart_member(&self, i: usize) -> Result<(), String> {
        self.cluster.kill(i);
        self.cluster.restart(i).map_err(|e| e.to_string())?;
        self.serve_again()
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
        // Every fault starts from a whole ensemble.
        self.serve_again()?;
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
                    // The third member may have crashed: two of three elect no leader.
                    self.restart_crashed().map_err(|e| e.to_string())?;
                    pause(Duration::from_millis(100));
                }
                *self.last_outage.lock() = killed.elapsed();
                self.cluster.restart(leader).map_err(|e| e.to_string())?;
                self.serve_again()
            }
            FaultKind::MemberPartition => self.partition_member(victim),
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
        for i in 0..self.cluster.len() {
            // Fails only on a cluster without namespaces, where no member can be cut off.
            let _ = self.cluster.heal(i);
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

    fn member_crashes(&self) -> u64 {
        *self.member_crashes.lock()
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
