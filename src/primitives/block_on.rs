//! Running a future to completion on the calling thread: how a blocking call drives the same
//! engine its future does. The waker unparks the thread; nothing else is involved.
//!
//! Rule kept: a wake-up that comes between a poll's `Pending` and the park is never lost
//! (`std::thread::park` returns at once after an `unpark` that came before it).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// Unparks the thread that blocks on the future.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on the calling thread, parked between polls, until it is ready.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        // A spurious return is harmless: the future is polled again and says `Pending`.
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_future_woken_from_another_thread_completes() {
        let deadline = Instant::now() + Duration::from_millis(20);
        block_on(crate::primitives::timer::sleep_until(deadline));
        assert!(Instant::now() >= deadline);
        assert_eq!(block_on(async { 7 }), 7);
    }
}
