//! The torture run at CI size (`measurements/torture.rs` is the soak program; both use
//! `zk_locks_measurements::torture`), the checker's own negative controls, the fencing demonstration,
//! and minimal reproductions of what the torture found.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zk_locks::client::memory::{Fault, MemoryEnsemble};
use zk_locks::client::Op;
use zk_locks::locks::{InterProcessSemaphoreV2, LockState};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient};
use zk_locks_measurements::torture::{
    self, expired_unannounced, ClientKind, Config, FaultKind, FaultRecord, FencedStore, MemoryEnv,
    RealEnv, Recipe, StaleToken,
};

fn config(
    faults: &[FaultKind],
    root: &str,
    duration: Duration,
    acquire_timeout: Duration,
    gap: Duration,
) -> Config {
    Config::new(root, faults, duration, acquire_timeout, gap)
}

#[test]
fn torture_memory_backend() {
    // Forced expiries are reported late, as by a real server: the checker must set the
    // victims' sections aside rather than count them.
    let env = MemoryEnv::new(8).with_late_loss_reports(Duration::from_millis(2));
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
    // Both elections led, each spell with a term of its own.
    for recipe in [Recipe::Latch, Recipe::Selector] {
        assert!(
            summary.acquisitions.get(&recipe).copied().unwrap_or(0) > 0,
            "{}",
            summary.line()
        );
    }
    assert!(summary.leader_terms > 0, "{}", summary.line());
    assert_eq!(
        summary.leader_terms,
        summary.leader_sections,
        "{}",
        summary.line()
    );
    // The downgrade expiry strikes while the victim holds the write lock, by construction:
    // every one is a holder hit.
    assert_eq!(
        summary.holder_hits.get(&FaultKind::DowngradeExpiry),
        summary.faults.get(&FaultKind::DowngradeExpiry),
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

/// One full cycle of faults, every kind once, each on a session of its own (about 40 s; the
/// run finishes the cycle it started, and it is given 150 s to), after the cluster start, then
/// the orphan and watch checks. A second cycle (60 s of faults, as this once ran) strikes the
/// same kinds again on other sessions, under the same checks: twice the time, no new kind of
/// event; the soak program (`measurements/torture.rs`) is where runs are long. On our own
/// client: no session may be lost but those a freeze or an expiry ends (no spurious loss).
/// Where network namespaces can be made (root and `ip`; required under
/// `ZK_LOCKS_REQUIRE_SERVER=1`), the members get one each and the cycle includes the member
/// partition: the session on a cut-off follower must move and keep its locks.
#[test]
fn torture_real_cluster() {
    if !zk_locks::testing::require_server() {
        return;
    }
    let partitions = zk_locks::testing::partition::require_partition();
    let kinds: &[FaultKind] = if partitions {
        &FaultKind::PARTITIONED
    } else {
        &FaultKind::REAL
    };
    let session_timeout = Duration::from_secs(3);
    let env = RealEnv::start_with(8, session_timeout, ClientKind::Native, partitions)
        .expect("cluster and sessions");
    let mut config = config(
        kinds,
        "/torture",
        // Room for the first fault (one gap in); past this the cycle under way is finished:
        // one full cycle.
        session_timeout * 2,
        session_timeout * 2,
        session_timeout,
    );
    config.finish_cycle_within = Duration::from_secs(150);
    let summary = torture::run(&env, &config);
    println!("{}", summary.line());
    assert!(
        summary.acquisitions.values().all(|&n| n > 0),
        "{}",
        summary.line()
    );
    for &kind in kinds {
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

/// The read/write lock under forced expiries only, reported late (as a real server's client
/// hears of one a network trip later) and with longer sections: a victim writer's section is
/// then often still running when the readers queued behind it take over. Found as
/// `violations=3` in one CI run of `torture_memory_backend` (a writer "overlapping" the three
/// readers queued behind it); the checker sets those sections aside (`expired-sections`), and
/// nothing else overlaps.
#[test]
fn unannounced_expiries_are_set_aside_not_counted() {
    let env = MemoryEnv::new(6).with_late_loss_reports(Duration::from_millis(5));
    let mut config = config(
        &[FaultKind::Expire],
        "/torture-expiry",
        Duration::from_secs(3),
        Duration::from_secs(2),
        Duration::from_millis(10),
    );
    config.recipes = vec![Recipe::ReadWrite];
    config.hold = Duration::from_millis(1);
    let summary = torture::run(&env, &config);
    println!("{}", summary.line());
    assert!(
        summary.is_clean(),
        "{}\n{:#?}",
        summary.line(),
        summary.violation_details
    );
    assert!(summary.expired_overlaps > 0, "{}", summary.line());
}

#[test]
fn the_checker_sees_overlaps_and_excess_holders() {
    use zk_locks_measurements::torture::{check_exclusion, Section};
    let t = std::time::Instant::now();
    let at = |ms: u64| t + Duration::from_millis(ms);
    let section = |worker, exclusive, enter, exit, valid| {
        made_section(
            t,
            Recipe::Mutex,
            exclusive,
            worker,
            None,
            enter,
            exit,
            valid,
        )
    };
    // Touching and disjoint exclusive sections are fine; an invalid one does not count.
    let ok = [
        section(0, true, 0, 10, true),
        section(1, true, 10, 20, true),
        section(2, true, 15, 30, false),
        section(3, true, 30, 40, true),
    ];
    assert_eq!(check_exclusion(&ok, 1, &[]).0, 0);
    let overlapping = [section(0, true, 0, 10, true), section(1, true, 5, 12, true)];
    assert!(check_exclusion(&overlapping, 1, &[]).0 > 0);
    // Readers share, a writer among them does not.
    let readers = [
        section(0, false, 0, 10, true),
        section(1, false, 5, 12, true),
    ];
    assert_eq!(check_exclusion(&readers, i64::MAX, &[]).0, 0);
    let writer = [
        section(0, false, 0, 10, true),
        section(1, true, 5, 12, true),
    ];
    assert!(check_exclusion(&writer, i64::MAX, &[]).0 > 0);
    // Four leases at once on a semaphore of three.
    let four: Vec<Section> = (0..4)
        .map(|w| section(w, false, w as u64, 20, true))
        .collect();
    assert_eq!(check_exclusion(&four[..3], 3, &[]).0, 0);
    assert!(check_exclusion(&four, 3, &[]).0 > 0);

    // An overlap whose holder's session the server ended without warning meanwhile is set
    // aside; the same overlap under a freeze of that session, or an expiry of another
    // session, is not. The message names both holders' nodes and the faults that hit them.
    let fault = |kind: FaultKind, victim, start, end| FaultRecord {
        kind,
        victim: Some(victim),
        start: at(start),
        end: at(end),
        unannounced_expiry: kind.expires_unannounced(),
    };
    let mut overlapping = overlapping;
    overlapping[0].nodes = vec![("/m/_c_x-lock-0000000007".into(), Some(0x10))];
    let (_, details) = check_exclusion(&overlapping, 1, &[fault(FaultKind::Cut, 1, 3, 4)]);
    assert_eq!(
        details[0],
        "mutex: worker 0 (exclusive, 10.00ms, /m/_c_x-lock-0000000007 seq 7 session 0x10; \
          faults: none) overlaps worker 1 (exclusive, 7.00ms, no node; faults: cut@+3.00ms)"
    );
    let expiry = fault(FaultKind::Expire, 0, 8, 9);
    assert!(expired_unannounced(
        &overlapping[0],
        std::slice::from_ref(&expiry)
    ));
    assert_eq!(check_exclusion(&overlapping, 1, &[expiry]).0, 0);
    for other in [
        fault(FaultKind::Freeze, 0, 8, 9),
        fault(FaultKind::Expire, 2, 8, 9),
        fault(FaultKind::Expire, 0, 11, 12), // after worker 0's last check
        fault(FaultKind::Expire, 1, 1, 2),   // reported before worker 1 entered
    ] {
        assert!(check_exclusion(&overlapping, 1, &[other]).0 > 0);
    }
}

/// The elections' check: a term held by two participants, or a valid leader section whose term
/// is below an earlier one's, is a violation; an invalid section's term does not order.
#[test]
fn the_checker_sees_a_term_held_twice_and_terms_going_back() {
    use zk_locks_measurements::torture::check_terms;
    let t = std::time::Instant::now();
    let leader = |worker, term, enter, exit, valid| {
        made_section(
            t,
            Recipe::Latch,
            true,
            worker,
            Some(term),
            enter,
            exit,
            valid,
        )
    };
    let ok = [
        leader(0, 10, 0, 5, true),
        leader(1, 12, 5, 9, true),
        // A superseded leader that noticed (invalid at exit) with an older term, later on.
        leader(2, 11, 10, 12, false),
        leader(0, 15, 12, 20, true),
    ];
    assert_eq!(check_terms(&ok, &[]), (0, Vec::new()));
    let twice = [leader(0, 10, 0, 5, true), leader(1, 10, 6, 9, false)];
    let (n, details) = check_terms(&twice, &[]);
    assert_eq!(n, 1);
    assert!(details[0].starts_with("latch: term 10 held by two participants"));
    let back = [leader(0, 12, 0, 5, true), leader(1, 11, 6, 9, true)];
    let (n, details) = check_terms(&back, &[]);
    assert_eq!(n, 1);
    assert!(details[0].starts_with("latch: term 11 led after term 12"));
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
    assert!(fired.load(Ordering::SeqCst) >= 1, "the expiry was injected");
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

/// Found by the loop driver (`downgrade-silent-session`: the rw lock blocked for good by a read
/// node of the victim's new, live session): a delete that meets the report of a session change
/// fails with `SessionExpired`, which was taken as "gone with the session". But the node was
/// created in the session the client had moved to without reporting it, and lives on.
#[test]
fn a_delete_that_meets_a_session_change_report_is_retried() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = InterProcessMutex::new(c.clone(), "/silent-release").unwrap();
    // The client moves to a new session it does not report yet; the lock node is made there.
    c.inject(Fault::in_new_session(Op::Create));
    m.acquire().unwrap();
    assert_eq!(e.children("/silent-release").unwrap().len(), 1);
    // The change is reported while the release's delete is on its way.
    let (c2, fired) = (c.clone(), Arc::new(AtomicUsize::new(0)));
    let f = fired.clone();
    c.on_request(Some(Box::new(move |op, _| {
        if op == Op::Delete && f.fetch_add(1, Ordering::SeqCst) == 0 {
            let c3 = c2.clone();
            thread::spawn(move || c3.report_session_change())
                .join()
                .unwrap();
        }
    })));
    let released = m.release();
    c.on_request(None);
    assert!(fired.load(Ordering::SeqCst) >= 1, "the report was injected");
    assert!(released.is_ok(), "{released:?}");
    assert_eq!(
        e.children("/silent-release").unwrap_or_default(),
        Vec::<String>::new(),
        "the node lives on in the new session"
    );
}

/// A recorded section for the checker's own tests: asked at `t`, entered and left `enter` and
/// `exit` ms after it, valid at its enter and (as `valid` says) at its exit.
#[allow(clippy::too_many_arguments)]
fn made_section(
    t: std::time::Instant,
    recipe: Recipe,
    exclusive: bool,
    worker: usize,
    token: Option<i64>,
    enter: u64,
    exit: u64,
    valid: bool,
) -> zk_locks_measurements::torture::Section {
    let at = |ms: u64| t + Duration::from_millis(ms);
    zk_locks_measurements::torture::Section {
        recipe,
        exclusive,
        worker,
        token,
        asked: at(0),
        enter: at(enter),
        exit: at(exit),
        checked: at(exit),
        valid_at_enter: true,
        valid_at_exit: valid,
        nodes: Vec::new(),
        nodes_alive: None,
        write_refused: false,
        write_stale: false,
    }
}
