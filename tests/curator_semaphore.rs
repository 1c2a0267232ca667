//! Curator 5.4's semaphore tests that stop the server under the recipe
//! (`TestInterProcessSemaphore.testAcquireAfterLostServer`,
//! `TestInterProcessSemaphoreCluster.testKilledServerWithEnsembleProvider`), ported to our API
//! and run on real ZooKeeper servers, plus a timed acquire during a link outage. Each cycle
//! repeats the fault several times: the races they found lost about one run in two.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{eventually, wait_for_session};
use zk_locks::client::zookeeper::{ZkOptions, ZookeeperClient};
use zk_locks::client::{CreateMode, Stat, Watcher, ZkResult};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, InterProcessSemaphoreV2, LockState};
use zk_locks::session::Session;
use zk_locks::testing::{FaultProxy, TestingCluster, TestingServer};
use zk_locks::{ConnectionState, SharedClient, ZkClient};

/// Long enough for any one step on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(30);
/// How long a test thread holds a lease: the work it was granted for.
const WORK: Duration = Duration::from_millis(20);

fn connect(connect_string: &str, session_timeout: Duration) -> Arc<ZookeeperClient> {
    ZookeeperClient::connect_with(
        ZkOptions::new(connect_string)
            .session_timeout(session_timeout)
            .connect_timeout(PATIENCE),
    )
    .expect("connect")
}

/// Blocks until the client's loss count passed `losses` and it is connected again.
fn wait_for_new_session(client: &dyn ZkClient, losses: u64) {
    wait_for_session(client, PATIENCE, "a new session", |s| {
        s.losses > losses && s.state.is_connected()
    });
}

/// Blocks until the client reports `Lost` (or has a higher loss count than `losses`).
fn wait_for_lost(client: &dyn ZkClient, losses: u64) {
    wait_for_session(client, PATIENCE, "the session lost", |s| {
        s.losses > losses || s.state == ConnectionState::Lost
    });
}

/// How long a contender keeps a lease.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// For `WORK`.
    Work,
    /// Until the lease is no longer `Held` (Curator's test holds until `SUSPENDED`/`LOST`).
    WhileHeld,
}

/// Threads that take and return one lease of a one-lease semaphore in a loop, each reporting
/// every grant on a channel, and counting how many hold a lease at once.
struct Contenders {
    stop: Arc<AtomicBool>,
    handles: Vec<thread::JoinHandle<()>>,
    grants: mpsc::Receiver<()>,
    most_holders: Arc<AtomicUsize>,
    /// Grants whose lease was already `Lost` when it was handed out: granted through a node
    /// of a lost session.
    lost_grants: Arc<AtomicUsize>,
}

impl Contenders {
    fn start(
        clients: &[SharedClient],
        threads_per_client: usize,
        path: &str,
        hold: Hold,
    ) -> Contenders {
        let stop = Arc::new(AtomicBool::new(false));
        let holders = Arc::new(AtomicUsize::new(0));
        let most_holders = Arc::new(AtomicUsize::new(0));
        let lost_grants = Arc::new(AtomicUsize::new(0));
        let (tx, grants) = mpsc::channel();
        let mut handles = Vec::new();
        for client in clients {
            for _ in 0..threads_per_client {
                let (client, stop, tx, path) =
                    (client.clone(), stop.clone(), tx.clone(), path.to_string());
                let (holders, most_holders, lost_grants) =
                    (holders.clone(), most_holders.clone(), lost_grants.clone());
                handles.push(thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let semaphore = InterProcessSemaphoreV2::new(client.clone(), &path, 1)
                            .expect("semaphore");
                        match semaphore.acquire_timeout(PATIENCE) {
                            Ok(Some(lease)) => {
                                if lease.state() == LockState::Lost {
                                    lost_grants.fetch_add(1, Ordering::SeqCst);
                                }
                                let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                                most_holders.fetch_max(now, Ordering::SeqCst);
                                let _ = tx.send(());
                                match hold {
                                    Hold::Work => thread::sleep(WORK),
                                    Hold::WhileHeld => {
                                        lease.held_node().wait_while_held(Some(WORK * 10));
                                    }
                                }
                                holders.fetch_sub(1, Ordering::SeqCst);
                                drop(lease);
                            }
                            Ok(None) => {}
                            // Connection trouble while the server is down: try again.
                            Err(_) => {
                                let s = client.session().snapshot();
                                client
                                    .session()
                                    .wait_for_change(s.epoch, Some(Instant::now() + WORK));
                            }
                        }
                    }
                }));
            }
        }
        Contenders {
            stop,
            handles,
            grants,
            most_holders,
            lost_grants,
        }
    }

    /// Waits for `n` more grants, each within `PATIENCE`.
    fn expect_grants(&self, n: usize, what: &str) {
        for i in 0..n {
            if self.grants.recv_timeout(PATIENCE).is_err() {
                panic!("{what}: only {i} of {n} grants; the semaphore is stuck");
            }
        }
    }

    fn drain(&self) {
        while self.grants.try_recv().is_ok() {}
    }

    /// Stops the threads; asserts that no grant went through a node of a lost session.
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles {
            h.join().unwrap();
        }
        assert_eq!(
            self.lost_grants.load(Ordering::SeqCst),
            0,
            "leases granted through a node of a lost session"
        );
    }
}

/// A client that, when armed, stops the next lease listing before it is sent until released,
/// then reports how it went: Curator's `debugAcquireLatch` / `debugFailedGetChildrenLatch`.
struct GatedClient {
    inner: Arc<ZookeeperClient>,
    armed: AtomicBool,
    arrived: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
    outcome: Mutex<mpsc::Sender<bool>>,
}

impl ZkClient for GatedClient {
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        self.inner.create(path, data, mode)
    }
    fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()> {
        self.inner.delete(path, version)
    }
    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        self.inner.exists(path)
    }
    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
        self.inner.get_data(path, watcher)
    }
    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
        if !(path.ends_with("/leases") && self.armed.swap(false, Ordering::SeqCst)) {
            return self.inner.get_children(path, watcher);
        }
        let _ = self.arrived.lock().unwrap().send(());
        let _ = self.release.lock().unwrap().recv();
        let result = self.inner.get_children(path, watcher);
        let _ = self.outcome.lock().unwrap().send(result.is_ok());
        result
    }
    fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
        self.inner.set_data(path, data, version)
    }
    fn session(&self) -> &Session {
        self.inner.session()
    }
    fn close(&self) {
        self.inner.close()
    }
}

/// `testAcquireAfterLostServer` (CURATOR-335): ten threads share one client on a one-lease
/// semaphore. One admitted thread has created its lease and is held before listing the leases;
/// the server is stopped until the client reports `Lost`; the held listing then fails; the
/// server is restarted, and still lists the old session's nodes until it expires them. Every
/// thread must get leases again: nothing of the lost session may count as ours (admission or
/// grant).
#[test]
fn acquire_after_lost_server() {
    if !zk_locks::testing::require_server() {
        return;
    }
    let server = TestingServer::start().expect("server");
    let inner = connect(&server.connect_string(), Duration::from_secs(2));
    let (arrived_tx, arrived) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let (outcome_tx, outcome) = mpsc::channel();
    let client = Arc::new(GatedClient {
        inner: inner.clone(),
        armed: AtomicBool::new(true),
        arrived: Mutex::new(arrived_tx),
        release: Mutex::new(release_rx),
        outcome: Mutex::new(outcome_tx),
    });
    let shared: SharedClient = client.clone();
    let contenders = Contenders::start(&[shared], 10, "/test", Hold::Work);
    for cycle in 0..3 {
        arrived
            .recv_timeout(PATIENCE)
            .expect("a lease listing held");
        let losses = inner.session().snapshot().losses;
        server.stop();
        wait_for_lost(inner.as_ref(), losses);
        release.send(()).unwrap();
        let listed = outcome
            .recv_timeout(PATIENCE)
            .expect("the held listing ran");
        assert!(!listed, "the listing succeeded with the server down");
        server.restart().expect("restart");
        wait_for_new_session(inner.as_ref(), losses);
        contenders.drain();
        contenders.expect_grants(10, &format!("cycle {cycle}"));
        client.armed.store(true, Ordering::SeqCst);
    }
    // The last armed gate may hold a thread: let it go.
    client.armed.store(false, Ordering::SeqCst);
    let _ = release.send(());
    contenders.stop();
}

/// `testKilledServerWithEnsembleProvider`: ten clients (two threads each), each with its own session, on a
/// one-lease semaphore over a three-server ensemble; every server is killed, then all come
/// back (with their data). Grants must resume.
#[test]
fn killed_ensemble_semaphore_resumes() {
    if !zk_locks::testing::require_server() {
        return;
    }
    let cluster = TestingCluster::start(3).expect("cluster");
    let clients: Vec<Arc<ZookeeperClient>> = (0..10)
        .map(|_| connect(&cluster.connect_string(), Duration::from_secs(3)))
        .collect();
    let shared: Vec<SharedClient> = clients.iter().map(|c| c.clone() as SharedClient).collect();
    let contenders = Contenders::start(&shared, 2, "/foo/bar/lock", Hold::WhileHeld);
    contenders.expect_grants(10, "before any fault");
    for cycle in 0..2 {
        let losses: Vec<u64> = clients
            .iter()
            .map(|c| c.session().snapshot().losses)
            .collect();
        for i in 0..cluster.len() {
            cluster.kill(i);
        }
        for (c, l) in clients.iter().zip(&losses) {
            wait_for_lost(c.as_ref(), *l);
        }
        for i in 0..cluster.len() {
            cluster.restart(i).expect("restart");
        }
        cluster.wait_for_quorum(PATIENCE).expect("quorum");
        contenders.drain();
        contenders.expect_grants(10, &format!("cycle {cycle}"));
    }
    assert_eq!(
        contenders.most_holders.load(Ordering::SeqCst),
        1,
        "two held leases of a one-lease semaphore at once"
    );
    contenders.stop();
}

/// A timed acquire (mutex, then semaphore) whose link freezes, or is cut and refused, while
/// it waits returns by its deadline plus one call timeout (with slack for a loaded machine);
/// its nodes are deleted once the link is back.
#[test]
fn timed_acquire_returns_by_its_deadline_during_an_outage() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let call_timeout = Duration::from_secs(2);
    for semaphore in [false, true] {
        for freeze in [true, false] {
            let what = format!("semaphore={semaphore} freeze={freeze}");
            let path = format!("{}/lock", common::unique_root("outage"));
            // Where the contenders' nodes are, and how many each side leaves there.
            let dirs: Vec<String> = match semaphore {
                false => vec![path.clone()],
                true => vec![format!("{path}/leases"), format!("{path}/locks")],
            };
            let count = |c: &dyn ZkClient| -> usize {
                dirs.iter().map(|d| common::children(c, d).len()).sum()
            };
            let holder = connect(&server.connect_string(), Duration::from_secs(10));
            let proxy = FaultProxy::start(server.addr()).expect("proxy");
            let client = ZookeeperClient::connect_with(
                ZkOptions::new(proxy.connect_string())
                    .session_timeout(Duration::from_secs(10))
                    .call_timeout(call_timeout),
            )
            .expect("connect");
            let held = InterProcessSemaphoreV2::new(holder.clone(), &path, 1).unwrap();
            let held_mutex = InterProcessMutex::new(holder.clone(), &path).unwrap();
            let waiter_semaphore = InterProcessSemaphoreV2::new(client.clone(), &path, 1).unwrap();
            let waiter_mutex = InterProcessMutex::new(client.clone(), &path).unwrap();
            let _lease = match semaphore {
                true => Some(held.acquire().unwrap()),
                false => {
                    held_mutex.acquire().unwrap();
                    None
                }
            };
            let holder_nodes = count(holder.as_ref());
            let timeout = Duration::from_millis(1500);
            thread::scope(|s| {
                let start = Instant::now();
                let (waiter_semaphore, waiter_mutex) = (&waiter_semaphore, &waiter_mutex);
                let t = s.spawn(move || {
                    let got = match semaphore {
                        true => waiter_semaphore
                            .acquire_timeout(timeout)
                            .map(|l| l.is_some()),
                        false => waiter_mutex.acquire_timeout(timeout),
                    };
                    (got, start.elapsed())
                });
                eventually(PATIENCE, "waiter queued", || {
                    count(holder.as_ref()) > holder_nodes
                });
                if freeze {
                    proxy.freeze();
                } else {
                    proxy.refuse(true);
                    proxy.cut();
                }
                let (got, took) = t.join().unwrap();
                assert!(
                    took < timeout + call_timeout + Duration::from_secs(2),
                    "{what}: returned after {took:?}"
                );
                assert!(!got.unwrap_or(false), "{what}: acquired");
            });
            if freeze {
                proxy.thaw();
            } else {
                proxy.refuse(false);
            }
            eventually(
                PATIENCE,
                &format!("{what}: the waiter's nodes deleted"),
                || count(holder.as_ref()) == holder_nodes,
            );
            client.close();
            holder.close();
        }
    }
}
