//! The wakers of the futures waiting on one thing (a latch's leadership, a hold's state): each
//! registered under a key it keeps, updated on every poll, removed when the future drops, all
//! taken at once when the thing changes. The futures' side of a `Condvar`'s `notify_all`.

use std::collections::BTreeMap;
use std::task::Waker;

/// Registered wakers, by key.
#[derive(Debug, Default)]
pub(crate) struct WakerSet {
    next: u64,
    wakers: BTreeMap<u64, Waker>,
}

impl WakerSet {
    /// Registers `waker` under `key`, or under a new key stored there.
    pub(crate) fn register(&mut self, key: &mut Option<u64>, waker: &Waker) {
        let k = *key.get_or_insert_with(|| {
            self.next += 1;
            self.next
        });
        match self.wakers.get_mut(&k) {
            Some(w) if w.will_wake(waker) => {}
            Some(w) => *w = waker.clone(),
            None => {
                self.wakers.insert(k, waker.clone());
            }
        }
    }

    /// Removes the waker under `key` (a future dropped).
    pub(crate) fn remove(&mut self, key: Option<u64>) {
        if let Some(k) = key {
            self.wakers.remove(&k);
        }
    }

    /// Takes every waker, to be woken once the lock that guards the set is released (a waker
    /// may run its executor's code). A future polled again registers anew.
    pub(crate) fn take(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.wakers).into_values().collect()
    }
}

/// Wakes `wakers` (taken with [`WakerSet::take`]).
pub(crate) fn wake(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_kept_updated_removed_and_taken() {
        let mut set = WakerSet::default();
        let (mut a, mut b) = (None, None);
        set.register(&mut a, Waker::noop());
        set.register(&mut a, Waker::noop());
        set.register(&mut b, Waker::noop());
        assert_ne!(a, b);
        assert_eq!(set.take().len(), 2);
        assert!(set.take().is_empty());
        set.register(&mut a, Waker::noop());
        set.remove(a);
        assert!(set.take().is_empty());
    }
}
