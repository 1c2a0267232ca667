//! Requests per hand-off, per recipe. A waiter whose listing showed only the node it watches
//! keeping it out takes the lock on that node's deletion with no second listing: a mutex
//! waiter right behind the holder (also when the holder is gone before the watch is set), the
//! semaphore's admission, a reader behind one writer, a writer behind readers only. A writer
//! behind a writer (which may downgrade) and a reader behind two writers list again. The rule
//! is checked over every history of a directory by `src/locks/handoff_model/`.

use std::sync::{mpsc, Arc};
use std::thread;

use parking_lot::Mutex;
use zk_locks::client::memory::{MemoryClient, MemoryEnsemble, Op};
use zk_locks::locks::{InterProcessLock, InterProcessReadWriteLock, InterProcessSemaphoreMutex};
use zk_locks::testing::harness::eventually;
use zk_locks::ZkClient;

use super::{mutex, PATIENCE};

/// The requests `c` makes from now on, as (operation, path).
type Log = Arc<Mutex<Vec<(Op, String)>>>;

fn record(c: &Arc<MemoryClient>) -> Log {
    let log = Log::default();
    let sink = log.clone();
    c.on_request(Some(Box::new(move |op, path| {
        sink.lock().push((op, path.to_string()))
    })));
    log
}

/// The operations in `log` on `dir` and its children.
fn ops_under(log: &Log, dir: &str) -> Vec<Op> {
    let child = format!("{dir}/");
    log.lock()
        .iter()
        .filter(|(_, p)| p == dir || p.starts_with(&child))
        .map(|(op, _)| *op)
        .collect()
}

/// Create and listing (one pipeline), the watch, nothing more.
const HAND_OFF: [Op; 3] = [Op::Create, Op::GetChildren, Op::GetData];
/// The same, and a second listing once the watched node goes.
const LISTED_AGAIN: [Op; 4] = [Op::Create, Op::GetChildren, Op::GetData, Op::GetChildren];

/// `waiter` (on `waiter_client`) queues behind whatever holds `dir` now; `release` lets that
/// go once the waiter watches it. The waiter's requests on `dir` until it held the lock.
fn waiter_ops<L: InterProcessLock + Sync>(
    e: &MemoryEnsemble,
    dir: &str,
    waiter_client: &Arc<MemoryClient>,
    waiter: &L,
    release: impl FnOnce(),
) -> Vec<Op> {
    let log = record(waiter_client);
    let ops = thread::scope(|s| {
        let w = s.spawn(|| {
            let g = waiter.lock().unwrap();
            let ops = ops_under(&log, dir);
            drop(g);
            ops
        });
        eventually(PATIENCE, "the waiter watches", || e.watch_count() == 1);
        release();
        w.join().unwrap()
    });
    waiter_client.on_request(None);
    ops
}

#[test]
fn a_mutex_waiter_right_behind_the_holder_lists_once() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let holder = mutex(&c1, "/m");
    let g = holder.lock().unwrap();
    let ops = waiter_ops(&e, "/m", &c2, &mutex(&c2, "/m"), || drop(g));
    assert_eq!(ops, HAND_OFF);
}

/// The holder is gone before the waiter's watch is set (its `get_data` answers `NoNode`): the
/// lock is the waiter's without a second listing. With zero hold time, most contended
/// acquisitions at two sessions take this path.
#[test]
fn a_mutex_waiter_whose_holder_left_before_the_watch_lists_once() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let holder = mutex(&c1, "/m");
    holder.acquire().unwrap();
    let held = holder.held_node().unwrap().path().to_string();
    let deleter = c1.clone();
    // Just before the waiter's watch is set, the holder's node goes.
    c2.on_request(Some(Box::new(move |op, _| {
        if op == Op::GetData {
            deleter.delete(&held, None).unwrap();
        }
    })));
    let waiter = mutex(&c2, "/m");
    assert!(waiter.acquire_timeout(PATIENCE).unwrap());
    c2.on_request(None);
    waiter.release().unwrap();
    holder.release().unwrap();
    let c = c2.counters();
    assert_eq!(
        (c.create, c.get_children, c.get_data, c.watch_events),
        (1, 1, 1, 0),
        "{c:?}"
    );
}

#[test]
fn a_reader_behind_one_writer_lists_once() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw2 = InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap();
    let w = rw1.write_lock().lock().unwrap();
    let ops = waiter_ops(&e, "/rw", &c2, rw2.read_lock(), || drop(w));
    assert_eq!(ops, HAND_OFF);
}

#[test]
fn a_writer_behind_readers_only_lists_once() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw2 = InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap();
    let r = rw1.read_lock().lock().unwrap();
    let ops = waiter_ops(&e, "/rw", &c2, rw2.write_lock(), || drop(r));
    assert_eq!(ops, HAND_OFF);
}

/// The writer ahead may downgrade (its read node, with its sequence, would sort ahead of us
/// when the write node goes): only a listing can tell.
#[test]
fn a_writer_behind_a_writer_lists_again() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw2 = InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap();
    let w = rw1.write_lock().lock().unwrap();
    let ops = waiter_ops(&e, "/rw", &c2, rw2.write_lock(), || drop(w));
    assert_eq!(ops, LISTED_AGAIN);
}

/// A reader behind two writers watches the first; when it goes, the second may still hold.
#[test]
fn a_reader_behind_two_writers_lists_again() {
    let e = MemoryEnsemble::new();
    let (c1, c2, c3) = (e.connect(), e.connect(), e.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw2 = InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap();
    let rw3 = InterProcessReadWriteLock::new(c3.clone(), "/rw").unwrap();
    let w1 = rw1.write_lock().lock().unwrap();
    let log = record(&c2);
    let ops = thread::scope(|s| {
        let (let_go, go) = mpsc::channel::<()>();
        let second = s.spawn(move || {
            let g = rw3.write_lock().lock().unwrap();
            go.recv().unwrap();
            drop(g);
        });
        eventually(PATIENCE, "the second writer watches", || {
            e.watch_count() == 1
        });
        let reader = s.spawn(|| {
            let g = rw2.read_lock().lock().unwrap();
            let ops = ops_under(&log, "/rw");
            drop(g);
            ops
        });
        eventually(PATIENCE, "the reader queued", || {
            e.children("/rw").unwrap().len() == 3
        });
        drop(w1);
        // The reader lists again, sees the second writer holding, and watches it.
        eventually(PATIENCE, "the reader watches the second writer", || {
            ops_under(&log, "/rw").len() == 5 && e.watch_count() == 1
        });
        let_go.send(()).unwrap();
        second.join().unwrap();
        reader.join().unwrap()
    });
    c2.on_request(None);
    let mut expected = LISTED_AGAIN.to_vec();
    expected.push(Op::GetData);
    assert_eq!(ops, expected);
}

/// The semaphore's admission is a mutex: a client queued for admission behind the admitted
/// one (which waits for a lease) is admitted on that admission node's deletion, listing the
/// admission directory once.
#[test]
fn a_client_queued_for_admission_lists_the_admission_directory_once() {
    let e = MemoryEnsemble::new();
    let (c1, c2, c3) = (e.connect(), e.connect(), e.connect());
    let (s1, s2, s3) = (
        InterProcessSemaphoreMutex::new(c1.clone(), "/sem").unwrap(),
        InterProcessSemaphoreMutex::new(c2.clone(), "/sem").unwrap(),
        InterProcessSemaphoreMutex::new(c3.clone(), "/sem").unwrap(),
    );
    let g1 = s1.lock().unwrap();
    let log = record(&c3);
    let admission = thread::scope(|s| {
        let (let_go, go) = mpsc::channel::<()>();
        let second = s.spawn(move || {
            let g = s2.lock().unwrap();
            go.recv().unwrap();
            drop(g);
        });
        eventually(
            PATIENCE,
            "the second is admitted and waits for a lease",
            || e.children("/sem/leases").unwrap().len() == 2 && e.watch_count() == 1,
        );
        let third = s.spawn(|| {
            let g = s3.lock().unwrap();
            let ops = ops_under(&log, "/sem/locks");
            drop(g);
            ops
        });
        eventually(PATIENCE, "the third watches the admission", || {
            e.watch_count() == 2
        });
        drop(g1);
        eventually(
            PATIENCE,
            "the third is admitted and waits for a lease",
            || {
                let leases = e.children("/sem/leases").unwrap().len();
                leases == 2 && e.children("/sem/locks").unwrap().len() == 1
            },
        );
        let_go.send(()).unwrap();
        second.join().unwrap();
        third.join().unwrap()
    });
    c3.on_request(None);
    // Queued (create, listing), watched the admitted node, admitted on its deletion (then
    // asked once whether the admission is still its own, and released it).
    let queue: Vec<Op> = admission
        .iter()
        .copied()
        .filter(|op| matches!(op, Op::Create | Op::GetChildren | Op::GetData))
        .collect();
    assert_eq!(queue, HAND_OFF, "{admission:?}");
}
