//! The semaphore's admission: a session lost (reported or silent) between admission and the
//! lease, an admission delete that is cut off or answered `SessionExpired`.

use super::*;

/// A one-lease semaphore whose client, after the faults and hooks `setup` sets on it, takes
/// the lease: its admission node is deleted all the same (in the background), and once the
/// lease is returned another client is admitted.
fn admission_deleted_in_the_background(setup: impl FnOnce(&Arc<MemoryClient>)) {
    let e = MemoryEnsemble::new();
    let (c, other) = (e.connect(), e.connect());
    let s = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    drop(s.acquire().unwrap()); // directories exist from here on
    setup(&c);
    let lease = s.acquire().unwrap();
    eventually(PATIENCE, "the admission node deleted", || {
        e.children("/sem/locks").unwrap_or_default().is_empty()
    });
    drop(lease);
    c.on_request(None);
    let s2 = InterProcessSemaphoreV2::new(other.clone(), "/sem", 1).unwrap();
    let lease = s2.acquire_timeout(PATIENCE).unwrap();
    assert!(lease.is_some(), "the next client is admitted");
}

/// Three clients on a one-lease semaphore: `x` holds the lease; `c` is admitted, and just
/// before its lease create `lose` ends its session (its admission node goes), and `d` is
/// admitted and queues its lease. Once `x` lets go, `d` and then `c` must each get the lease:
/// `c` has to find out it is no longer admitted, else both leases wait on each other for ever.
fn admission_lost_before_the_lease(lose: impl Fn(&Arc<MemoryClient>) + Send + Sync + 'static) {
    let e = MemoryEnsemble::new();
    let (x, c, d) = (e.connect(), e.connect(), e.connect());
    let sx = InterProcessSemaphoreV2::new(x.clone(), "/sem", 1).unwrap();
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let sd = Arc::new(InterProcessSemaphoreV2::new(d.clone(), "/sem", 1).unwrap());
    let lease_x = sx.acquire().unwrap();
    let (tx, rx) = mpsc::channel();
    let (c2, e2, sd2) = (c.clone(), e.clone(), sd.clone());
    once_on(&c, Op::Create, "/sem/leases/", move || {
        lose(&c2);
        // The other client is admitted and queues its lease behind x's.
        let (sd3, tx) = (sd2.clone(), tx.clone());
        thread::spawn(move || {
            let _ = tx.send(sd3.acquire_timeout(Duration::from_secs(5)));
        });
        eventually(PATIENCE, "the other lease queued", || {
            e2.children("/sem/leases").unwrap().len() == 2
        });
    });
    thread::scope(|s| {
        let waiter_c = s.spawn(|| sc.acquire_timeout(Duration::from_secs(8)));
        eventually(PATIENCE, "c's lease created", || {
            e.children("/sem/leases").unwrap().len() >= 3
                || e.children("/sem/locks").unwrap_or_default().len() >= 2
        });
        drop(lease_x);
        let lease_d = rx
            .recv()
            .unwrap()
            .unwrap()
            .expect("the admitted client got no lease: deadlocked with the other");
        drop(lease_d);
        let lease_c = waiter_c.join().unwrap().unwrap().expect("c got no lease");
        assert!(lease_c.is_valid());
    });
    c.on_request(None);
    assert!(e.children("/sem/leases").unwrap().is_empty());
}

/// The admitted waiter's session is lost between admission and its lease create; meanwhile
/// another client is admitted and queues its lease. The first must notice that its admission
/// is gone, delete its lease and queue for admission again; else both leases wait on each
/// other for ever.
#[test]
fn a_session_lost_between_admission_and_lease_goes_back_to_admission() {
    admission_lost_before_the_lease(|c| {
        let c = c.clone();
        thread::spawn(move || c.expire()).join().unwrap();
    });
}

/// The semaphore does not wait for its admission delete once the lease is granted; when that
/// delete's connection is lost, the delete goes on in the background and the next client is
/// admitted.
#[test]
fn an_admission_delete_cut_off_goes_on_in_the_background() {
    admission_deleted_in_the_background(|c| {
        c.inject(Fault::before(Op::Delete).on_path("/sem/locks/"))
    });
}

/// The admission node made in a session the client has not reported; the delete sent without
/// waiting once the lease is granted meets the report and is answered `SessionExpired`. The
/// node lives on in the new session and would keep every other client out: the delete goes
/// on in the background.
#[test]
fn an_admission_delete_answered_session_expired_goes_on_in_the_background() {
    admission_deleted_in_the_background(|c| {
        c.inject(Fault::in_new_session(Op::Create).on_path("/sem/locks/"));
        let c2 = c.clone();
        once_on(c, Op::Delete, "/sem/locks/", move || report_change(&c2));
    });
}

/// The same with a silent session change: the admitted client's session changes unreported just
/// before its lease create (its admission node ends with the old session), another client is
/// admitted and queues its lease, and the first one's lease is made in the new session. The
/// client still believes it is admitted; it must ask the server before waiting, else both
/// leases are over the maximum and each waits on the other.
#[test]
fn a_silent_session_change_between_admission_and_lease_goes_back_to_admission() {
    admission_lost_before_the_lease(|c| change_session_silently(c));
}
