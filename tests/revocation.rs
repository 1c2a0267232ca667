//! The revocation listener (`make_revocable`): it runs on a thread of its own, never inside
//! `lock()`, after the hold is recorded, and exactly once per revoke request whatever the
//! reconnects. On the memory backend (watches restored across reconnects or not) and on a
//! real server (both clients).

#[macro_use]
mod common;

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::{self, ThreadId};
use std::time::Duration;

use common::{eventually, Backend, Memory};
use zk_locks::client::memory::Fault;
use zk_locks::client::Op;
use zk_locks::locks::{InterProcessLock, InterProcessMutex, Revoker};
use zk_locks::SharedClient;

/// How long a test looks for a listener call that must not come (a duplicate call comes
/// within milliseconds of the one before it).
const QUIET: Duration = Duration::from_secs(1);

/// What the listener saw when it was called.
#[derive(Debug)]
struct Call {
    thread: ThreadId,
    hold_recorded: bool,
}

/// A revocable mutex whose listener reports each call on the returned receiver.
fn revocable(client: SharedClient, path: &str) -> (Arc<InterProcessMutex>, Receiver<Call>) {
    revocable_waiting(client, path, None)
}

/// [`revocable`], the listener then waiting (bounded by `hold_on`) for a word on the
/// returned sender, as a listener that hands off to the holder and waits for it would.
fn revocable_waiting(
    client: SharedClient,
    path: &str,
    hold_on: Option<(Receiver<()>, Duration)>,
) -> (Arc<InterProcessMutex>, Receiver<Call>) {
    let m = Arc::new(InterProcessMutex::new(client, path).unwrap());
    let me: Arc<OnceLock<Weak<InterProcessMutex>>> = Arc::new(OnceLock::new());
    let _ = me.set(Arc::downgrade(&m));
    let (tx, rx) = mpsc::channel();
    let tx = parking_lot::Mutex::new(tx);
    let hold_on = parking_lot::Mutex::new(hold_on);
    m.make_revocable(move || {
        let hold_recorded = me
            .get()
            .and_then(Weak::upgrade)
            .is_some_and(|m| m.is_acquired_in_this_process());
        let _ = tx.lock().send(Call {
            thread: thread::current().id(),
            hold_recorded,
        });
        if let Some((go, bound)) = hold_on.lock().as_ref() {
            let _ = go.recv_timeout(*bound);
        }
    });
    (m, rx)
}

/// The next call, within `patience`.
fn next_call(calls: &Receiver<Call>, patience: Duration) -> Call {
    calls
        .recv_timeout(patience)
        .expect("the revocation listener was called")
}

fn no_more_calls(calls: &Receiver<Call>) {
    match calls.recv_timeout(QUIET) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("the listener was called again for the same request: {other:?}"),
    }
}

/// A revoker asked the whole queue, the waiter included: the waiter's node carries the
/// request when its acquisition arms the watch. `lock()` returns; the listener runs on
/// another thread, once the hold is recorded, even when it waits for the holder.
fn a_request_waiting_at_acquisition(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let first = InterProcessMutex::new(a.client.clone(), &path).unwrap();
    first.acquire().unwrap();
    let (go_tx, go_rx) = mpsc::channel();
    let bound = b.patience() * 3;
    let (m, calls) = revocable_waiting(c.client.clone(), &path, Some((go_rx, bound)));
    let (locked_tx, locked_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = {
        let m = m.clone();
        thread::spawn(move || {
            m.acquire().unwrap();
            locked_tx.send(thread::current().id()).unwrap();
            let _ = release_rx.recv();
            m.release().unwrap();
        })
    };
    eventually(b.patience(), "the revocable mutex queues", || {
        first.participant_nodes().unwrap().len() == 2
    });
    for node in first.participant_nodes().unwrap() {
        Revoker::attempt_revoke(&a.client, &node).unwrap();
    }
    first.release().unwrap();
    let acquiring = locked_rx
        .recv_timeout(b.patience())
        .expect("lock() returns while its listener waits for the holder");
    let call = next_call(&calls, b.patience());
    assert_ne!(call.thread, acquiring, "the listener ran inside lock()");
    assert!(
        call.hold_recorded,
        "the listener ran before the hold was recorded"
    );
    go_tx.send(()).unwrap();
    no_more_calls(&calls);
    release_tx.send(()).unwrap();
    holder.join().unwrap();
}

/// A request heard before a reconnect is not heard again after it (the watch re-armed after
/// a reconnect reads the same request).
fn a_request_is_heard_once_across_a_reconnect(b: &dyn Backend) {
    let (c, other) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let (m, calls) = revocable(c.client.clone(), &path);
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    Revoker::attempt_revoke(&other.client, &node).unwrap();
    next_call(&calls, b.patience());
    c.faults.blip();
    no_more_calls(&calls);
    // A new request is heard again.
    Revoker::attempt_revoke(&other.client, &node).unwrap();
    next_call(&calls, b.patience());
    no_more_calls(&calls);
    drop(g);
}

suite!([
    a_request_waiting_at_acquisition,
    a_request_is_heard_once_across_a_reconnect
]);

/// With watches restored across reconnects (as ZooKeeper's own clients and ours do), every
/// reconnect used to arm one more watch beside the restored one: after N reconnects one
/// request called the listener N + 1 times.
#[test]
fn one_call_per_request_after_reconnects_that_restore_watches() {
    let b = Memory::new();
    let (c, other) = (b.connect(), b.connect());
    let memory = c.memory().unwrap();
    memory.set_watches_survive_reconnect(true);
    let path = format!("{}/lock", b.root());
    let (m, calls) = revocable(c.client.clone(), &path);
    let g = m.lock().unwrap();
    for _ in 0..3 {
        c.faults.blip();
    }
    Revoker::attempt_revoke(&other.client, g.node_path().unwrap()).unwrap();
    next_call(&calls, b.patience());
    no_more_calls(&calls);
    drop(g);
}

/// The first arming's connection is lost (no watch was set, restored or not): the reconnect
/// arms it, and a request is heard once.
#[test]
fn a_watch_lost_with_its_connection_is_armed_after_the_reconnect() {
    for restore in [false, true] {
        let b = Memory::new();
        let (c, other) = (b.connect(), b.connect());
        let memory = c.memory().unwrap();
        memory.set_watches_survive_reconnect(restore);
        let path = format!("{}/lock", b.root());
        let (m, calls) = revocable(c.client.clone(), &path);
        memory.inject(Fault::before(Op::GetData).on_path(&path));
        let g = m.lock().unwrap();
        eventually(b.patience(), "the revocation watch is armed", || {
            b.watches_under(&path) == 1
        });
        Revoker::attempt_revoke(&other.client, g.node_path().unwrap()).unwrap();
        next_call(&calls, b.patience());
        no_more_calls(&calls);
        drop(g);
    }
}

/// The first arming times out while the link stays up (no reconnect will come to arm it):
/// it is tried again, and a request is heard.
#[test]
fn a_timed_out_arming_is_tried_again() {
    let b = Memory::new();
    let (c, other) = (b.connect(), b.connect());
    let memory = c.memory().unwrap();
    let path = format!("{}/lock", b.root());
    let (m, calls) = revocable(c.client.clone(), &path);
    memory.inject(Fault::timeout(Op::GetData).on_path(&path));
    let g = m.lock().unwrap();
    eventually(b.patience(), "the revocation watch is armed", || {
        b.watches_under(&path) == 1
    });
    Revoker::attempt_revoke(&other.client, g.node_path().unwrap()).unwrap();
    next_call(&calls, b.patience());
    no_more_calls(&calls);
    drop(g);
}
