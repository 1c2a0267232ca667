//! What a `LockObserver` costs: an uncontended acquire + release on the in-memory backend
//! (the library's own overhead per cycle, no network), per recipe, with
//!
//! - `none`: no observer set (the default: each event is an `Option` check and a disabled
//!   `log::debug!`);
//! - `noop`: an observer whose methods are the trait's empty defaults;
//! - `counting`: an observer that counts acquisitions and adds up wait and hold times in
//!   atomics (what a service exporting histograms does, minus its metrics library).
//!
//! `cargo bench --bench observer`. The `none` rows are to be read beside `uncontended/memory/*`
//! of `benches/locks.rs` on a build from before the observer existed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::locks::{InterProcessSemaphoreMutex, LockEvent, LockObserver};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient};

struct Noop;
impl LockObserver for Noop {}

#[derive(Default)]
struct Counting {
    acquired: AtomicU64,
    waited_ns: AtomicU64,
    held_ns: AtomicU64,
}

impl LockObserver for Counting {
    fn acquired(&self, _: &LockEvent<'_>, wait: Duration) {
        self.acquired.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
        self.waited_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn released(&self, _: &LockEvent<'_>, held: Duration) {
        let ns = u64::try_from(held.as_nanos()).unwrap_or(u64::MAX);
        self.held_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

fn observers() -> [(&'static str, Option<Arc<dyn LockObserver>>); 3] {
    [
        ("none", None),
        ("noop", Some(Arc::new(Noop))),
        ("counting", Some(Arc::new(Counting::default()))),
    ]
}

fn cycle(lock: &dyn InterProcessLock) {
    lock.acquire().unwrap();
    lock.release().unwrap();
}

fn uncontended(c: &mut Criterion) {
    let ensemble = MemoryEnsemble::new();
    let client: SharedClient = ensemble.connect();
    let mut group = c.benchmark_group("observer/memory");
    for (name, observer) in observers() {
        let mutex = InterProcessMutex::new(client.clone(), &format!("/bench/mutex-{name}"));
        let mutex = match &observer {
            Some(o) => mutex.unwrap().with_observer(o.clone()),
            None => mutex.unwrap(),
        };
        group.bench_function(format!("mutex/{name}"), |b| b.iter(|| cycle(&mutex)));

        let path = format!("/bench/semaphore-mutex-{name}");
        let semaphore_mutex = InterProcessSemaphoreMutex::new(client.clone(), &path);
        let semaphore_mutex = match &observer {
            Some(o) => semaphore_mutex.unwrap().with_observer(o.clone()),
            None => semaphore_mutex.unwrap(),
        };
        group.bench_function(format!("semaphore-mutex/{name}"), |b| {
            b.iter(|| cycle(&semaphore_mutex))
        });
    }
    group.finish();
}

criterion_group!(benches, uncontended);
criterion_main!(benches);
