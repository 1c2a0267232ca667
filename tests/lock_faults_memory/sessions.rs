//! The mutex and the guards when a connection or a session is lost at an exact point: a
//! create lost before or after it was applied, a node left by an earlier session, our node
//! deleted by hand, a holder's states, a lost hold that is neither released twice nor
//! re-entered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zk_locks::client::memory::{Fault, MemoryEnsemble, Op};
use zk_locks::locks::{InterProcessLock, LockState};
use zk_locks::testing::harness::{eventually, wait_connected};
use zk_locks::ZkClient;

use super::{mutex, mutex_with_parents, PATIENCE};

#[test]
fn connection_loss_before_create_is_applied_creates_once() {
    let (e, c, m) = mutex_with_parents("/locks/a");
    c.inject(Fault::before(Op::Create));
    let g = m.lock().unwrap();
    assert_eq!(e.children("/locks/a").unwrap().len(), 1);
    drop(g);
    assert_eq!(e.children("/locks/a").unwrap().len(), 0);
}

/// The lock directory is missing (never made, or a reaped container): the parents are
/// created on the way, and a connection loss there is retried under the policy, as a lost
/// create is, not returned to the caller. Both of the parents' requests are struck.
#[test]
fn connection_loss_while_creating_the_parents_is_retried() {
    for op in [Op::Exists, Op::Create] {
        let e = MemoryEnsemble::new();
        let c = e.connect();
        let m = mutex(&c, "/locks/fresh");
        // Strike the first `op` on the directory itself (not on the lock node under it).
        let weak = Arc::downgrade(&c);
        let struck = AtomicUsize::new(0);
        c.on_request(Some(Box::new(move |o, path| {
            if o == op && path == "/locks/fresh" && struck.fetch_add(1, Ordering::SeqCst) == 0 {
                if let Some(c) = weak.upgrade() {
                    c.inject(Fault::before(op));
                }
            }
        })));
        let g = m
            .lock()
            .unwrap_or_else(|e| panic!("{op:?} lost on a parent: {e}"));
        c.on_request(None);
        assert_eq!(e.children("/locks/fresh").unwrap().len(), 1, "{op:?}");
        drop(g);
    }
}

#[test]
fn connection_loss_after_create_is_applied_adopts_our_node() {
    let (e, c, m) = mutex_with_parents("/locks/a");
    c.inject(Fault::after(Op::Create));
    let g = m.lock().unwrap();
    let kids = e.children("/locks/a").unwrap();
    assert_eq!(kids.len(), 1, "adopted, not created twice: {kids:?}");
    assert_eq!(g.node_path().unwrap(), format!("/locks/a/{}", kids[0]));
    drop(g);
    assert_eq!(e.children("/locks/a").unwrap().len(), 0, "no orphan");
}

#[test]
fn a_node_left_by_our_previous_session_is_not_adopted() {
    // CURATOR-498: the create is applied, the connection drops, and the session expires before
    // we look: the node we find by prefix (if the server still lists it) is not ours.
    let (e, c, m) = mutex_with_parents("/locks/a");
    let c2 = c.clone();
    let expired = Arc::new(AtomicUsize::new(0));
    let ex = expired.clone();
    c.inject(Fault::after(Op::Create));
    c.on_request(Some(Box::new(move |op, _path| {
        // The first look-up after the lost create: expire the session first.
        if op == Op::GetChildren && ex.fetch_add(1, Ordering::SeqCst) == 0 {
            let c3 = c2.clone();
            thread::spawn(move || c3.expire()).join().unwrap();
        }
    })));
    let g = m.lock().unwrap();
    c.on_request(None);
    let kids = e.children("/locks/a").unwrap();
    assert_eq!(kids.len(), 1, "{kids:?}");
    let (_, stat) = e.node(g.node_path().unwrap()).unwrap();
    assert_eq!(
        stat.ephemeral_owner,
        c.session_id(),
        "owned by the current session"
    );
    assert_eq!(g.state(), LockState::Held);
}

/// A waiter deep in the queue whose node is deleted by hand notices at its next listing and
/// queues again with a new node. (The hand-off without a re-list assumes lock nodes are only
/// deleted by their owners or by session expiry: see ARCHITECTURE.md.)
#[test]
fn our_node_vanishing_while_waiting_retries_with_a_new_node() {
    let e = MemoryEnsemble::new();
    let (c1, c2, c3) = (e.connect(), e.connect(), e.connect());
    let (m1, m2, m3) = (mutex(&c1, "/l"), mutex(&c2, "/l"), mutex(&c3, "/l"));
    let g1 = m1.lock().unwrap();
    thread::scope(|s| {
        let w2 = s.spawn(|| m2.lock().map(|g| g.unlock()).unwrap());
        eventually(PATIENCE, "2 queued", || {
            e.children("/l").unwrap().len() == 2
        });
        let w3 = s.spawn(|| {
            assert!(m3.acquire_timeout(PATIENCE).unwrap());
            let live = e.node(m3.held_node().unwrap().path()).is_some();
            m3.release().unwrap();
            live
        });
        eventually(PATIENCE, "3 queued", || {
            e.children("/l").unwrap().len() == 3
        });
        let third = m1.participant_nodes().unwrap()[2].clone();
        c1.delete(&third, None).unwrap();
        drop(g1);
        w2.join().unwrap().unwrap();
        assert!(w3.join().unwrap(), "holds through a live node");
    });
    assert!(e.children("/l").unwrap_or_default().is_empty());
}

#[test]
fn holder_sees_suspect_then_held_on_a_blip_and_lost_on_expiry() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = mutex(&c, "/l");
    let g = m.lock().unwrap();
    c.suspend();
    assert_eq!(g.state(), LockState::Suspect);
    c.resume();
    wait_connected(c.as_ref());
    assert_eq!(g.state(), LockState::Held);
    let node = g.nodes()[0].clone();
    thread::scope(|s| {
        let waiting = s.spawn(|| node.wait_while_held(Some(PATIENCE)));
        c.expire();
        assert_eq!(waiting.join().unwrap(), LockState::Lost);
    });
    assert_eq!(g.state(), LockState::Lost);
}

#[test]
fn node_deleted_by_hand_while_holding_is_lost_after_reconnect() {
    let e = MemoryEnsemble::new();
    let (c, admin) = (e.connect(), e.connect());
    let m = mutex(&c, "/l");
    let g = m.lock().unwrap();
    admin.delete(g.node_path().unwrap(), None).unwrap();
    c.suspend();
    c.resume();
    wait_connected(c.as_ref());
    assert_eq!(g.state(), LockState::Lost);
}

#[test]
fn wait_until_lost_sits_out_a_suspect_spell() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = mutex(&c, "/l");
    let g = m.lock().unwrap();
    let node = g.nodes()[0].clone();
    thread::scope(|s| {
        let waiting = s.spawn(|| node.wait_until_lost(Some(PATIENCE)));
        c.suspend();
        c.resume();
        wait_connected(c.as_ref());
        c.expire();
        // Had the wait ended at Suspect, it would say so here.
        assert_eq!(waiting.join().unwrap(), LockState::Lost);
    });
}

/// A guard whose hold was lost with its session, then replaced by a new hold of the same
/// thread (after an explicit release), must not release the new hold when dropped: a guard
/// releases its own hold and nothing else. The same for each side of a read/write lock.
#[test]
fn a_lost_guard_does_not_release_the_next_hold() {
    use zk_locks::locks::InterProcessReadWriteLock;
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let m = mutex(&c1, "/m");
    let other = mutex(&c2, "/m");
    let lost = m.lock().unwrap();
    c1.expire();
    assert_eq!(lost.state(), LockState::Lost);
    m.release().unwrap();
    let current = m.lock().unwrap();
    drop(lost);
    assert_eq!(current.state(), LockState::Held);
    assert!(
        !other.acquire_timeout(Duration::from_millis(100)).unwrap(),
        "another client got in: the lost guard released the current hold"
    );
    drop(current);
    assert!(other.acquire_timeout(PATIENCE).unwrap());
    other.release().unwrap();

    let rw = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw_other = InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap();
    let lost = rw.write_lock().lock().unwrap();
    c1.expire();
    rw.write_lock().release().unwrap();
    let current = rw.write_lock().lock().unwrap();
    drop(lost);
    assert!(
        !rw_other
            .read_lock()
            .acquire_timeout(Duration::from_millis(100))
            .unwrap(),
        "another client read: the lost guard released the current write hold"
    );
    drop(current);
    assert!(rw_other.read_lock().acquire_timeout(PATIENCE).unwrap());
}

/// Re-entering a hold that was lost with its session must not succeed as a reentrant count
/// (another client may hold the lock by then): a typed error, and once the lost hold is
/// released, a fresh acquire queues as usual. The same for a write lock.
#[test]
fn reentering_a_lost_hold_is_a_typed_error() {
    use zk_locks::locks::InterProcessReadWriteLock;
    use zk_locks::Error;
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let m = mutex(&c1, "/m");
    let other = mutex(&c2, "/m");
    m.acquire().unwrap();
    c1.expire();
    assert!(other.acquire_timeout(PATIENCE).unwrap());
    let again = m.acquire_timeout(Duration::from_millis(100));
    assert!(
        matches!(again, Err(Error::SessionLost { .. })),
        "re-entered a lost hold while another client holds the lock: {again:?}"
    );
    m.release().unwrap();
    assert!(!m.acquire_timeout(Duration::from_millis(100)).unwrap());
    other.release().unwrap();
    assert!(m.acquire_timeout(PATIENCE).unwrap());
    m.release().unwrap();

    let rw = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw_other = InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap();
    rw.write_lock().acquire().unwrap();
    c1.expire();
    assert!(rw_other.write_lock().acquire_timeout(PATIENCE).unwrap());
    let again = rw.write_lock().acquire();
    assert!(
        matches!(again, Err(Error::SessionLost { .. })),
        "re-entered a lost write lock while another client writes: {again:?}"
    );
    rw.write_lock().release().unwrap();
    rw_other.write_lock().release().unwrap();
}

/// A waiter right behind the holder takes the lock on the holder's deletion without listing
/// again, but only in the session its node lives in: when its session expired while its
/// link was down (the holder let go meanwhile), the watch it had is gone with the session,
/// and its old node with it. It queues again with a new node, and the old one is not held.
/// With watches that survive a reconnect, as the native client's do.
#[test]
fn a_waiter_whose_session_expired_meanwhile_does_not_hand_over_on_its_old_node() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    c2.set_watches_survive_reconnect(true);
    let (holder, waiter) = (mutex(&c1, "/l"), mutex(&c2, "/l"));
    holder.acquire().unwrap();
    thread::scope(|s| {
        let w = s.spawn(|| {
            assert!(waiter.acquire_timeout(PATIENCE).unwrap(), "not acquired");
            let path = waiter.held_node().unwrap().path().to_string();
            let live = e.node(&path).is_some();
            waiter.release().unwrap();
            (path, live)
        });
        eventually(PATIENCE, "the waiter watches the holder", || {
            e.watch_count() == 1
        });
        let old = e.children("/l").unwrap();
        c2.suspend();
        holder.release().unwrap();
        c2.expire();
        c2.resume();
        let (path, live) = w.join().unwrap();
        assert!(live, "held through a live node");
        assert!(
            !old.iter().any(|n| path.ends_with(n.as_str())),
            "held through its old node {path}: {old:?}"
        );
    });
    assert!(e.children("/l").unwrap_or_default().is_empty());
}
