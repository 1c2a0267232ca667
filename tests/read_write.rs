//! InterProcessReadWriteLock: Curator's TestInterProcessReadWriteLock cases plus writer
//! progress and faults, on the memory backend and a real server.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{children, eventually, Backend};
use zk_locks::locks::{InterProcessLock, InterProcessReadWriteLock, LockState};
use zk_locks::Error;

fn participant_nodes(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let readers = 20;
    let writers = 8;
    let clients: Vec<_> = (0..readers + writers).map(|_| b.connect()).collect();
    let inspector_client = b.connect(); // keeps its proxy alive
    let inspector = InterProcessReadWriteLock::new(inspector_client.client.clone(), &path).unwrap();
    let hold = Barrier::new(readers + 1);
    let release = AtomicBool::new(false);
    // Let the readers go even when an assertion below fails, or the scope would never end.
    struct Release<'a>(&'a AtomicBool);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    thread::scope(|s| {
        let _release = Release(&release);
        // Readers first: a reader queued behind a writer would (rightly) wait for it.
        for (i, c) in clients.iter().enumerate() {
            let (hold, release, path) = (&hold, &release, &path);
            if i == readers {
                hold.wait();
            }
            s.spawn(move || {
                let rw = InterProcessReadWriteLock::new(c.client.clone(), path).unwrap();
                if i < readers {
                    let _g = rw.read_lock().lock().unwrap();
                    hold.wait();
                    while !release.load(Ordering::SeqCst) {
                        thread::sleep(Duration::from_millis(5));
                    }
                } else {
                    let _ = rw
                        .write_lock()
                        .acquire_timeout(Duration::from_secs(60))
                        .unwrap();
                    let _ = rw.write_lock().release();
                }
            });
        }
        eventually(b.patience(), "writers queued", || {
            inspector.write_lock().participant_nodes().unwrap().len() == writers
        });
        assert_eq!(
            inspector.read_lock().participant_nodes().unwrap().len(),
            readers
        );
        assert_eq!(
            inspector.write_lock().participant_nodes().unwrap().len(),
            writers
        );
        release.store(true, Ordering::SeqCst);
    });
}

fn upgrade_is_refused(b: &dyn Backend) {
    let c = b.connect();
    let rw =
        InterProcessReadWriteLock::new(c.client.clone(), &format!("{}/lock", b.root())).unwrap();
    rw.read_lock().acquire().unwrap();
    assert!(matches!(
        rw.write_lock().acquire_timeout(Duration::from_secs(5)),
        Err(Error::UpgradeNotSupported { .. })
    ));
    assert!(matches!(
        rw.write_lock().acquire(),
        Err(Error::UpgradeNotSupported { .. })
    ));
    rw.read_lock().release().unwrap();
    assert!(rw
        .write_lock()
        .acquire_timeout(Duration::from_secs(5))
        .unwrap());
    rw.write_lock().release().unwrap();
}

fn downgrade_respects_threads(b: &dyn Backend) {
    let c = b.connect();
    let rw = Arc::new(
        InterProcessReadWriteLock::new(c.client.clone(), &format!("{}/lock", b.root())).unwrap(),
    );
    rw.write_lock().acquire().unwrap();
    let rw2 = rw.clone();
    let got = thread::spawn(move || {
        rw2.read_lock()
            .acquire_timeout(Duration::from_millis(200))
            .unwrap()
    });
    assert!(
        !got.join().unwrap(),
        "another thread cannot read while this one writes"
    );
    rw.write_lock().release().unwrap();
}

fn downgrading(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/lock", b.root());
    let rw = InterProcessReadWriteLock::new(c.client.clone(), &path).unwrap();
    assert!(rw
        .write_lock()
        .acquire_timeout(Duration::from_secs(5))
        .unwrap());
    assert!(rw
        .read_lock()
        .acquire_timeout(Duration::from_secs(5))
        .unwrap());
    let names = children(c.client.as_ref(), &path);
    let seq = |kind: &str| {
        names
            .iter()
            .find(|n| n.contains(kind))
            .map(|n| n[n.len() - 10..].to_string())
    };
    assert_eq!(
        seq("__READ__"),
        seq("__WRIT__"),
        "the read node takes the write node's sequence: {names:?}"
    );
    rw.write_lock().release().unwrap();
    assert_eq!(children(c.client.as_ref(), &path).len(), 1);
    rw.read_lock().release().unwrap();
    assert!(children(c.client.as_ref(), &path).is_empty());
}

/// CURATOR-621: a writer queued behind a downgrading writer stays blocked.
fn contending_downgrade(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.client.clone(), &path).unwrap();
    let rw2 = InterProcessReadWriteLock::new(c2.client.clone(), &path).unwrap();
    rw1.write_lock().acquire().unwrap();
    let got_write = AtomicBool::new(false);
    thread::scope(|s| {
        let w = s.spawn(|| {
            rw2.write_lock().acquire().unwrap();
            got_write.store(true, Ordering::SeqCst);
            rw2.write_lock().release().unwrap();
        });
        eventually(b.patience(), "writer 2 queued", || {
            rw1.write_lock().participant_nodes().unwrap().len() == 2
        });
        rw1.read_lock().acquire().unwrap();
        rw1.write_lock().release().unwrap();
        // The read node must keep writer 2 out: confirm through a third contender, which can
        // read (no writer ahead of it holds) while writer 2 still waits.
        let c3 = b.connect();
        let rw3 = InterProcessReadWriteLock::new(c3.client.clone(), &path).unwrap();
        assert!(!rw3
            .write_lock()
            .acquire_timeout(Duration::from_millis(300))
            .unwrap());
        assert!(
            !got_write.load(Ordering::SeqCst),
            "writer 2 got in while a reader held the lock"
        );
        rw1.read_lock().release().unwrap();
        w.join().unwrap();
    });
    assert!(got_write.load(Ordering::SeqCst));
}

/// Curator's testBasic: 8 clients x 100 iterations with 10% writes.
fn basic_mix(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let readers_in = AtomicUsize::new(0);
    let writer_in = AtomicBool::new(false);
    let max_readers = AtomicUsize::new(0);
    let clients: Vec<_> = (0..8).map(|_| b.connect()).collect();
    let start = Barrier::new(8);
    thread::scope(|s| {
        for (i, c) in clients.iter().enumerate() {
            let (readers_in, writer_in, max_readers, start, path) =
                (&readers_in, &writer_in, &max_readers, &start, &path);
            s.spawn(move || {
                let rw = InterProcessReadWriteLock::new(c.client.clone(), path).unwrap();
                start.wait();
                for j in 0..100 {
                    if (i * 100 + j) % 10 == 0 {
                        let _g = rw.write_lock().lock().unwrap();
                        assert!(!writer_in.swap(true, Ordering::SeqCst), "two writers");
                        assert_eq!(readers_in.load(Ordering::SeqCst), 0, "writer with readers");
                        thread::sleep(Duration::from_micros(200));
                        writer_in.store(false, Ordering::SeqCst);
                    } else {
                        let _g = rw.read_lock().lock().unwrap();
                        assert!(!writer_in.load(Ordering::SeqCst), "reader with a writer");
                        let now = readers_in.fetch_add(1, Ordering::SeqCst) + 1;
                        max_readers.fetch_max(now, Ordering::SeqCst);
                        thread::sleep(Duration::from_micros(500));
                        readers_in.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert!(
        max_readers.load(Ordering::SeqCst) > 1,
        "reads were never concurrent"
    );
}

/// A queued writer gets in while readers keep arriving (no writer starvation).
fn writer_is_not_starved(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let stop = AtomicBool::new(false);
    let clients: Vec<_> = (0..3).map(|_| b.connect()).collect();
    let writer_c = b.connect();
    thread::scope(|s| {
        for c in &clients {
            let (stop, path) = (&stop, &path);
            s.spawn(move || {
                let rw = InterProcessReadWriteLock::new(c.client.clone(), path).unwrap();
                while !stop.load(Ordering::SeqCst) {
                    let _g = rw.read_lock().lock().unwrap();
                    thread::sleep(Duration::from_millis(2));
                }
            });
        }
        let rw = InterProcessReadWriteLock::new(writer_c.client.clone(), &path).unwrap();
        let got = rw.write_lock().acquire_timeout(b.patience()).unwrap();
        stop.store(true, Ordering::SeqCst);
        assert!(got, "the writer starved");
        rw.write_lock().release().unwrap();
    });
}

/// Curator's testLockPath: the writer's session is killed; a reader gets in and the old write
/// node is gone.
fn lock_path_after_killed_session(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.client.clone(), &path).unwrap();
    let rw2 = InterProcessReadWriteLock::new(c2.client.clone(), &path).unwrap();
    let g = rw1.write_lock().lock().unwrap();
    let write_node = g.node_path().unwrap().to_string();
    c1.faults.expire();
    assert!(rw2.read_lock().acquire_timeout(b.patience()).unwrap());
    assert_eq!(c2.client.exists(&write_node).unwrap(), None);
    assert!(!g.is_valid());
    rw2.read_lock().release().unwrap();
}

/// A reader waiting on a writer survives the expiry of its own session.
fn expiry_while_reader_waits(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.client.clone(), &path).unwrap();
    let rw2 = InterProcessReadWriteLock::new(c2.client.clone(), &path).unwrap();
    rw1.write_lock().acquire().unwrap();
    let patience = b.patience();
    thread::scope(|s| {
        let r = s.spawn(|| {
            let ok = rw2.read_lock().acquire_timeout(patience * 2).unwrap();
            rw2.read_lock().release().unwrap();
            ok
        });
        eventually(patience, "reader queued", || {
            rw1.read_lock().participant_nodes().unwrap().len() == 1
        });
        c2.faults.expire();
        eventually(patience, "reader re-queued", || {
            rw1.read_lock().participant_nodes().unwrap().len() == 1
        });
        rw1.write_lock().release().unwrap();
        assert!(r.join().unwrap());
    });
}

fn node_data(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/lock", b.root());
    let rw = InterProcessReadWriteLock::new(c.client.clone(), &path)
        .unwrap()
        .with_data(vec![1, 2, 3, 4]);
    let g = rw.write_lock().lock().unwrap();
    let kids = children(c.client.as_ref(), &path);
    assert_eq!(kids.len(), 1);
    let (data, _) = c
        .client
        .get_data(&format!("{path}/{}", kids[0]), None)
        .unwrap();
    assert_eq!(data, vec![1, 2, 3, 4]);
    drop(g);
}

fn reentrant_both_sides(b: &dyn Backend) {
    let c = b.connect();
    let rw =
        InterProcessReadWriteLock::new(c.client.clone(), &format!("{}/lock", b.root())).unwrap();
    rw.write_lock().acquire().unwrap();
    rw.write_lock().acquire().unwrap();
    rw.read_lock().acquire().unwrap();
    rw.read_lock().acquire().unwrap();
    rw.write_lock().acquire().unwrap(); // re-entering write while also reading (after downgrade) is fine
    for _ in 0..3 {
        rw.write_lock().release().unwrap();
    }
    assert!(matches!(
        rw.write_lock().release(),
        Err(Error::NotOwner { .. })
    ));
    rw.read_lock().release().unwrap();
    rw.read_lock().release().unwrap();
    assert!(!rw.read_lock().is_acquired_in_this_process());
}

/// A write lock lost with its session is not ours any more: asking for the read lock then is
/// not a downgrade, and waits for the writer that took over.
fn no_downgrade_from_a_lost_write_lock(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.client.clone(), &path).unwrap();
    let rw2 = InterProcessReadWriteLock::new(c2.client.clone(), &path).unwrap();
    let lost_write = rw1.write_lock().lock().unwrap();
    c1.faults.expire();
    assert_eq!(lost_write.state(), LockState::Lost);
    let other_write = rw2
        .write_lock()
        .try_lock_for(b.patience())
        .unwrap()
        .expect("the other client takes the write lock");
    let read = rw1
        .read_lock()
        .try_lock_for(Duration::from_millis(300))
        .unwrap();
    assert!(
        read.is_none(),
        "read granted as a downgrade of a lost write lock while another client writes"
    );
    assert_eq!(other_write.state(), LockState::Held);
    drop(other_write);
    let read = rw1
        .read_lock()
        .try_lock_for(b.patience())
        .unwrap()
        .expect("reads once the other writer is gone");
    assert_eq!(read.state(), LockState::Held);
    drop(read);
    drop(lost_write);
    assert!(children(c2.client.as_ref(), &path).is_empty());
}

suite!(tls [
    participant_nodes,
    upgrade_is_refused,
    downgrade_respects_threads,
    downgrading,
    contending_downgrade,
    basic_mix,
    writer_is_not_starved,
    lock_path_after_killed_session,
    expiry_while_reader_waits,
    node_data,
    reentrant_both_sides,
    no_downgrade_from_a_lost_write_lock,
]);

/// Deterministic on the memory backend: the session expires just before the read node of a
/// downgrade is created, and another client takes the write lock before the create is
/// retried in the new session. The read node must not keep the lost write node's place in the
/// queue (ahead of the new writer).
#[test]
fn expiry_during_downgrade_does_not_let_a_reader_in() {
    use zk_locks::client::memory::{MemoryEnsemble, Op};
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let rw1 = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw2 = Arc::new(InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap());
    rw1.write_lock().acquire().unwrap();
    let fired = Arc::new(AtomicBool::new(false));
    let (f, c, w) = (fired.clone(), c1.clone(), rw2.clone());
    c1.on_request(Some(Box::new(move |op, path| {
        if op == Op::Create && path.contains("__READ__") && !f.swap(true, Ordering::SeqCst) {
            let (c, w) = (c.clone(), w.clone());
            thread::spawn(move || {
                c.expire();
                // Held for the rest of the test.
                assert!(w
                    .write_lock()
                    .acquire_timeout(Duration::from_secs(10))
                    .unwrap());
            })
            .join()
            .unwrap();
        }
    })));
    let read = rw1
        .read_lock()
        .acquire_timeout(Duration::from_millis(300))
        .unwrap();
    c1.on_request(None);
    assert!(fired.load(Ordering::SeqCst));
    let writers = rw2.write_lock().participant_nodes().unwrap();
    assert!(
        !read,
        "read granted while another client holds the write lock: {:?}",
        children(c1.as_ref(), "/rw")
    );
    assert_eq!(writers.len(), 1);
}
