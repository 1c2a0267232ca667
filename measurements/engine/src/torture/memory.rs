//! The in-memory environment: exact, fast faults on one [`MemoryEnsemble`](zk_locks::client::memory::MemoryEnsemble).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::config::{pause, Env, FaultKind, NodeOracle};
use super::timeline::FaultLog;
use zk_locks::client::memory::{Fault, FaultTiming, MemoryClient, MemoryEnsemble, Op};
use zk_locks::{ConnectionState, SharedClient, ZkClient};

/// The in-memory ensemble: exact, fast faults. A "server restart" drops every session's link
/// at once (each reconnects to the same session), which is what a client sees of it.
pub struct MemoryEnv {
    pub(super) ensemble: MemoryEnsemble,
    pub(super) clients: Vec<Arc<MemoryClient>>,
    pub(super) late_loss_report: Duration,
}

impl MemoryEnv {
    /// `sessions` clients on a fresh ensemble.
    pub fn new(sessions: usize) -> MemoryEnv {
        let ensemble = MemoryEnsemble::new();
        let clients = (0..sessions).map(|_| ensemble.connect()).collect();
        MemoryEnv {
            ensemble,
            clients,
            late_loss_report: Duration::ZERO,
        }
    }

    /// A victim of a forced expiry hears of it `delay` after the server ended its session (and
    /// other clients saw its nodes go), as a client of a real server does a network trip
    /// later. Without it the gap is only as long as the scheduler makes it.
    pub fn with_late_loss_reports(mut self, delay: Duration) -> MemoryEnv {
        self.late_loss_report = delay;
        self
    }
}

/// Expires `c`'s session; its client reports the loss `late` after the server's change.
fn expire(c: &MemoryClient, late: Duration) {
    if !late.is_zero() {
        // A watch of the victim's session is discarded by the expiry and dropped after the
        // server's change, before the client reports it: its drop is the delay.
        let delay = DelayOnDrop(late);
        let _ = c.get_data(
            "/",
            Some(Box::new(move |_| {
                let _keep = &delay;
            })),
        );
    }
    c.expire();
}

/// Sleeps for its duration when dropped.
struct DelayOnDrop(Duration);

impl Drop for DelayOnDrop {
    fn drop(&mut self) {
        pause(self.0);
    }
}

impl Env for MemoryEnv {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn clients(&self) -> Vec<SharedClient> {
        self.clients
            .iter()
            .map(|c| c.clone() as SharedClient)
            .collect()
    }

    fn inject(&self, kind: FaultKind, victim: usize, log: &FaultLog) -> Result<(), String> {
        let c = &self.clients[victim];
        let late = self.late_loss_report;
        match kind {
            FaultKind::Cut | FaultKind::CountBlip => {
                c.suspend();
                c.resume();
            }
            FaultKind::Freeze => {
                // The link goes down, the server expires the session meanwhile, and the client
                // learns it when the link comes back.
                c.suspend();
                pause(Duration::from_millis(20));
                c.expire();
                c.resume();
            }
            FaultKind::Expire | FaultKind::DowngradeExpiry => expire(c, late),
            FaultKind::DowngradeSilentSession => {
                // The next request runs in a new session, unreported: make one now.
                c.inject(Fault {
                    op: None,
                    path_prefix: None,
                    timing: FaultTiming::InNewSession,
                });
                let _ = c.exists("/");
            }
            FaultKind::CreateLookupLoss => {
                let (fired, client) = (AtomicBool::new(false), Arc::downgrade(c));
                c.on_request(Some(Box::new(move |op, path| {
                    let Some((dir, _)) = path.rsplit_once('/') else {
                        return;
                    };
                    if op == Op::Create && path.contains("/_c_") && !fired.swap(true, SeqCst) {
                        if let Some(c) = client.upgrade() {
                            c.inject(Fault::after(Op::Create).on_path(path));
                            c.inject(Fault::before(Op::GetChildren).on_path(dir));
                        }
                    }
                })));
            }
            FaultKind::AdmissionLeaseLoss => {
                let (fired, client) = (AtomicBool::new(false), Arc::downgrade(c));
                let log = log.clone();
                c.on_request(Some(Box::new(move |op, path| {
                    if op == Op::Create && path.contains("/leases/") && !fired.swap(true, SeqCst) {
                        if let Some(c) = client.upgrade() {
                            // Expired from another thread, as the server would do it.
                            log.record(kind, Some(victim), true, || {
                                let _ = thread::spawn(move || expire(&c, late)).join();
                            });
                        }
                    }
                })));
            }
            FaultKind::MemberPartition => {
                return Err("needs a real cluster in network namespaces".into())
            }
            FaultKind::ServerRestart | FaultKind::LeaderRestart => {
                for c in &self.clients {
                    c.suspend();
                }
                pause(Duration::from_millis(20));
                for c in &self.clients {
                    c.resume();
                }
            }
        }
        if c.session().state() == ConnectionState::Closed {
            return Err("client closed".into());
        }
        Ok(())
    }

    fn heal(&self) {
        for c in &self.clients {
            c.resume();
        }
    }

    fn nodes_under(&self, dirs: &[String]) -> Vec<String> {
        dirs.iter()
            .flat_map(|d| {
                let children = self.ensemble.children(d).unwrap_or_default();
                children.into_iter().map(move |c| format!("{d}/{c}"))
            })
            .collect()
    }

    fn watches_under(&self, _prefix: &str) -> usize {
        self.ensemble.watch_count()
    }

    fn total_watches(&self) -> usize {
        self.ensemble.watch_count()
    }

    fn close_clients(&self) {
        for c in &self.clients {
            c.close();
        }
    }

    fn session_timeout(&self) -> Duration {
        Duration::from_secs(1)
    }

    /// The memory ensemble does not list watches by path: what waiters can be watching is
    /// described instead, every contender node under `prefix` with its owner, and the
    /// sessions of the clients.
    fn describe_watches_under(&self, prefix: &str) -> Vec<String> {
        let mut out = Vec::new();
        for recipe in super::config::Recipe::ALL {
            for dir in recipe.node_dirs(prefix) {
                for child in self.ensemble.children(&dir).unwrap_or_default() {
                    let path = format!("{dir}/{child}");
                    let owner = self.ensemble.node(&path).map(|(_, s)| s.ephemeral_owner);
                    out.push(format!("{path} owner 0x{:x}", owner.unwrap_or(0)));
                }
            }
        }
        let sessions: Vec<String> = self
            .clients
            .iter()
            .map(|c| format!("{:?}", c.session().snapshot()))
            .collect();
        out.push(format!("sessions: {}", sessions.join("; ")));
        out
    }

    fn node_oracle(&self) -> Option<NodeOracle> {
        let ensemble = self.ensemble.clone();
        Some(Arc::new(move |path: &str| ensemble.node(path).is_some()))
    }

    fn report_session_change(&self, victim: usize) {
        self.clients[victim].report_session_change();
    }
}
