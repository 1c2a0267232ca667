//! Calls with a deadline: the `zookeeper` crate blocks a caller for as long as a silent link
//! stays silent, so every crate call runs on a small pool of persistent worker threads and the
//! caller waits for the answer only until its deadline.
//!
//! A hand-off costs two thread wake-ups (caller → worker, worker → caller); the workers are
//! reused, so no thread is spawned on the fast path. A worker stuck in a call on a silent link
//! stays stuck (there is no way to cancel a crate call) until the crate drops the request:
//! when it reconnects, or when the handle is given up and its socket shut down (see
//! `handle.rs`). The pool grows a new worker whenever a job finds none idle, and idle workers
//! beyond [`MIN_WORKERS`] exit after [`IDLE_EXIT`].

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send>;

/// Workers kept alive while idle.
const MIN_WORKERS: usize = 2;
/// How long a surplus worker waits for work before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(30);

struct State {
    queue: VecDeque<Job>,
    idle: usize,
    threads: usize,
    shutdown: bool,
}

struct Inner {
    state: Mutex<State>,
    work: Condvar,
}

/// The pool of call threads of one client.
pub(super) struct CallPool {
    inner: Arc<Inner>,
}

/// A one-shot slot the worker fills and the caller waits on.
struct Slot<T> {
    value: Mutex<Option<T>>,
    filled: Condvar,
}

impl CallPool {
    pub(super) fn new() -> CallPool {
        CallPool {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    idle: 0,
                    threads: 0,
                    shutdown: false,
                }),
                work: Condvar::new(),
            }),
        }
    }

    /// Runs `f` on a worker and returns its result, or `None` when the deadline passes first
    /// (the call keeps running on its worker; its result is dropped), when `f` panics, or when
    /// the pool is shut down.
    pub(super) fn run<T, F>(&self, deadline: Instant, f: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let slot = Arc::new(Slot {
            value: Mutex::new(None),
            filled: Condvar::new(),
        });
        let worker_slot = slot.clone();
        let job: Job = Box::new(move || {
            // A panicking call answers `None` at once rather than leaving the caller waiting.
            let value = catch_unwind(AssertUnwindSafe(f)).ok();
            if value.is_none() {
                log::error!("a ZooKeeper call panicked");
            }
            *worker_slot.value.lock() = Some(value);
            worker_slot.filled.notify_one();
        });
        if !self.submit(job) {
            return None;
        }
        let mut value = slot.value.lock();
        while value.is_none() {
            if slot.filled.wait_until(&mut value, deadline).timed_out() {
                break;
            }
        }
        value.take().flatten()
    }

    fn submit(&self, job: Job) -> bool {
        let mut state = self.inner.state.lock();
        if state.shutdown {
            return false;
        }
        state.queue.push_back(job);
        if state.queue.len() > state.idle {
            // Every idle worker already has a job waiting for it: grow.
            state.threads += 1;
            let inner = self.inner.clone();
            let spawned = std::thread::Builder::new()
                .name("zk-locks-call".into())
                .spawn(move || worker(inner));
            if spawned.is_err() {
                state.threads -= 1;
                log::error!("could not spawn a call thread");
            }
        } else {
            self.inner.work.notify_one();
        }
        true
    }

    /// Stops accepting jobs; workers exit once the queue is empty.
    pub(super) fn shutdown(&self) {
        self.inner.state.lock().shutdown = true;
        self.inner.work.notify_all();
    }
}

impl Drop for CallPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn worker(inner: Arc<Inner>) {
    loop {
        let job = {
            let mut state = inner.state.lock();
            loop {
                if let Some(job) = state.queue.pop_front() {
                    break job;
                }
                if state.shutdown {
                    state.threads -= 1;
                    return;
                }
                state.idle += 1;
                let timed_out = inner.work.wait_for(&mut state, IDLE_EXIT).timed_out();
                state.idle -= 1;
                if timed_out && state.queue.is_empty() && state.threads > MIN_WORKERS {
                    state.threads -= 1;
                    return;
                }
            }
        };
        // Jobs catch their own panics; this one guards the worker against anything else.
        let _ = catch_unwind(AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_jobs_and_times_out_stuck_ones() {
        let pool = CallPool::new();
        let soon = || Instant::now() + Duration::from_secs(5);
        assert_eq!(pool.run(soon(), || 41 + 1), Some(42));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let started = Instant::now();
        let stuck = pool.run(Instant::now() + Duration::from_millis(100), move || {
            let _ = rx.recv();
        });
        assert_eq!(stuck, None);
        assert!(started.elapsed() < Duration::from_secs(2));
        // The stuck worker does not block others.
        assert_eq!(pool.run(soon(), || 7), Some(7));
        let panicked: Option<i32> = pool.run(Instant::now() + Duration::from_millis(200), || {
            panic!("boom")
        });
        assert_eq!(panicked, None);
        drop(tx);
    }
}
