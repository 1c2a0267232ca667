//! The torture run at CI size (`measurements/torture.rs` is the soak program; both use
//! `zk_locks::testing::torture`), the checker's own negative controls, the fencing demonstration,
//! and minimal reproductions of what the torture found.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::client::Op;
use zk_locks::locks::{InterProcessSemaphoreV2, LockState};
use zk_locks::testing::torture::{
    self, ClientKind, Config, FaultKind, FencedStore, MemoryEnv, RealEnv, StaleToken,
};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient};

fn config(
    faults: &[FaultKind],
    root: &str,
    duration: Duration,
    acquire_timeout: Duration,
    gap: Duration,
) -> Config {
    Config {
        root: root.into(),
        duration,
        acquire_timeout,
        fault_gap: gap,
        faults: faults.to_vec(),
        finish_cycle_within: Duration::from_secs(90),
    }
}

#[test]
fn torture_memory_backend() {
    let env = MemoryEnv::new(8);
    let summary = torture::run(
        &env,
        &config(
            &FaultKind::ALL,
            "/torture",
            Duration::from_secs(4),
            Duration::from_secs(2),
            Duration::from_millis(20),
        ),
    );
    println!("{}", summary.line());
    assert!(
        summary.acquisitions.values().all(|&n| n > 0),
        "{}",
        summary.line()
    );
    assert!(
        summary.faults.len() == FaultKind::ALL.len(),
        "{}",
        summary.line()
    );
    assert!(
        summary.is_clean(),
        "{}\n{:?}\n{:?}",
        summary.line(),
        summary.violation_details,
        summary.orphan_names
    );
}

/// About two minutes on a loaded 2-core machine: cluster start, 60 s of faults (and the rest
/// of the cycle, so every kind at least once), then the orphan and watch checks. On our own
/// client: no session may be lost but those a freeze or an expiry ends (no spurious loss).
#[test]
fn torture_real_cluster() {
    if !zk_locks::testing::require_server() {
        return;
    }
    let session_timeout = Duration::from_secs(3);
    let env = RealEnv::start(8, session_timeout, ClientKind::Native).expect("cluster and sessions");
    let summary = torture::run(
        &env,
        &config(
            &FaultKind::REAL,
            "/torture",
            Duration::from_secs(60),
            session_timeout * 2,
            session_timeout,
        ),
    );
    println!("{}", summary.line());
    assert!(
        summary.acquisitions.values().all(|&n| n > 0),
        "{}",
        summary.line()
    );
    for kind in FaultKind::REAL {
        assert!(
            summary.faults.get(&kind).copied().unwrap_or(0) > 0,
            "{} never injected: {}",
            kind.name(),
            summary.line()
        );
    }
    assert!(
        summary.is_clean(),
        "{}\n{:?}\n{:?}\nleaked watches: {:#?}",
        summary.line(),
        summary.violation_details,
        summary.orphan_names,
        summary.leaked_watch_details
    );
    assert_eq!(summary.spurious_losses, 0, "{}", summary.line());
}

#[test]
fn the_checker_sees_overlaps_and_excess_holders() {
    use std::time::Instant;
    use zk_locks::testing::torture::{check_exclusion, Recipe, Section};
    let t = Instant::now();
    let at = |ms: u64| t + Duration::from_millis(ms);
    let section = |worker, exclusive, enter, exit, valid| Section {
        recipe: Recipe::Mutex,
        exclusive,
        worker,
        enter: at(enter),
        exit: at(exit),
        valid_at_enter: true,
        valid_at_exit: valid,
    };
    // Touching and disjoint exclusive sections are fine; an invalid one does not count.
    let ok = [
        section(0, true, 0, 10, true),
        section(1, true, 10, 20, true),
        section(2, true, 15, 30, false),
        section(3, true, 30, 40, true),
    ];
    assert_eq!(check_exclusion(&ok, 1).0, 0);
    let overlapping = [section(0, true, 0, 10, true), section(1, true, 5, 12, true)];
    assert!(check_exclusion(&overlapping, 1).0 > 0);
    // Readers share, a writer among them does not.
    let readers = [
        section(0, false, 0, 10, true),
        section(1, false, 5, 12, true),
    ];
    assert_eq!(check_exclusion(&readers, i64::MAX).0, 0);
    let writer = [
        section(0, false, 0, 10, true),
        section(1, true, 5, 12, true),
    ];
    assert!(check_exclusion(&writer, i64::MAX).0 > 0);
    // Four leases at once on a semaphore of three.
    let four: Vec<Section> = (0..4)
        .map(|w| section(w, false, w as u64, 20, true))
        .collect();
    assert_eq!(check_exclusion(&four[..3], 3).0, 0);
    assert!(check_exclusion(&four, 3).0 > 0);
}

/// Fencing, deterministically: a holder whose session expired writes after its successor and
/// is refused; the successor's writes go through.
#[test]
fn a_fenced_store_refuses_the_superseded_holder() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let ma = InterProcessMutex::new(a.clone(), "/fenced").unwrap();
    let mb = InterProcessMutex::new(b.clone(), "/fenced").unwrap();
    let store = FencedStore::default();

    let ga = ma.lock().unwrap();
    let old = ga.fencing_token().unwrap();
    store.acquired(old);
    store.write(old).unwrap();
    // A pauses (GC, partition); the server expires its session; B takes over and writes.
    a.expire();
    let gb = mb.lock().unwrap();
    let new = gb.fencing_token().unwrap();
    assert!(new > old, "czxid orders holders: {old} then {new}");
    store.acquired(new);
    store.write(new).unwrap();
    // A wakes up and writes with its old token without looking at its guard: refused.
    assert_eq!(
        store.write(old),
        Err(StaleToken {
            token: old,
            highest: new
        })
    );
    assert_eq!(ga.state(), LockState::Lost, "the guard knew, too");
    assert_eq!(store.counts(), (2, 1, 0));
    drop(gb);
    drop(ga);
}

/// Found by the torture (memory backend, `release-errors={Zk:delete:SessionExpired}`): a
/// release whose delete meets the session's expiry reports an error, although the node is gone
/// with the session — which `LockInternals::release` documents as `Ok`.
#[test]
fn a_release_that_meets_the_expiry_is_ok() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = InterProcessMutex::new(c.clone(), "/expiring-release").unwrap();
    m.acquire().unwrap();
    let (c2, fired) = (c.clone(), Arc::new(AtomicUsize::new(0)));
    let f = fired.clone();
    c.on_request(Some(Box::new(move |op, _| {
        if op == Op::Delete && f.fetch_add(1, Ordering::SeqCst) == 0 {
            let c3 = c2.clone();
            thread::spawn(move || c3.expire()).join().unwrap();
        }
    })));
    let released = m.release();
    c.on_request(None);
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert!(released.is_ok(), "{released:?}");
    assert_eq!(e.children("/expiring-release").unwrap_or_default().len(), 0);
}

/// Found by the torture (memory backend, `errors={Zk:get_children:SessionExpired}`): the
/// semaphore's lease loop treats an expired session while listing the leases as a hard error,
/// where the mutex's wait loop retries with a new node under the retry policy.
#[test]
fn a_semaphore_acquire_survives_an_expiry_while_listing_leases() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let client: SharedClient = c.clone();
    let s = InterProcessSemaphoreV2::new(client, "/expiring-sem", 2).unwrap();
    let (c2, fired) = (c.clone(), Arc::new(AtomicUsize::new(0)));
    let f = fired.clone();
    c.on_request(Some(Box::new(move |op, path| {
        if op == Op::GetChildren
            && path.ends_with("/leases")
            && f.fetch_add(1, Ordering::SeqCst) == 0
        {
            let c3 = c2.clone();
            thread::spawn(move || c3.expire()).join().unwrap();
        }
    })));
    let lease = s.acquire_timeout(Duration::from_secs(10));
    c.on_request(None);
    assert!(fired.load(Ordering::SeqCst) >= 1, "the expiry was injected");
    let lease = lease
        .expect("typed, but should have retried")
        .expect("a lease");
    assert!(lease.is_valid());
    lease.close().unwrap();
    assert_eq!(
        e.children("/expiring-sem/leases").unwrap_or_default().len(),
        0
    );
}
