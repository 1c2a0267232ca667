//! The semaphore's admission: a session lost (reported or silent) between admission and the
//! lease, an admission delete that is cut off or answered `SessionExpired`.

use super::*;

/// The admitted waiter's session is lost between admission and its lease create; meanwhile
/// another client is admitted and queues its lease. The first must notice that its admission
/// is gone, delete its lease and queue for admission again; else both leases wait on each
/// other for ever.
#[test]
fn a_session_lost_between_admission_and_lease_goes_back_to_admission() {
    let e = MemoryEnsemble::new();
    let (x, c, d) = (e.connect(), e.connect(), e.connect());
    let sx = InterProcessSemaphoreV2::new(x.clone(), "/sem", 1).unwrap();
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let sd = Arc::new(InterProcessSemaphoreV2::new(d.clone(), "/sem", 1).unwrap());
    let lease_x = sx.acquire().unwrap();
    let (tx, rx) = mpsc::channel();
    let (c2, e2, sd2) = (c.clone(), e.clone(), sd.clone());
    once_on(&c, Op::Create, "/sem/leases/", move || {
        let c3 = c2.clone();
        thread::spawn(move || c3.expire()).join().unwrap();
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

/// The semaphore does not wait for its admission delete once the lease is granted; when that
/// delete's connection is lost, the delete goes on in the background and the next client is
/// admitted.
#[test]
fn an_admission_delete_cut_off_goes_on_in_the_background() {
    let e = MemoryEnsemble::new();
    let (c, other) = (e.connect(), e.connect());
    let s = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    drop(s.acquire().unwrap()); // directories exist from here on
    c.inject(Fault::before(Op::Delete).on_path("/sem/locks/"));
    let lease = s.acquire().unwrap();
    eventually(PATIENCE, "the admission node is deleted", || {
        e.children("/sem/locks").unwrap_or_default().is_empty()
    });
    drop(lease);
    let s2 = InterProcessSemaphoreV2::new(other.clone(), "/sem", 1).unwrap();
    let lease = s2.acquire_timeout(PATIENCE).unwrap();
    assert!(lease.is_some(), "the next client is admitted");
}

/// The admission node made in a session the client has not reported; the delete sent without
/// waiting once the lease is granted meets the report and is answered `SessionExpired`. The
/// node lives on in the new session and would keep every other client out: the delete goes
/// on in the background.
#[test]
fn an_admission_delete_answered_session_expired_goes_on_in_the_background() {
    let e = MemoryEnsemble::new();
    let (c, other) = (e.connect(), e.connect());
    let s = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    drop(s.acquire().unwrap()); // directories exist from here on
    c.inject(Fault::in_new_session(Op::Create).on_path("/sem/locks/"));
    let c2 = c.clone();
    once_on(&c, Op::Delete, "/sem/locks/", move || report_change(&c2));
    let lease = s.acquire().unwrap();
    drop(lease);
    eventually(PATIENCE, "the admission node deleted", || {
        e.children("/sem/locks").unwrap_or_default().is_empty()
    });
    c.on_request(None);
    let s2 = InterProcessSemaphoreV2::new(other.clone(), "/sem", 1).unwrap();
    assert!(s2.acquire_timeout(PATIENCE).unwrap().is_some());
}

/// Item 8 with a silent session change: the admitted client's session changes unreported just
/// before its lease create (its admission node ends with the old session), another client is
/// admitted and queues its lease, and the first one's lease is made in the new session. The
/// client still believes it is admitted; it must ask the server before waiting, else both
/// leases are over the maximum and each waits on the other.
#[test]
fn a_silent_session_change_between_admission_and_lease_goes_back_to_admission() {
    let e = MemoryEnsemble::new();
    let (x, c, d) = (e.connect(), e.connect(), e.connect());
    let sx = InterProcessSemaphoreV2::new(x.clone(), "/sem", 1).unwrap();
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let sd = Arc::new(InterProcessSemaphoreV2::new(d.clone(), "/sem", 1).unwrap());
    let lease_x = sx.acquire().unwrap();
    let (tx, rx) = mpsc::channel();
    let (c2, e2, sd2) = (c.clone(), e.clone(), sd.clone());
    once_on(&c, Op::Create, "/sem/leases/", move || {
        change_session_silently(&c2);
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
