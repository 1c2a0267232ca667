//! `SharedCount` watches and listeners when changes come close together: a change that fires
//! the watch before the read that armed it is recorded, two changes whose listener calls
//! race, and bursts of changes from another session (the semaphore under bursts runs on every
//! backend in `tests/semaphore.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::client::{Watcher, ZkResult};
use zk_locks::locks::SharedCount;
use zk_locks::testing::harness::eventually;
use zk_locks::{CreateMode, Session, SharedClient, Stat, ZkClient};

use super::PATIENCE;

/// A memory client whose next data read of `path` with a watch is followed, before the read
/// returns to its caller, by a change from another session and by the delivery of the watch
/// that change fires: the notification reaches the caller's watcher before the caller has
/// seen the read's result.
struct ChangeRightAfterRead {
    inner: Arc<MemoryClient>,
    writer: Arc<MemoryClient>,
    path: String,
    value: i32,
    armed: AtomicBool,
}

impl ZkClient for ChangeRightAfterRead {
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        self.inner.create(path, data, mode)
    }
    fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()> {
        self.inner.delete(path, version)
    }
    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        self.inner.exists(path)
    }
    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
        let Some(watcher) = watcher.filter(|_| path == self.path) else {
            return self.inner.get_data(path, None);
        };
        if !self.armed.swap(false, Ordering::SeqCst) {
            return self.inner.get_data(path, Some(watcher));
        }
        let (delivered, fired) = mpsc::channel();
        let read = self.inner.get_data(
            path,
            Some(Box::new(move |event| {
                watcher(event);
                let _ = delivered.send(());
            })),
        );
        self.writer
            .set_data(path, &self.value.to_be_bytes(), None)
            .unwrap();
        fired
            .recv_timeout(PATIENCE)
            .expect("the change fired the watch set by the read");
        read
    }
    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
        self.inner.get_children(path, watcher)
    }
    fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
        self.inner.set_data(path, data, version)
    }
    fn session(&self) -> &Session {
        self.inner.session()
    }
    fn close(&self) {
        self.inner.close()
    }
}

/// Issue 25 item 3: the watch a read arms fires (a change right after the read) before the
/// read is recorded as the one that armed it. Taken for an older watch, that notification
/// was dropped and no watch was left: the count stayed at the value read, for good.
#[test]
fn a_change_right_after_the_read_that_armed_the_watch_is_not_dropped() {
    let e = MemoryEnsemble::new();
    let (c, writer) = (e.connect(), e.connect());
    c.create("/count", &2i32.to_be_bytes(), CreateMode::Persistent)
        .unwrap();
    let racing: SharedClient = Arc::new(ChangeRightAfterRead {
        inner: c,
        writer: writer.clone(),
        path: "/count".into(),
        value: 7,
        armed: AtomicBool::new(true),
    });
    let count = SharedCount::new(racing, "/count", 2).unwrap();
    eventually(
        PATIENCE,
        "the count follows the change made after its read",
        || count.get_count() == 7,
    );
    // And a watch is left for the next change.
    writer
        .set_data("/count", &(-7i32).to_be_bytes(), None)
        .unwrap();
    eventually(PATIENCE, "the count follows the next change", || {
        count.get_count() == -7
    });
}

/// Two `set_count`s whose listener calls overlap: the listeners must end on the value the
/// count holds, not on the older one told last.
#[test]
fn listeners_end_on_the_current_value_when_two_changes_race() {
    let e = MemoryEnsemble::new();
    let count = SharedCount::new(e.connect(), "/count", 0).unwrap();
    // The first listener blocks its first call until released; the second records.
    let (entered, first_call) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(Some(released));
    count.subscribe(move |_| {
        let first = released.lock().unwrap().take(); // not held while blocked
        if let Some(r) = first {
            let _ = entered.send(());
            let _ = r.recv_timeout(PATIENCE);
        }
    });
    let last = Arc::new(Mutex::new(None));
    let l = last.clone();
    count.subscribe(move |v| *l.lock().unwrap() = Some(v));
    thread::scope(|s| {
        let c = count.clone();
        let first = s.spawn(move || c.set_count(1).unwrap());
        first_call
            .recv_timeout(PATIENCE)
            .expect("a listener call for 1 started");
        count.set_count(2).unwrap();
        release.send(()).unwrap();
        first.join().unwrap();
    });
    assert_eq!(count.get_count(), 2);
    eventually(
        PATIENCE,
        "the listeners hear the current value last",
        || *last.lock().unwrap() == Some(2),
    );
}

/// Bursts of changes from another session, each ending on a different value: the count
/// follows every burst to its last value.
#[test]
fn a_count_follows_bursts_of_changes_to_their_last_value() {
    let e = MemoryEnsemble::new();
    let (c, w) = (e.connect(), e.connect());
    let count = SharedCount::new(c, "/count", 0).unwrap();
    let writer = SharedCount::new(w, "/count", 0).unwrap();
    for burst in 1..=50 {
        for v in 0..20 {
            writer.set_count(burst * 100 + v).unwrap();
        }
        let last = if burst % 2 == 0 { -burst } else { burst };
        writer.set_count(last).unwrap();
        eventually(
            PATIENCE,
            &format!("burst {burst} followed to {last}"),
            || count.get_count() == last,
        );
    }
}
