//! Criterion benches of the lock recipes.
//!
//! - `uncontended/<backend>/<recipe>`: one acquire + release, one session, for every recipe;
//!   on the in-memory backend this is the library's own overhead per cycle.
//! - `contended/<backend>/<n>`: n sessions, one thread each, zero hold time, on one mutex; one
//!   iteration is one acquisition (so the time per iteration is the hand-off period).
//! - `memory/create-list-delete`: the in-memory ensemble's cost for the three requests of a
//!   lock cycle (create, list, delete), without the library around them.
//!
//! The `memory` backend always runs; the `native` (our own client) and `crate` (the
//! `zookeeper`-crate backend) backends run when `ZK_CONNECT` names a ZooKeeper server
//! (`ZK_CONNECT=127.0.0.1:2181 cargo bench --bench locks`).
//! `measurements/compare.rs` puts the real-server numbers side by side with Curator's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::client::native::NativeClient;
use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::locks::{
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2,
};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient};

/// A source of independent sessions on one ensemble.
struct Backend {
    name: &'static str,
    connect: Box<dyn Fn() -> SharedClient>,
}

fn backends() -> Vec<Backend> {
    let ensemble = MemoryEnsemble::new();
    let mut all = vec![Backend {
        name: "memory",
        connect: Box::new(move || ensemble.connect() as SharedClient),
    }];
    if let Ok(hosts) = std::env::var("ZK_CONNECT") {
        let crate_hosts = hosts.clone();
        all.push(Backend {
            name: "native",
            connect: Box::new(move || {
                NativeClient::connect(&hosts, Duration::from_secs(10))
                    .unwrap_or_else(|e| panic!("ZK_CONNECT={hosts}: {e}"))
                    as SharedClient
            }),
        });
        all.push(Backend {
            name: "crate",
            connect: Box::new(move || {
                ZookeeperClient::connect(&crate_hosts, Duration::from_secs(10))
                    .unwrap_or_else(|e| panic!("ZK_CONNECT={crate_hosts}: {e}"))
                    as SharedClient
            }),
        });
    }
    all
}

/// A fresh lock directory per bench, so runs do not see each other's nodes.
fn bench_path(what: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "/zk-locks-bench-{}/{what}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn uncontended(c: &mut Criterion) {
    for backend in backends() {
        let mut group = c.benchmark_group(format!("uncontended/{}", backend.name));
        let client = (backend.connect)();

        let mutex = InterProcessMutex::new(client.clone(), &bench_path("mutex")).unwrap();
        group.bench_function("mutex", |b| b.iter(|| cycle(&mutex)));

        let semaphore_mutex =
            InterProcessSemaphoreMutex::new(client.clone(), &bench_path("semaphore-mutex"))
                .unwrap();
        group.bench_function("semaphore-mutex", |b| b.iter(|| cycle(&semaphore_mutex)));

        let rw = InterProcessReadWriteLock::new(client.clone(), &bench_path("rw")).unwrap();
        group.bench_function("write-lock", |b| b.iter(|| cycle(rw.write_lock())));
        group.bench_function("read-lock", |b| b.iter(|| cycle(rw.read_lock())));

        let semaphore =
            InterProcessSemaphoreV2::new(client.clone(), &bench_path("semaphore"), 3).unwrap();
        group.bench_function("semaphore-lease", |b| {
            b.iter(|| semaphore.acquire().unwrap().close().unwrap())
        });
        group.finish();
        client.close();
    }
}

fn cycle(lock: &dyn InterProcessLock) {
    lock.acquire().unwrap();
    lock.release().unwrap();
}

/// `n` sessions hand one mutex round: each iteration is one acquisition.
fn contended(c: &mut Criterion) {
    for backend in backends() {
        let mut group = c.benchmark_group(format!("contended/{}", backend.name));
        if backend.name == "real" {
            group
                .sample_size(10)
                .measurement_time(Duration::from_secs(10));
        }
        for sessions in [2usize, 4, 8] {
            let clients: Vec<SharedClient> = (0..sessions).map(|_| (backend.connect)()).collect();
            let path = bench_path(&format!("contended-{sessions}"));
            group.bench_with_input(BenchmarkId::from_parameter(sessions), &sessions, |b, _| {
                b.iter_custom(|iters| hand_round(&clients, &path, iters))
            });
            for client in clients {
                client.close();
            }
        }
        group.finish();
    }
}

/// Every client contends in its own thread until `acquisitions` were made in total; returns
/// the wall time from the start signal until the last thread is done.
fn hand_round(clients: &[SharedClient], path: &str, acquisitions: u64) -> Duration {
    let taken = Arc::new(AtomicU64::new(0));
    let go = Arc::new(Barrier::new(clients.len() + 1));
    let threads: Vec<_> = clients
        .iter()
        .map(|client| {
            let lock = InterProcessMutex::new(client.clone(), path).unwrap();
            let (taken, go) = (taken.clone(), go.clone());
            thread::spawn(move || {
                go.wait();
                loop {
                    lock.acquire().unwrap();
                    let total = taken.fetch_add(1, Ordering::Relaxed) + 1;
                    lock.release().unwrap();
                    if total >= acquisitions {
                        return;
                    }
                }
            })
        })
        .collect();
    go.wait();
    let start = Instant::now();
    for t in threads {
        t.join().unwrap();
    }
    start.elapsed()
}

/// The in-memory ensemble's own cost for the requests of one lock cycle: create an
/// ephemeral sequential node, list its directory (five siblings), delete the node.
fn memory_requests(c: &mut Criterion) {
    use zk_locks::{CreateMode, ZkClient as _};
    let client = MemoryEnsemble::new().connect();
    let dir = bench_path("memory-requests");
    let parent = dir.rsplit_once('/').map_or("/", |(p, _)| p);
    for path in [parent, &dir] {
        client.create(path, b"", CreateMode::Persistent).unwrap();
    }
    for i in 0..5 {
        let sibling = format!("{dir}/other-{i}");
        client
            .create(&sibling, b"", CreateMode::Persistent)
            .unwrap();
    }
    let lock = format!("{dir}/lock-");
    c.bench_function("memory/create-list-delete", |b| {
        b.iter(|| {
            let path = client
                .create(&lock, b"", CreateMode::EphemeralSequential)
                .unwrap();
            client.get_children(&dir, None).unwrap();
            client.delete(&path, None).unwrap();
        })
    });
}

criterion_group!(benches, uncontended, contended, memory_requests);
criterion_main!(benches);
