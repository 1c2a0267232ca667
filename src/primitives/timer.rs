//! Time for futures without an async runtime: one thread per process wakes the futures whose
//! deadline came. What an acquire future's deadline, a retry pause or a proof turning stale
//! waits on, with any executor.
//!
//! Rules this file protects:
//! - one thread, started with the first timer and kept for the process (a constant, whatever
//!   the number of futures);
//! - a timer leaves the table when its future is dropped (`O(log n)`), so ten thousand
//!   cancelled waits leave nothing behind, whatever their deadlines;
//! - a future is woken at or after its deadline, never before: it reads the clock itself when
//!   polled, and the thread only wakes it (a wake-up that comes early is answered `Pending`
//!   and a new one registered).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// The timers, by deadline then registration.
#[derive(Default)]
struct Table {
    next: u64,
    wakers: BTreeMap<(Instant, u64), Waker>,
}

struct Timers {
    table: Mutex<Table>,
    /// Signalled when a timer earlier than every other is added.
    earlier: Condvar,
}

/// The process's timers, their thread started on first use; `None` when it cannot be started
/// (a timer then wakes its future at once, every poll: correct, only busier).
fn timers() -> Option<&'static Timers> {
    static TIMERS: OnceLock<Option<&'static Timers>> = OnceLock::new();
    *TIMERS.get_or_init(|| {
        let timers: &'static Timers = Box::leak(Box::new(Timers {
            table: Mutex::new(Table::default()),
            earlier: Condvar::new(),
        }));
        let started = std::thread::Builder::new()
            .name("zk-locks-timer".into())
            .spawn(move || run(timers));
        match started {
            Ok(_) => Some(timers),
            Err(e) => {
                log::error!("cannot start the timer thread: {e}");
                None
            }
        }
    })
}

/// The timer thread: wakes every future whose deadline came, sleeps until the next.
fn run(timers: &'static Timers) {
    let mut table = timers.table.lock();
    loop {
        let now = Instant::now();
        while let Some(entry) = table.wakers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let waker = entry.remove();
            // Woken outside the lock: a waker may run code of its executor.
            parking_lot::MutexGuard::unlocked(&mut table, || waker.wake());
        }
        match table.wakers.keys().next().map(|k| k.0) {
            Some(next) => {
                timers.earlier.wait_until(&mut table, next);
            }
            None => timers.earlier.wait(&mut table),
        }
    }
}

/// A future ready at `deadline` (at once when it has passed).
pub(crate) fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        key: None,
    }
}

/// The future of [`sleep_until`].
#[derive(Debug)]
#[must_use = "a future does nothing unless polled"]
pub(crate) struct Sleep {
    deadline: Instant,
    /// Its place in the table while registered.
    key: Option<(Instant, u64)>,
}

impl Sleep {
    fn unregister(&mut self) {
        if let (Some(key), Some(timers)) = (self.key.take(), timers()) {
            timers.table.lock().wakers.remove(&key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.unregister();
            return Poll::Ready(());
        }
        let Some(timers) = timers() else {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        };
        let mut table = timers.table.lock();
        // Registered anew on every poll: the entry may have been woken and removed, or the
        // future moved to another task.
        if let Some(key) = self.key.take() {
            table.wakers.remove(&key);
        }
        let id = table.next;
        table.next += 1;
        let key = (self.deadline, id);
        let first = table.wakers.keys().next().is_none_or(|k| key < *k);
        table.wakers.insert(key, cx.waker().clone());
        self.key = Some(key);
        if first {
            timers.earlier.notify_one();
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.unregister();
    }
}

/// How many timers are registered now (tests: dropped ones leave).
#[cfg(test)]
fn registered() -> usize {
    timers().map_or(0, |t| t.table.lock().wakers.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;
    use std::time::Duration;

    struct Count(AtomicUsize, parking_lot::Mutex<()>, parking_lot::Condvar);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            let _g = self.1.lock();
            self.0.fetch_add(1, Ordering::SeqCst);
            self.2.notify_all();
        }
    }

    #[test]
    fn a_sleep_is_ready_at_its_deadline_woken_by_the_thread() {
        let count = Arc::new(Count(
            AtomicUsize::new(0),
            parking_lot::Mutex::new(()),
            parking_lot::Condvar::new(),
        ));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let deadline = Instant::now() + Duration::from_millis(30);
        let mut sleep = Box::pin(sleep_until(deadline));
        assert_eq!(sleep.as_mut().poll(&mut cx), Poll::Pending);
        let mut g = count.1.lock();
        let give_up = Instant::now() + Duration::from_secs(30);
        while count.0.load(Ordering::SeqCst) == 0 {
            assert!(
                !count.2.wait_until(&mut g, give_up).timed_out(),
                "never woken"
            );
        }
        drop(g);
        assert!(Instant::now() >= deadline);
        assert_eq!(sleep.as_mut().poll(&mut cx), Poll::Ready(()));
        // Past already: ready at once.
        assert_eq!(
            Box::pin(sleep_until(deadline)).as_mut().poll(&mut cx),
            Poll::Ready(())
        );
    }

    #[test]
    fn dropped_sleeps_leave_the_table() {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let far = Instant::now() + Duration::from_secs(3600);
        let before = registered();
        let mut sleeps: Vec<_> = (0..1000).map(|_| Box::pin(sleep_until(far))).collect();
        for s in &mut sleeps {
            assert_eq!(s.as_mut().poll(&mut cx), Poll::Pending);
            // Polled again: still one entry.
            assert_eq!(s.as_mut().poll(&mut cx), Poll::Pending);
        }
        assert!(registered() >= before + 1000);
        drop(sleeps);
        // Other tests' timers may come and go meanwhile, but none of these stays.
        assert!(
            registered() <= before + 1,
            "dropped timers stayed registered"
        );
    }
}
