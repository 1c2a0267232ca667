//! `participants()` on every recipe: the queue in Curator's order, each node's data, and the
//! holder flag from the recipe's own rule, on the memory backend and a real server.

#[macro_use]
mod common;

use std::thread;

use common::{eventually, Backend, TestClient};
use zk_locks::locks::{
    InterProcessLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2, Participant, ParticipantKind,
};
use zk_locks::SharedClient;

/// Keeps every session of a test open (a real backend's session lives behind a fault proxy
/// that goes with its `TestClient`).
struct Sessions<'a> {
    backend: &'a dyn Backend,
    open: std::sync::Mutex<Vec<TestClient>>,
}

impl<'a> Sessions<'a> {
    fn new(backend: &'a dyn Backend) -> Self {
        Sessions {
            backend,
            open: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A new session's client.
    fn client(&self) -> SharedClient {
        let test_client = self.backend.connect();
        let client = test_client.client.clone();
        self.open.lock().unwrap().push(test_client);
        client
    }
}

fn flags(queue: &[Participant]) -> Vec<bool> {
    queue.iter().map(|p| p.is_holder).collect()
}

fn kinds(queue: &[Participant]) -> Vec<ParticipantKind> {
    queue.iter().map(|p| p.kind).collect()
}

fn data(queue: &[Participant]) -> Vec<String> {
    queue
        .iter()
        .map(|p| String::from_utf8_lossy(&p.data).into_owned())
        .collect()
}

fn paths(queue: &[Participant]) -> Vec<String> {
    queue.iter().map(|p| p.path.clone()).collect()
}

fn mutex_lists_the_holder_first_then_the_waiters_in_order(b: &dyn Backend) {
    let c = Sessions::new(b);
    let path = format!("{}/mutex", b.root());
    let holder = InterProcessMutex::new(c.client(), &path)
        .unwrap()
        .with_data("holder");
    let waiters: Vec<_> = (0..2)
        .map(|i| {
            InterProcessMutex::new(c.client(), &path)
                .unwrap()
                .with_data(format!("waiter-{i}"))
        })
        .collect();
    let guard = holder.lock().unwrap();
    thread::scope(|s| {
        for (i, waiter) in waiters.iter().enumerate() {
            s.spawn(move || assert!(waiter.try_lock_for(b.patience()).unwrap().is_some()));
            eventually(b.patience(), "the waiter queues", || {
                holder.participants().unwrap().len() == i + 2
            });
        }
        let queue = holder.participants().unwrap();
        assert_eq!(flags(&queue), [true, false, false], "{queue:?}");
        assert_eq!(kinds(&queue), [ParticipantKind::Mutex; 3]);
        assert_eq!(data(&queue), ["holder", "waiter-0", "waiter-1"]);
        assert_eq!(queue[0].path, guard.node_path().unwrap());
        assert!(queue[0].path.ends_with(&queue[0].name));
        // The order every Curator client lists (`getParticipantNodes`).
        assert_eq!(paths(&queue), holder.participant_nodes().unwrap());
        // Every contender sees the same queue.
        assert_eq!(waiters[1].participants().unwrap(), queue);
        drop(guard);
    });
}

fn read_write_readers_ahead_of_a_writer_hold_and_the_writer_waits(b: &dyn Backend) {
    let c = Sessions::new(b);
    let path = format!("{}/rw", b.root());
    let rw: Vec<_> = (0..3)
        .map(|i| {
            InterProcessReadWriteLock::new(c.client(), &path)
                .unwrap()
                .with_data(format!("rw-{i}"))
        })
        .collect();
    let r0 = rw[0].read_lock().lock().unwrap();
    let r1 = rw[1].read_lock().lock().unwrap();
    thread::scope(|s| {
        let writer = &rw[2];
        s.spawn(move || {
            assert!(writer
                .write_lock()
                .try_lock_for(b.patience())
                .unwrap()
                .is_some())
        });
        eventually(b.patience(), "the writer queues", || {
            rw[0].participants().unwrap().len() == 3
        });
        let queue = rw[0].participants().unwrap();
        use ParticipantKind::{Read, Write};
        assert_eq!(kinds(&queue), [Read, Read, Write], "{queue:?}");
        assert_eq!(flags(&queue), [true, true, false], "{queue:?}");
        assert_eq!(data(&queue), ["rw-0", "rw-1", "rw-2"]);
        let reads = rw[1].read_lock().participants().unwrap();
        assert_eq!(reads, queue[..2]);
        assert_eq!(
            paths(&reads),
            rw[1].read_lock().participant_nodes().unwrap()
        );
        let writes = rw[1].write_lock().participants().unwrap();
        assert_eq!(writes, queue[2..]);
        assert_eq!(
            paths(&writes),
            rw[1].write_lock().participant_nodes().unwrap()
        );
        drop((r0, r1));
    });
}

fn read_write_a_writer_ahead_of_readers_holds_and_the_readers_wait(b: &dyn Backend) {
    let c = Sessions::new(b);
    let path = format!("{}/rw", b.root());
    let rw: Vec<_> = (0..3)
        .map(|_| InterProcessReadWriteLock::new(c.client(), &path).unwrap())
        .collect();
    let w = rw[0].write_lock().lock().unwrap();
    thread::scope(|s| {
        for (i, reader) in rw[1..].iter().enumerate() {
            s.spawn(move || {
                assert!(reader
                    .read_lock()
                    .try_lock_for(b.patience())
                    .unwrap()
                    .is_some())
            });
            eventually(b.patience(), "the reader queues", || {
                rw[0].participants().unwrap().len() == i + 2
            });
        }
        let queue = rw[2].participants().unwrap();
        use ParticipantKind::{Read, Write};
        assert_eq!(kinds(&queue), [Write, Read, Read], "{queue:?}");
        assert_eq!(flags(&queue), [true, false, false], "{queue:?}");
        assert_eq!(queue[0].path, w.node_path().unwrap());
        // The write holder's own thread sees the same flags: what only it knows (it may read
        // at once, a downgrade) is no flag on other readers' nodes.
        assert_eq!(rw[0].participants().unwrap(), queue);
        drop(w);
    });
}

/// A write holder that takes the read lock (a downgrade) holds through both nodes, which share
/// one sequence and may sort either way round.
fn read_write_a_downgrade_holds_through_both_nodes(b: &dyn Backend) {
    let c = Sessions::new(b);
    let path = format!("{}/rw", b.root());
    let rw = InterProcessReadWriteLock::new(c.client(), &path).unwrap();
    let observer = InterProcessReadWriteLock::new(c.client(), &path).unwrap();
    let w = rw.write_lock().lock().unwrap();
    let r = rw.read_lock().lock().unwrap();
    let queue = observer.participants().unwrap();
    assert_eq!(queue.len(), 2, "{queue:?}");
    assert_eq!(flags(&queue), [true, true], "{queue:?}");
    assert_eq!(rw.participants().unwrap(), queue);
    drop(w);
    let queue = observer.participants().unwrap();
    assert_eq!(kinds(&queue), [ParticipantKind::Read]);
    assert_eq!(flags(&queue), [true]);
    assert_eq!(queue[0].path, r.node_path().unwrap());
}

fn semaphore_of_two_with_three_contenders_has_one_waiting(b: &dyn Backend) {
    let c = Sessions::new(b);
    let path = format!("{}/sem", b.root());
    let sems: Vec<_> = (0..3)
        .map(|i| {
            InterProcessSemaphoreV2::new(c.client(), &path, 2)
                .unwrap()
                .with_data(format!("sem-{i}"))
        })
        .collect();
    let l0 = sems[0].acquire().unwrap();
    let l1 = sems[1].acquire().unwrap();
    thread::scope(|s| {
        let third = &sems[2];
        s.spawn(move || assert!(third.acquire_timeout(b.patience()).unwrap().is_some()));
        eventually(b.patience(), "the third lease waits for room", || {
            sems[0].participants().unwrap().len() == 3
        });
        let queue = sems[0].participants().unwrap();
        assert_eq!(kinds(&queue), [ParticipantKind::Lease; 3]);
        assert_eq!(flags(&queue), [true, true, false], "{queue:?}");
        assert_eq!(data(&queue), ["sem-0", "sem-1", "sem-2"]);
        assert_eq!(queue[0].name, l0.node_name());
        assert_eq!(queue[1].path, l1.node_path());
        let mut unsorted = sems[1].participant_nodes().unwrap();
        unsorted.sort();
        let mut names: Vec<String> = queue.iter().map(|p| p.name.clone()).collect();
        names.sort();
        assert_eq!(names, unsorted);
        drop(l0);
    });
    drop(l1);
}

fn semaphore_mutex_lists_its_holder_and_one_waiting(b: &dyn Backend) {
    let c = Sessions::new(b);
    let path = format!("{}/semmutex", b.root());
    let holder = InterProcessSemaphoreMutex::new(c.client(), &path).unwrap();
    let waiter = InterProcessSemaphoreMutex::new(c.client(), &path).unwrap();
    let guard = holder.lock().unwrap();
    thread::scope(|s| {
        let waiter = &waiter;
        s.spawn(move || assert!(waiter.try_lock_for(b.patience()).unwrap().is_some()));
        eventually(b.patience(), "the waiter's lease waits", || {
            holder.participants().unwrap().len() == 2
        });
        let queue = waiter.participants().unwrap();
        assert_eq!(flags(&queue), [true, false], "{queue:?}");
        assert_eq!(queue[0].path, guard.node_path().unwrap());
        drop(guard);
    });
}

fn a_lock_nobody_used_has_no_participants(b: &dyn Backend) {
    let path = format!("{}/none", b.root());
    let sessions = Sessions::new(b);
    let c = sessions.client();
    assert!(InterProcessMutex::new(c.clone(), &path)
        .unwrap()
        .participants()
        .unwrap()
        .is_empty());
    let rw = InterProcessReadWriteLock::new(c.clone(), &path).unwrap();
    assert!(rw.participants().unwrap().is_empty());
    assert!(rw.read_lock().participants().unwrap().is_empty());
    let sem = InterProcessSemaphoreV2::new(c, &path, 3).unwrap();
    assert!(sem.participants().unwrap().is_empty());
}

suite!([
    mutex_lists_the_holder_first_then_the_waiters_in_order,
    read_write_readers_ahead_of_a_writer_hold_and_the_writer_waits,
    read_write_a_writer_ahead_of_readers_holds_and_the_readers_wait,
    read_write_a_downgrade_holds_through_both_nodes,
    semaphore_of_two_with_three_contenders_has_one_waiting,
    semaphore_mutex_lists_its_holder_and_one_waiting,
    a_lock_nobody_used_has_no_participants,
]);
