//! Releasing a hold that is `Lost` does not wait for the link: its session is over, so its
//! node is gone or (if the server has not expired the session yet, or the node lives in a
//! session the client has not reported) is deleted in the background once the link is back.
//! A hold that is only `Suspect` still waits for the link and deletes its node itself.
//!
//! Every recipe is covered on the in-memory ensemble (a client that gives up on its session
//! while its link is down, as the native client does after 4/3 of the session timeout), and
//! the mutex on a real server through the native client behind a frozen `FaultProxy`. The
//! retry policies are long (100 s and more of retries): the code that waited through them
//! cannot answer within [`ANSWER_WITHIN`], nor answer `Ok` (it gave up with `ConnectionLoss`).

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::client::{EventType, Watcher};
use zk_locks::locks::{
    InterProcessLock, InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreMutex, InterProcessSemaphoreV2,
};
use zk_locks::retry::{RetryNTimes, RetryPolicy};
use zk_locks::session::ConnectionState;
use zk_locks::testing::harness::reach_state;
use zk_locks::{LockState, SharedClient, ZkClient, ZkError};

/// A generous bound on a release that must not wait for the link.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);
/// How long a test waits for a state it expects.
const PATIENCE: Duration = Duration::from_secs(20);

/// 1000 retries 100 ms apart: with the waits for a connection between them, many minutes.
fn long_retries() -> Arc<dyn RetryPolicy> {
    Arc::new(RetryNTimes::new(1000, Duration::from_millis(100)))
}

/// A long retry policy that says so (once) when it is first asked for a retry.
#[derive(Debug)]
struct FirstRetrySignal(Mutex<Option<Sender<()>>>);

impl FirstRetrySignal {
    fn new() -> (Arc<FirstRetrySignal>, Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        (Arc::new(FirstRetrySignal(Mutex::new(Some(tx)))), rx)
    }
}

impl RetryPolicy for FirstRetrySignal {
    fn next_retry(&self, attempt: u32, elapsed: Duration) -> Option<Duration> {
        if let Some(tx) = self.0.lock().unwrap().take() {
            let _ = tx.send(());
        }
        long_retries().next_retry(attempt, elapsed)
    }
}

/// A hold on its own thread (guards stay on the thread that took them): it reports its node
/// paths, releases when told, and reports the release's answer.
struct Holder {
    paths: Vec<String>,
    go: Sender<()>,
    answer: Receiver<zk_locks::Result<()>>,
}

impl Holder {
    /// Runs `hold` on a new thread of `scope`: `hold` takes the hold, calls `ready` with its
    /// node paths, and releases when `ready` returns.
    fn start<'s, F>(scope: &'s thread::Scope<'s, '_>, hold: F) -> Holder
    where
        F: FnOnce(&dyn Fn(Vec<String>)) -> zk_locks::Result<()> + Send + 's,
    {
        let (paths_tx, paths_rx) = mpsc::channel();
        let (go, go_rx) = mpsc::channel::<()>();
        let (answer_tx, answer) = mpsc::channel();
        scope.spawn(move || {
            let ready = move |paths: Vec<String>| {
                paths_tx.send(paths).unwrap();
                let _ = go_rx.recv();
            };
            let _ = answer_tx.send(hold(&ready));
        });
        let paths = paths_rx.recv_timeout(PATIENCE).expect("the hold was taken");
        Holder { paths, go, answer }
    }

    /// Tells the holder to release now.
    fn release(&self) {
        self.go.send(()).unwrap();
    }

    fn answer_within(&self, bound: Duration) -> Result<zk_locks::Result<()>, RecvTimeoutError> {
        self.answer.recv_timeout(bound)
    }
}

/// Blocks until `path` is gone, seen by `observer` (a watch, not polling); false if it is
/// still there after `within`.
fn wait_until_deleted(observer: &SharedClient, path: &str, within: Duration) -> bool {
    let (tx, rx) = mpsc::channel();
    let watcher: Watcher = Box::new(move |e| {
        let _ = tx.send(e.event_type);
    });
    match observer.get_data(path, Some(watcher)) {
        Err(ZkError::NoNode) => true,
        Ok(_) => rx.recv_timeout(within) == Ok(EventType::NodeDeleted),
        Err(e) => panic!("watching {path}: {e}"),
    }
}

/// The recipes, each taking a hold through `client` and releasing it as its users do.
#[derive(Debug, Clone, Copy)]
enum Recipe {
    Mutex,
    ReadLock,
    WriteLock,
    SemaphoreLease,
    SemaphoreMutex,
    MultiLock,
}

const RECIPES: [Recipe; 6] = [
    Recipe::Mutex,
    Recipe::ReadLock,
    Recipe::WriteLock,
    Recipe::SemaphoreLease,
    Recipe::SemaphoreMutex,
    Recipe::MultiLock,
];

impl Recipe {
    /// Takes a hold at `path` through `client`, reports its paths (and the state its guard
    /// reports at release) to `ready`, then releases it: guard `unlock`, or `Lease::close`.
    fn hold(
        self,
        client: SharedClient,
        path: &str,
        ready: &dyn Fn(Vec<String>),
        state_at_release: &Sender<LockState>,
    ) -> zk_locks::Result<()> {
        fn by_guard<L: InterProcessLock>(
            lock: &L,
            ready: &dyn Fn(Vec<String>),
            state_at_release: &Sender<LockState>,
        ) -> zk_locks::Result<()> {
            let guard = lock.lock()?;
            ready(guard.nodes().iter().map(|n| n.path().to_string()).collect());
            let _ = state_at_release.send(guard.state());
            guard.unlock()
        }
        let mutex = |p: &str| {
            InterProcessMutex::new(client.clone(), p).map(|m| m.with_retry_policy(long_retries()))
        };
        match self {
            Recipe::Mutex => by_guard(&mutex(path)?, ready, state_at_release),
            Recipe::ReadLock => {
                let rw = InterProcessReadWriteLock::new(client, path)?;
                by_guard(rw.read_lock(), ready, state_at_release)
            }
            Recipe::WriteLock => {
                let rw = InterProcessReadWriteLock::new(client, path)?;
                by_guard(rw.write_lock(), ready, state_at_release)
            }
            Recipe::SemaphoreLease => {
                let sem = InterProcessSemaphoreV2::new(client, path, 1)?
                    .with_retry_policy(long_retries());
                let lease = sem.acquire()?;
                ready(vec![lease.node_path().to_string()]);
                let _ = state_at_release.send(lease.state());
                lease.close()
            }
            Recipe::SemaphoreMutex => by_guard(
                &InterProcessSemaphoreMutex::new(client, path)?,
                ready,
                state_at_release,
            ),
            Recipe::MultiLock => {
                let locks: Vec<Box<dyn InterProcessLock>> = vec![
                    Box::new(mutex(&format!("{path}/a"))?),
                    Box::new(mutex(&format!("{path}/b"))?),
                ];
                by_guard(&InterProcessMultiLock::new(locks)?, ready, state_at_release)
            }
        }
    }
}

/// The holder's client gives up on its session while its link is down; the server still
/// holds the session, so the hold's nodes are alive. The release returns `Ok` while the link
/// is still down; once the link is back the nodes are deleted (by the background delete).
/// Every recipe is tried; the failures are reported together.
#[test]
fn memory_lost_hold_releases_without_waiting_for_the_link() {
    let failures: Vec<String> = RECIPES
        .into_iter()
        .filter_map(|recipe| lost_hold_release(recipe).err())
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

fn lost_hold_release(recipe: Recipe) -> Result<(), String> {
    let ensemble = MemoryEnsemble::new();
    let (holder_client, observer) = (ensemble.connect(), ensemble.connect());
    let (state_tx, state_rx) = mpsc::channel();
    let shared: SharedClient = holder_client.clone();
    let observer: SharedClient = observer;
    thread::scope(|scope| {
        let holder = Holder::start(scope, |ready| {
            recipe.hold(shared, "/lost/lock", ready, &state_tx)
        });
        holder_client.suspend();
        holder_client.give_up_session();
        let alive = holder.paths.iter().all(|p| ensemble.node(p).is_some());
        holder.release();
        let state_at_release = state_rx.recv_timeout(PATIENCE);
        let answer = holder.answer_within(ANSWER_WITHIN);
        let state = holder_client.session().state();
        // The link comes back before any verdict: a release still waiting ends.
        holder_client.resume();
        let gone = holder
            .paths
            .iter()
            .all(|p| wait_until_deleted(&observer, p, PATIENCE));
        let verdict = (
            alive,
            state_at_release,
            matches!(answer, Ok(Ok(()))),
            state,
            gone,
        );
        if verdict == (true, Ok(LockState::Lost), true, ConnectionState::Lost, true) {
            Ok(())
        } else {
            Err(format!(
                "{recipe:?}: nodes alive {alive}, guard {:?}, release answered {answer:?} \
                 (client {state:?}), nodes gone after the link's return {gone}",
                verdict.1
            ))
        }
    })
}

/// A hold whose session expired on the server too (its nodes are gone): the release answers
/// `Ok` at once, link down or not.
#[test]
fn memory_expired_hold_releases_without_waiting_for_the_link() {
    let ensemble = MemoryEnsemble::new();
    let client = ensemble.connect();
    let shared: SharedClient = client.clone();
    let (state_tx, _state_rx) = mpsc::channel();
    thread::scope(|scope| {
        let holder = Holder::start(scope, |ready| {
            Recipe::Mutex.hold(shared, "/expired/lock", ready, &state_tx)
        });
        client.suspend();
        client.expire();
        client.give_up_session();
        assert!(ensemble.node(&holder.paths[0]).is_none());
        holder.release();
        let answer = holder.answer_within(ANSWER_WITHIN);
        client.resume();
        assert!(matches!(answer, Ok(Ok(()))), "{answer:?}");
    });
}

/// A release that started while the hold was only `Suspect` (retrying, waiting for the link)
/// returns once the client reports the session `Lost`, without waiting for the link; the node
/// is deleted once the link is back.
#[test]
fn memory_release_waiting_on_a_suspect_hold_returns_once_the_session_is_lost() {
    let ensemble = MemoryEnsemble::new();
    let (client, observer) = (ensemble.connect(), ensemble.connect());
    thread::scope(|scope| {
        let holder = release_while_suspended(scope, &client);
        client.give_up_session();
        let answer = holder.answer_within(ANSWER_WITHIN);
        let alive = ensemble.node(&holder.paths[0]).is_some();
        client.resume();
        assert!(matches!(answer, Ok(Ok(()))), "{answer:?}");
        assert!(alive, "the link was down all along: the node was alive");
        let observer: SharedClient = observer;
        assert!(wait_until_deleted(&observer, &holder.paths[0], PATIENCE));
    });
}

/// A hold that is only `Suspect` (the session may be alive, and its node with it) keeps its
/// release waiting for the link and deletes the node itself: gone when `unlock` returns.
#[test]
fn memory_suspect_hold_release_waits_for_the_link_and_deletes() {
    let ensemble = MemoryEnsemble::new();
    let client = ensemble.connect();
    thread::scope(|scope| {
        let holder = release_while_suspended(scope, &client);
        assert!(ensemble.node(&holder.paths[0]).is_some());
        client.resume();
        let answer = holder.answer_within(PATIENCE);
        assert!(matches!(answer, Ok(Ok(()))), "{answer:?}");
        assert!(ensemble.node(&holder.paths[0]).is_none());
    });
}

/// Starts a mutex holder on `client` at `/suspect/lock`, suspends the link and lets the holder
/// release: returns once that release has retried in the foreground (the hold is `Suspect`).
fn release_while_suspended<'s>(
    scope: &'s thread::Scope<'s, '_>,
    client: &Arc<MemoryClient>,
) -> Holder {
    let (policy, first_retry) = FirstRetrySignal::new();
    let shared: SharedClient = client.clone();
    let holder = Holder::start(scope, |ready| {
        let m = InterProcessMutex::new(shared, "/suspect/lock")?.with_retry_policy(policy);
        let guard = m.lock()?;
        ready(vec![guard.node_path().unwrap().to_string()]);
        guard.unlock()
    });
    client.suspend();
    holder.release();
    first_retry
        .recv_timeout(PATIENCE)
        .expect("a Suspect hold's release retries in the foreground");
    holder
}

/// The native client on a real server, its link frozen by a proxy until it reports the
/// session `Lost`: `unlock` answers `Ok` while the link is still frozen, and the lock is free
/// for another client once the link is back.
#[test]
fn native_lost_hold_releases_without_waiting_for_the_link() {
    use zk_locks::client::native::NativeClient;
    use zk_locks::testing::{shared_server, FaultProxy};
    let Some(server) = shared_server() else {
        return;
    };
    const SESSION: Duration = Duration::from_secs(2);
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = NativeClient::connect(&proxy.connect_string(), SESSION).unwrap();
    let rival_client = NativeClient::connect(&server.connect_string(), SESSION).unwrap();
    let path = format!("/lost-release-{}", uuid::Uuid::new_v4());
    let (state_tx, state_rx) = mpsc::channel();
    let shared: SharedClient = client.clone();
    thread::scope(|scope| {
        let holder = Holder::start(scope, |ready| {
            Recipe::Mutex.hold(shared, &path, ready, &state_tx)
        });
        proxy.freeze();
        reach_state(client.as_ref(), ConnectionState::Lost, SESSION * 3);
        holder.release();
        assert_eq!(state_rx.recv_timeout(PATIENCE), Ok(LockState::Lost));
        let answer = holder.answer_within(ANSWER_WITHIN);
        let state = client.session().state();
        proxy.thaw();
        assert!(
            matches!(answer, Ok(Ok(()))),
            "the release of a lost hold answered {answer:?}"
        );
        assert_eq!(
            state,
            ConnectionState::Lost,
            "the link was frozen all along"
        );
        let rival = InterProcessMutex::new(rival_client.clone(), &path).unwrap();
        assert!(
            rival.acquire_timeout(PATIENCE).unwrap(),
            "the lock is free once the link is back"
        );
        rival.release().unwrap();
    });
}
