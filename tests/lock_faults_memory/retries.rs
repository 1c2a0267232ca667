//! Retries at exact points: a listing retry that ends at the deadline, and a client closed
//! during a retry.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::memory::{MemoryEnsemble, Op};
use zk_locks::locks::InterProcessLock;
use zk_locks::ZkClient;

use super::{mutex, PATIENCE};

/// A retry policy that closes a client the first time it is asked: "the client is closed
/// during a retry", at an exact point.
#[derive(Debug)]
struct CloseOnFirstRetry(Arc<zk_locks::client::memory::MemoryClient>, AtomicUsize);

impl zk_locks::retry::RetryPolicy for CloseOnFirstRetry {
    fn next_retry(&self, _attempt: u32, _elapsed: Duration) -> Option<Duration> {
        if self.1.fetch_add(1, Ordering::SeqCst) == 0 {
            self.0.close();
        }
        Some(Duration::from_millis(10))
    }
}

/// The link goes down on the first listing of `prefix` by `c` (and stays down).
fn link_down_on_first_listing(c: &Arc<zk_locks::client::memory::MemoryClient>, prefix: &str) {
    let (c2, prefix, fired) = (c.clone(), prefix.to_string(), AtomicUsize::new(0));
    c.on_request(Some(Box::new(move |op, path| {
        if op == Op::GetChildren
            && path.starts_with(&prefix)
            && fired.fetch_add(1, Ordering::SeqCst) == 0
        {
            c2.suspend();
        }
    })));
}

/// A timed semaphore acquire whose lease listing fails while the link stays down: it returns
/// "not acquired" once its deadline passed, not the error of a retry policy that ran on
/// past the deadline.
#[test]
fn semaphore_listing_retry_ends_at_the_deadline() {
    use zk_locks::locks::InterProcessSemaphoreV2;
    use zk_locks::retry::RetryNTimes;
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let holder = InterProcessSemaphoreV2::new(c2.clone(), "/s", 1).unwrap();
    let _lease = holder.acquire().unwrap();
    let sem = InterProcessSemaphoreV2::new(c1.clone(), "/s", 1)
        .unwrap()
        .with_retry_policy(Arc::new(RetryNTimes::new(3, Duration::from_millis(200))));
    link_down_on_first_listing(&c1, "/s/leases");
    let got = sem.acquire_timeout(Duration::from_millis(300));
    c1.on_request(None);
    c1.resume();
    assert!(matches!(got, Ok(None)), "{got:?}");
}

/// A client closed during a listing retry is `Error::Closed`, not a timeout, in the mutex and
/// in the semaphore.
#[test]
fn closed_during_a_listing_retry_is_closed() {
    use zk_locks::locks::InterProcessSemaphoreV2;
    use zk_locks::Error;
    let e = MemoryEnsemble::new();
    let holder_client = e.connect();
    let holder = mutex(&holder_client, "/m");
    holder.acquire().unwrap();
    let c = e.connect();
    let m = mutex(&c, "/m")
        .with_retry_policy(Arc::new(CloseOnFirstRetry(c.clone(), AtomicUsize::new(0))));
    link_down_on_first_listing(&c, "/m");
    let got = m.acquire_timeout(PATIENCE);
    assert!(matches!(got, Err(Error::Closed)), "mutex: {got:?}");

    let holder = InterProcessSemaphoreV2::new(holder_client.clone(), "/s", 1).unwrap();
    let _lease = holder.acquire().unwrap();
    let c = e.connect();
    let sem = InterProcessSemaphoreV2::new(c.clone(), "/s", 1)
        .unwrap()
        .with_retry_policy(Arc::new(CloseOnFirstRetry(c.clone(), AtomicUsize::new(0))));
    link_down_on_first_listing(&c, "/s/leases");
    let got = sem.acquire_timeout(PATIENCE);
    assert!(matches!(got, Err(Error::Closed)), "semaphore: {got:?}");
}
