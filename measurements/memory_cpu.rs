//! The library's own cost per uncontended acquire+release on the in-memory backend, as the
//! calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): unlike the criterion bench's wall
//! time, a machine busy with other work barely moves it (an uncontended cycle on this backend
//! runs entirely on the caller's thread). Best of 5 runs of N cycles per recipe.
//!
//! `cargo run --release --example memory_cpu [cycles]`

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::locks::{InterProcessReadWriteLock, InterProcessSemaphoreMutex};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient};

/// CPU time of the calling thread, nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn cycles(lock: &dyn InterProcessLock, n: u64) {
    for _ in 0..n {
        lock.acquire().expect("acquire");
        lock.release().expect("release");
    }
}

fn measure(name: &str, lock: &dyn InterProcessLock, n: u64) {
    cycles(lock, n / 10 + 1); // warm-up: parents, allocator
    let best = (0..5)
        .map(|_| {
            let start = thread_cpu_ns();
            cycles(lock, n);
            thread_cpu_ns() - start
        })
        .min()
        .unwrap_or(0);
    println!(
        "{name:16} {:6.3} µs CPU per acquire+release (best of 5 × {n})",
        best as f64 / n.max(1) as f64 / 1000.0
    );
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000u64);
    let ensemble = MemoryEnsemble::new();
    let client: SharedClient = ensemble.connect();
    let mutex = InterProcessMutex::new(client.clone(), "/cpu/mutex").expect("mutex");
    measure("mutex", &mutex, n);
    let semaphore =
        InterProcessSemaphoreMutex::new(client.clone(), "/cpu/semaphore").expect("semaphore");
    measure("semaphore-mutex", &semaphore, n);
    let rw = InterProcessReadWriteLock::new(client.clone(), "/cpu/rw").expect("rw");
    measure("write-lock", rw.write_lock(), n);
    measure("read-lock", rw.read_lock(), n);
    client.close();
}
