//! The client's request ids.

use std::sync::atomic::{AtomicI32, Ordering};

/// The client's request ids, one counter for every connection of every session it opens (as
/// the Java client's): a server the session moves to matches a write committed late to its
/// pending request by (session id, xid), so an xid reused on a new connection could be
/// answered with an older write's result. Counts 1, 2, … `i32::MAX`, then 1 again: never 0
/// and never a reserved negative xid.
#[derive(Debug)]
pub struct XidCounter(AtomicI32);

impl XidCounter {
    /// A counter whose first xid is 1.
    pub fn new() -> XidCounter {
        XidCounter(AtomicI32::new(1))
    }

    /// The next xid.
    pub fn next(&self) -> i32 {
        let valid = |x: i32| x.max(1);
        let step = |x: i32| {
            Some(if valid(x) == i32::MAX {
                1
            } else {
                valid(x) + 1
            })
        };
        // The closure always returns `Some`, so this is always `Ok`.
        let previous = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, step)
            .unwrap_or_else(|x| x);
        valid(previous)
    }
}

impl Default for XidCounter {
    fn default() -> XidCounter {
        XidCounter::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xids_wrap_to_1_and_are_never_0_or_negative() {
        let xids = XidCounter::new();
        assert_eq!((xids.next(), xids.next()), (1, 2));
        let xids = XidCounter(AtomicI32::new(i32::MAX - 1));
        let got: Vec<i32> = (0..4).map(|_| xids.next()).collect();
        assert_eq!(got, vec![i32::MAX - 1, i32::MAX, 1, 2]);
        for start in [0, -1, -8, i32::MIN] {
            let xids = XidCounter(AtomicI32::new(start));
            assert_eq!((xids.next(), xids.next()), (1, 2), "from {start}");
        }
    }
}
