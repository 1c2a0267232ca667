//! The API a user meets first: every recipe and the types named with it at the crate root and
//! in the prelude, `?` from a `ZkClient` call into `zk_locks::Result`, `try_lock()` as the one
//! non-blocking attempt, and guards whose `Debug` shows what a user reads. Memory backend.

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::{
    Acquire, CancelToken, Error, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease,
    LockEvent, LockObserver, LockState, Participant, ParticipantKind, ReadLock, Revoker,
    SharedClient, SharedCount, WriteLock, ZkError,
};

/// Every recipe is at the root, as the mutex is (a use of each name, so the import is real).
#[test]
fn every_recipe_is_at_the_crate_root() {
    let e = MemoryEnsemble::new();
    let client: SharedClient = e.connect();
    let rw = InterProcessReadWriteLock::new(client.clone(), "/surface/rw").unwrap();
    let _: (&ReadLock, &WriteLock) = (rw.read_lock(), rw.write_lock());
    let semaphore = InterProcessSemaphoreV2::new(client.clone(), "/surface/sem", 2).unwrap();
    let lease: Lease = semaphore.acquire().unwrap();
    let node = lease.node_path().to_string();
    drop(lease);
    let _ = Revoker::attempt_revoke(&client, &node);
    let _count: SharedCount = SharedCount::new(client.clone(), "/surface/count", 1).unwrap();
    let one = InterProcessSemaphoreMutex::new(client.clone(), "/surface/one").unwrap();
    let multi = InterProcessMultiLock::new(vec![Box::new(one)]).unwrap();
    drop(multi.lock().unwrap());
    let mutex = InterProcessMutex::new(client, "/surface/mutex").unwrap();
    let _g = mutex.try_lock_with(&Acquire::new().cancel(&CancelToken::new()));
    let who: Vec<Participant> = mutex.participants().unwrap();
    assert!(who
        .iter()
        .all(|p| p.kind == ParticipantKind::Mutex || p.is_holder));
    fn observer_types(_: Option<&dyn LockObserver>, _: Option<&LockEvent>, _: LockState) {}
    observer_types(None, None, LockState::Held);
}

/// The prelude brings the trait and the recipes.
#[test]
fn the_prelude_brings_the_recipes_and_the_trait() {
    use zk_locks::prelude::*;
    let e = MemoryEnsemble::new();
    let rw = InterProcessReadWriteLock::new(e.connect(), "/surface/prelude").unwrap();
    drop(rw.write_lock().lock().unwrap());
    let _ = InterProcessSemaphoreV2::new(e.connect(), "/surface/prelude-sem", 1).unwrap();
}

/// `?` works from a `ZkClient` call: its `ZkError` converts into the crate's `Error`, keeping
/// the code.
#[test]
fn a_zk_error_converts_with_question_mark() {
    use zk_locks::ZkClient as _;
    fn read(client: &SharedClient) -> zk_locks::Result<Vec<u8>> {
        Ok(client.get_data("/does/not/exist", None)?.0)
    }
    let e = MemoryEnsemble::new();
    let client: SharedClient = e.connect();
    let err = read(&client).unwrap_err();
    assert_eq!(err.zk_code(), Some(ZkError::NoNode), "{err:?}");
    assert!(matches!(Error::from(ZkError::Closed), Error::Closed));
}

mod try_lock {
    use std::any::Any;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::time::Duration;

    use zk_locks::client::memory::MemoryEnsemble;
    use zk_locks::client::{Counters, CountingClient};
    use zk_locks::{
        InterProcessLock, InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock,
        InterProcessSemaphoreMutex, SharedClient,
    };

    /// One recipe's lock on a counting client, and a way to take it as a rival would.
    struct Case {
        name: &'static str,
        /// Through `try_lock()` (`true`) or `try_lock_for(ZERO)` (`false`); owned or borrowed.
        attempt: Box<dyn Fn(bool) -> bool>,
        /// Holds the lock elsewhere until the returned guard drops.
        hold: Rc<dyn Fn() -> Box<dyn Any>>,
        directory: String,
    }

    fn cases(e: &MemoryEnsemble, counting: &Arc<CountingClient<SharedClient>>) -> Vec<Case> {
        let ours: SharedClient = counting.clone();
        let rival: SharedClient = e.connect();
        let mut all = Vec::new();
        macro_rules! case {
            ($name:expr, $dir:expr, $ours:expr, $theirs:expr) => {{
                let ours = Arc::new($ours);
                let theirs = Arc::new($theirs);
                let hold: Rc<dyn Fn() -> Box<dyn Any>> =
                    Rc::new(move || Box::new(theirs.lock_owned().unwrap()));
                let borrowed = ours.clone();
                all.push(Case {
                    name: $name,
                    attempt: Box::new(move |new_call| {
                        if new_call {
                            borrowed.try_lock().unwrap().is_some()
                        } else {
                            borrowed.try_lock_for(Duration::ZERO).unwrap().is_some()
                        }
                    }),
                    hold: hold.clone(),
                    directory: $dir.to_string(),
                });
                all.push(Case {
                    name: concat!($name, " (owned)"),
                    attempt: Box::new(move |new_call| {
                        if new_call {
                            ours.try_lock_owned().unwrap().is_some()
                        } else {
                            ours.try_lock_owned_for(Duration::ZERO).unwrap().is_some()
                        }
                    }),
                    hold,
                    directory: $dir.to_string(),
                });
            }};
        }
        case!(
            "mutex",
            "/try/mutex",
            InterProcessMutex::new(ours.clone(), "/try/mutex").unwrap(),
            InterProcessMutex::new(rival.clone(), "/try/mutex").unwrap()
        );
        case!(
            "write lock",
            "/try/rw",
            InterProcessReadWriteLock::new(ours.clone(), "/try/rw")
                .unwrap()
                .write_lock_arc(),
            InterProcessReadWriteLock::new(rival.clone(), "/try/rw")
                .unwrap()
                .read_lock_arc()
        );
        case!(
            "semaphore mutex",
            "/try/sem/leases",
            InterProcessSemaphoreMutex::new(ours.clone(), "/try/sem").unwrap(),
            InterProcessSemaphoreMutex::new(rival.clone(), "/try/sem").unwrap()
        );
        case!(
            "multi-lock",
            "/try/multi",
            InterProcessMultiLock::from_paths(ours.clone(), &["/try/multi"]).unwrap(),
            InterProcessMultiLock::from_paths(rival.clone(), &["/try/multi"]).unwrap()
        );
        all
    }

    /// The cost of one attempt, with the counters of `counting` reset before it.
    fn cost(
        counting: &CountingClient<SharedClient>,
        attempt: impl FnOnce() -> bool,
    ) -> (bool, Counters) {
        counting.reset_counters();
        let got = attempt();
        (got, counting.counters())
    }

    /// `try_lock()` takes a free lock, and on a held one returns `None` at once, leaving no
    /// node, at exactly the requests and round trips of `try_lock_for(Duration::ZERO)`.
    #[test]
    fn try_lock_is_try_lock_for_zero() {
        let e = MemoryEnsemble::new();
        let counting = Arc::new(CountingClient::new(e.connect() as SharedClient));
        for case in cases(&e, &counting) {
            let name = case.name;
            // Free: both take it (the first call also makes the directories).
            assert!((case.attempt)(true), "{name}: a free lock is taken");
            let (free_new, free_new_cost) = cost(&counting, || (case.attempt)(true));
            let (free_old, free_old_cost) = cost(&counting, || (case.attempt)(false));
            assert!(free_new && free_old, "{name}");
            assert_eq!(free_new_cost, free_old_cost, "{name}: free");
            // Held elsewhere: `None`, our node gone, the same cost.
            let held = (case.hold)();
            let before = e.children(&case.directory).unwrap();
            let (busy_new, busy_new_cost) = cost(&counting, || (case.attempt)(true));
            assert_eq!(
                e.children(&case.directory).unwrap(),
                before,
                "{name}: left a node"
            );
            let (busy_old, busy_old_cost) = cost(&counting, || (case.attempt)(false));
            assert!(!busy_new && !busy_old, "{name}: a held lock is not taken");
            assert_eq!(busy_new_cost, busy_old_cost, "{name}: contended");
            assert!(busy_new_cost.requests() > 0, "{name}: {busy_new_cost:?}");
            drop(held);
        }
    }
}

/// `Revoker::attempt_revoke` takes the client as the constructors do: a `&Arc<MemoryClient>`
/// (or any client handle), not only a `&SharedClient`.
#[test]
fn attempt_revoke_accepts_any_client_handle() {
    use std::sync::mpsc;
    use std::time::Duration;

    let e = MemoryEnsemble::new();
    let holder = InterProcessMutex::new(e.connect(), "/surface/revoke").unwrap();
    let (asked, revoked) = mpsc::channel();
    holder.make_revocable(move || {
        let _ = asked.send(());
    });
    let guard = holder.lock().unwrap();
    let other = e.connect(); // an Arc<MemoryClient>
    let node = guard.node_path().unwrap().to_string();
    Revoker::attempt_revoke(&other, &node).unwrap();
    revoked
        .recv_timeout(Duration::from_secs(30))
        .expect("the holder was asked");
}

/// A guard's `Debug` shows what a user reads (the lock's path, its node, its state, the
/// fencing token once known) and none of the internals; so do an owned guard's and a lease's.
#[test]
fn guards_debug_as_path_node_state_and_token() {
    let e = MemoryEnsemble::new();
    let mutex = std::sync::Arc::new(InterProcessMutex::new(e.connect(), "/surface/debug").unwrap());
    let guard = mutex.lock().unwrap();
    let token = guard.fencing_token().unwrap().to_string();
    let text = format!("{guard:?}");
    let node = guard.node_path().unwrap();
    for want in ["LockGuard", "\"/surface/debug\"", node, "Held", &token] {
        assert!(text.contains(want), "{text} lacks {want}");
    }
    let internals = [
        "OnceLock",
        "NodeWatch",
        "verified_epoch",
        "client",
        "retry",
        "closed",
    ];
    let shows_none = |text: &str| {
        for internal in internals {
            assert!(!text.contains(internal), "{text} shows {internal}");
        }
    };
    shows_none(&text);
    drop(guard);

    let owned = mutex.lock_owned().unwrap();
    let text = format!("{owned:?}");
    assert!(text.starts_with("OwnedLockGuard"), "{text}");
    assert!(
        text.contains(owned.node_path().unwrap()) && text.contains("Held"),
        "{text}"
    );
    shows_none(&text);
    drop(owned);

    let semaphore = InterProcessSemaphoreV2::new(e.connect(), "/surface/debug-sem", 1).unwrap();
    let lease = semaphore.acquire().unwrap();
    let text = format!("{lease:?}");
    assert!(
        text.starts_with("Lease") && text.contains(lease.node_path()),
        "{text}"
    );
    assert!(text.contains("Held"), "{text}");
    shows_none(&text);
}

/// `CancelToken::on_cancel` runs its callback once, on the cancelling thread, or at once when
/// the token is cancelled already; and a callback is enough to end a waiting acquire's wait
/// from another token (what a bridge to a runtime's cancellation needs).
#[test]
fn on_cancel_runs_once_when_cancelled() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let runs = Arc::new(AtomicUsize::new(0));
    let token = CancelToken::new();
    let counted = runs.clone();
    token.on_cancel(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(runs.load(Ordering::SeqCst), 0, "not before the cancel");
    token.cancel();
    token.cancel();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "once");
    let counted = runs.clone();
    token.on_cancel(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "at once when already cancelled"
    );

    // A chain: the service's switch cancels the token a waiting acquire was given.
    let e = MemoryEnsemble::new();
    let holder = InterProcessMutex::new(e.connect(), "/surface/chain").unwrap();
    let _held = holder.lock().unwrap();
    let (switch, locks) = (CancelToken::new(), CancelToken::new());
    switch.on_cancel({
        let locks = locks.clone();
        move || locks.cancel()
    });
    let waiter = Arc::new(InterProcessMutex::new(e.connect(), "/surface/chain").unwrap());
    let how = Acquire::new().cancel(&locks);
    let waiting = std::thread::spawn(move || waiter.try_lock_owned_with(&how).map(|g| g.is_some()));
    let patience = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while holder.participant_nodes().unwrap().len() < 2 {
        assert!(
            std::time::Instant::now() < patience,
            "the waiter never queued"
        );
        std::thread::yield_now();
    }
    switch.cancel();
    assert!(matches!(
        waiting.join().unwrap(),
        Err(Error::Cancelled { .. })
    ));
    assert_eq!(holder.participant_nodes().unwrap().len(), 1);
}
