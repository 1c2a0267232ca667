//! On the in-memory ensemble: exact request counts, and faults at exact points (a token
//! cancelled before the call, the link down, a lost session, timeout against token).

use super::*;

fn memory() -> common::Memory {
    common::Memory::new()
}

/// A token cancelled before the call: `Cancelled`, and not one request (nor a round trip).
#[test]
fn a_token_cancelled_before_the_call_makes_no_request() {
    let b = memory();
    for r in recipes() {
        let c = b.connect();
        let root = format!("{}/{}", b.root(), r.name.replace(' ', "-"));
        let lock = (r.waiter)(&c.client, &root);
        let token = CancelToken::new();
        token.cancel();
        let memory = c.memory().unwrap();
        memory.reset_counters();
        for how in [
            Acquire::new().cancel(&token),
            Acquire::new()
                .cancel(&token)
                .timeout(Duration::from_secs(5)),
        ] {
            let outcome = lock.try_acquire_with(&how);
            assert!(
                matches!(outcome, Err(Error::Cancelled { .. })),
                "{}: {outcome:?}",
                r.name
            );
        }
        let counted = memory.counters();
        assert_eq!(counted.requests(), 0, "{}: {counted:?}", r.name);
        assert_eq!(counted.round_trips, 0, "{}: {counted:?}", r.name);
    }
}

/// Cancelled while its link is down: the waiter returns without waiting for the link (its
/// node's delete goes to the background), and once the link is back the node is gone and the
/// next waiter gets the lock.
#[test]
fn a_cancel_while_the_link_is_down_returns_at_once() {
    let b = memory();
    let patience = b.patience();
    for r in recipes() {
        let q = Queue::start(&b, &r, Acquire::new());
        let memory = q.cw.memory().unwrap();
        memory.reset_counters();
        memory.suspend();
        // The waiter saw the link go and failed a listing: it is in its retry pause or waiting
        // for the link when the cancel comes.
        eventually(patience, "the waiter lists again and fails", || {
            memory.counters().get_children > 0
        });
        q.token.cancel();
        let outcome = q
            .waiter
            .outcome(patience, "the waiter cancelled with its link down");
        assert!(
            matches!(outcome, Err(Error::Cancelled { .. })),
            "{}: {outcome:?}",
            r.name
        );
        // Still down: the call did not wait for the link.
        assert_eq!(
            q.cw.client.session().state(),
            ConnectionState::Suspended,
            "{}",
            r.name
        );
        memory.resume();
        eventually(patience, "the background delete removes the node", || {
            owned_nodes(q.ch.client.as_ref(), &q.dirs)
                .iter()
                .all(|(_, o)| *o != q.waiter_session)
        });
        drop(q.holder);
        assert!(
            q.next.outcome(patience, "the next waiter").unwrap(),
            "{}",
            r.name
        );
        assert_eq!(q.cw.client.session().snapshot().losses, 0, "{}", r.name);
    }
}

/// A waiter whose session was lost (the server expired it) queues again in its new session;
/// a cancel then ends that wait too: `Cancelled`, no node of either session left, the next
/// waiter gets in, and the client stays connected.
#[test]
fn a_cancel_after_a_lost_session_leaves_nothing() {
    let b = memory();
    let patience = b.patience();
    for r in recipes() {
        let root = format!("{}/{}", b.root(), r.name.replace(' ', "-"));
        let dirs = (r.dirs)(&root);
        let (ch, cw, cn) = (b.connect(), b.connect(), b.connect());
        let first_session = cw.session_id();
        let holder = Contender::start((r.holder)(&ch.client, &root), Acquire::new());
        assert!(holder.outcome(patience, r.name).unwrap());
        let token = CancelToken::new();
        let waiter = Contender::start((r.waiter)(&cw.client, &root), Acquire::new().cancel(&token));
        eventually(patience, "the waiter queues", || {
            owned_nodes(ch.client.as_ref(), &dirs)
                .iter()
                .any(|(_, o)| *o == first_session)
        });
        cw.memory().unwrap().expire();
        eventually(
            patience,
            "the waiter queues again in its new session",
            || {
                let now = cw.client.session().session_id();
                now.is_some_and(|s| s != first_session)
                    && owned_nodes(ch.client.as_ref(), &dirs)
                        .iter()
                        .any(|(_, o)| Some(*o) == now)
            },
        );
        let second_session = cw.session_id();
        let next = Contender::start((r.next)(&cn.client, &root), Acquire::new());
        token.cancel();
        let outcome = waiter.outcome(patience, "the waiter cancelled after a lost session");
        assert!(
            matches!(outcome, Err(Error::Cancelled { .. })),
            "{}: {outcome:?}",
            r.name
        );
        eventually(patience, "no node of the waiter's sessions is left", || {
            owned_nodes(ch.client.as_ref(), &dirs)
                .iter()
                .all(|(_, o)| *o != first_session && *o != second_session)
        });
        drop(holder);
        assert!(
            next.outcome(patience, "the next waiter").unwrap(),
            "{}",
            r.name
        );
        assert!(cw.client.session().state().is_connected(), "{}", r.name);
    }
}

/// A waiter whose listing failed with the link down waits for the link (no pause between
/// retries here): the cancel wakes that wait, and the node goes once the link is back.
#[test]
fn a_cancel_wakes_a_wait_for_the_link() {
    let b = memory();
    let patience = b.patience();
    let (ch, cw) = (b.connect(), b.connect());
    let root = b.root();
    let holder = mutex(&ch.client, &root);
    holder.acquire().unwrap();
    let waiter = InterProcessMutex::new(cw.client.clone(), &root)
        .unwrap()
        .with_retry_policy(std::sync::Arc::new(RetryNTimes::new(1000, Duration::ZERO)));
    let token = CancelToken::new();
    let w = Contender::start(Box::new(waiter), Acquire::new().cancel(&token));
    eventually(patience, "the waiter queues", || {
        children(ch.client.as_ref(), &root).len() == 2
    });
    let memory = cw.memory().unwrap();
    memory.reset_counters();
    memory.suspend();
    eventually(patience, "the waiter lists again and fails", || {
        memory.counters().get_children > 0
    });
    token.cancel();
    let outcome = w.outcome(patience, "the waiter cancelled while waiting for the link");
    assert!(
        matches!(outcome, Err(Error::Cancelled { .. })),
        "{outcome:?}"
    );
    assert_eq!(cw.client.session().state(), ConnectionState::Suspended);
    memory.resume();
    eventually(patience, "its node is deleted", || {
        children(ch.client.as_ref(), &root).len() == 1
    });
    holder.release().unwrap();
}

/// A timeout and a token together: whichever comes first ends the wait, and they say apart
/// which one it was (`Ok(false)` for the timeout, `Cancelled` for the token).
#[test]
fn timeout_and_token_are_told_apart() {
    let b = memory();
    let patience = b.patience();
    let (ch, cw) = (b.connect(), b.connect());
    let root = b.root();
    let holder = mutex(&ch.client, &root);
    holder.acquire().unwrap();
    let waiter = mutex(&cw.client, &root);
    let token = CancelToken::new();
    let timed_out = waiter
        .try_acquire_with(
            &Acquire::new()
                .cancel(&token)
                .timeout(Duration::from_millis(20)),
        )
        .unwrap();
    assert!(!timed_out);
    let w = Contender::start(
        mutex(&cw.client, &root),
        Acquire::new()
            .cancel(&token)
            .timeout(Duration::from_secs(3600)),
    );
    eventually(patience, "the waiter queues", || {
        children(ch.client.as_ref(), &root).len() == 2
    });
    token.cancel();
    let outcome = w.outcome(patience, "the cancelled waiter");
    assert!(
        matches!(outcome, Err(Error::Cancelled { .. })),
        "{outcome:?}"
    );
    eventually(patience, "its node is deleted", || {
        children(ch.client.as_ref(), &root).len() == 1
    });
    holder.release().unwrap();
}

/// A guard from `try_lock_with`: held when nothing cancels, released on drop.
#[test]
fn try_lock_with_returns_a_guard() {
    let b = memory();
    let c = b.connect();
    let root = b.root();
    let m = InterProcessMutex::new(c.client.clone(), &root).unwrap();
    let token = CancelToken::new();
    let guard = m.try_lock_with(&Acquire::new().cancel(&token)).unwrap();
    let guard = guard.expect("held");
    assert!(guard.is_valid());
    token.cancel(); // too late: the lock stays held
    assert!(guard.is_valid());
    drop(guard);
    assert!(children(c.client.as_ref(), &root).is_empty());
}

/// A token costs no request: an uncontended cycle through `try_lock_with` and a token makes
/// the requests and round trips of a plain `lock()` (2 round trips for a mutex, 3 for a
/// semaphore mutex, on a pipelining backend).
#[test]
fn a_token_costs_no_request() {
    let b = memory();
    let c = b.connect();
    let memory = c.memory().unwrap();
    let token = CancelToken::new();
    let how = Acquire::new().cancel(&token);
    let cases: [(&str, Make, String); 2] = [
        ("mutex", mutex, format!("{}/m", b.root())),
        (
            "semaphore mutex",
            semaphore_mutex,
            format!("{}/s", b.root()),
        ),
    ];
    for (name, make, root) in cases {
        let cost = |cancellable: bool| {
            let lock = make(&c.client, &root);
            lock.acquire().unwrap(); // the directories exist from here on
            lock.release().unwrap();
            memory.reset_counters();
            match cancellable {
                true => assert!(lock.try_acquire_with(&how).unwrap()),
                false => lock.acquire().unwrap(),
            }
            lock.release().unwrap();
            memory.counters()
        };
        let (plain, with_token) = (cost(false), cost(true));
        assert_eq!(with_token.requests(), plain.requests(), "{name}");
        assert_eq!(with_token.round_trips, plain.round_trips, "{name}");
    }
}
