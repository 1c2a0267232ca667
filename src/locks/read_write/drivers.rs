//! The read/write lock's two drivers: one queue of `__READ__` and `__WRIT__` nodes, sorted by
//! sequence; a writer holds when first, a reader when no writer is ahead (or its own thread's
//! write node shares its sequence: a downgrade).

use std::sync::Arc;

use crate::paths;

use super::super::driver::{standard_sort_key, Decision, LockDriver};
use super::super::held::LockState;
use super::super::layout::{READ_LOCK_NAME, WRITE_LOCK_NAME};
use super::super::mutex::InterProcessMutex;

/// Both kinds sort by their sequence in one queue: the text after the last `__READ__`, then
/// after the last `__WRIT__` (Curator's `SortingLockInternalsDriver`).
pub(super) fn rw_sort_key(child: &str) -> &str {
    standard_sort_key(standard_sort_key(child, READ_LOCK_NAME), WRITE_LOCK_NAME)
}

pub(super) fn is_writer(child: &str) -> bool {
    child.contains(WRITE_LOCK_NAME)
}

/// Writers: first among all children, readers included; watch the node just ahead.
#[derive(Debug)]
pub(super) struct WriteDriver;

impl LockDriver for WriteDriver {
    fn lock_name(&self) -> &str {
        WRITE_LOCK_NAME
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        rw_sort_key(child)
    }

    fn decide(&self, sorted: &[String], our_index: usize) -> Decision {
        if our_index == 0 {
            return Decision::Acquired;
        }
        let predecessor = sorted[our_index - 1].clone();
        // A writer ahead may downgrade: its read node appears with the writer's own sequence,
        // ahead of us, just before the write node goes. So only a reader as the last node
        // ahead lets us in without listing again.
        let last_ahead = our_index == 1 && !is_writer(&predecessor);
        Decision::Watch {
            predecessor,
            last_ahead,
        }
    }

    /// First in the queue; a downgrade read node of this very writer (same sequence) may
    /// sort ahead of it.
    fn holds(&self, sorted: &[String], index: usize) -> bool {
        let ours = rw_sort_key(&sorted[index]);
        sorted[..index].iter().all(|c| rw_sort_key(c) == ours)
    }
}

/// Readers: hold unless a writer is ahead (or this thread owns the write lock); watch the
/// first writer ahead.
pub(super) struct ReadDriver {
    pub(super) write: Arc<InterProcessMutex>,
}

impl std::fmt::Debug for ReadDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadDriver")
    }
}

impl LockDriver for ReadDriver {
    fn lock_name(&self) -> &str {
        READ_LOCK_NAME
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        rw_sort_key(child)
    }

    fn decide(&self, sorted: &[String], our_index: usize) -> Decision {
        // Called on the acquiring thread: a downgrading write holder reads at once (its own
        // write node, with the same sequence, may sort either side of its read node). Only the
        // read node that took that sequence: another read node of this thread sits where any
        // reader would, possibly behind writers that wait for this thread's write node.
        // Without a request (the wait loop may be past its deadline): the downgrade asks the
        // server about its write node once the read node is granted.
        let ours = rw_sort_key(&sorted[our_index]);
        if held_write_node(&self.write, false)
            .is_some_and(|w| sorted.contains(&w) && rw_sort_key(&w) == ours)
        {
            return Decision::Acquired;
        }
        let mut writers = sorted[..our_index].iter().filter(|c| is_writer(c));
        match writers.next() {
            None => Decision::Acquired,
            Some(first) => Decision::Watch {
                predecessor: first.clone(),
                // A downgrade of that writer adds a reader, which does not block us.
                last_ahead: writers.next().is_none(),
            },
        }
    }

    /// No writer ahead, except the one whose sequence this read node shares: the node is that
    /// writer's downgrade, which `decide` grants to the writer's thread.
    fn holds(&self, sorted: &[String], index: usize) -> bool {
        let ours = rw_sort_key(&sorted[index]);
        !sorted[..index]
            .iter()
            .any(|c| is_writer(c) && rw_sort_key(c) != ours)
    }
}

/// The name of the calling thread's write node while that node is not lost: a write node lost
/// with its session (or found deleted) is not ours, and a downgrade from it would let a reader
/// in beside the writer that took over. `Suspect` still counts: a read node created before the
/// client learns of a loss is created in the write node's session, and dies with it. Only
/// `ask`ing reads the node after a reconnect; otherwise only a loss the client knows counts.
pub(super) fn held_write_node(write: &InterProcessMutex, ask: bool) -> Option<String> {
    let node = write.held_node()?;
    let lost = match ask {
        true => node.state() == LockState::Lost,
        false => node.believed_lost(),
    };
    (!lost).then(|| paths::node_name(node.path()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sort_key_strips_both_names() {
        assert_eq!(rw_sort_key("_c_a-__READ__0000000003"), "0000000003");
        assert_eq!(rw_sort_key("_c_a-__WRIT__0000000004"), "0000000004");
        assert_eq!(rw_sort_key("other"), "other");
    }

    /// The holder flags an observer reads: readers ahead of a writer hold, a writer ahead of
    /// readers holds alone, and a downgrade's two nodes (one sequence) hold in either order.
    #[test]
    fn holders_as_an_observer_sees_them() {
        let reader = |sorted: &[String], i| {
            ReadDriver {
                write: Arc::new(
                    InterProcessMutex::new(
                        crate::client::memory::MemoryEnsemble::new().connect(),
                        "/rw",
                    )
                    .unwrap(),
                ),
            }
            .holds(sorted, i)
        };
        let c = names(&[
            "a-__READ__0000000001",
            "b-__READ__0000000002",
            "c-__WRIT__0000000003",
        ]);
        assert!(reader(&c, 0) && reader(&c, 1) && !WriteDriver.holds(&c, 2));
        let c = names(&[
            "a-__WRIT__0000000001",
            "b-__READ__0000000002",
            "c-__READ__0000000003",
        ]);
        assert!(WriteDriver.holds(&c, 0) && !reader(&c, 1) && !reader(&c, 2));
        for c in [
            names(&[
                "a-__WRIT__0000000001",
                "a-__READ__0000000001",
                "b-__READ__0000000002",
            ]),
            names(&[
                "a-__READ__0000000001",
                "a-__WRIT__0000000001",
                "b-__READ__0000000002",
            ]),
        ] {
            let (r, w) = if is_writer(&c[0]) { (1, 0) } else { (0, 1) };
            assert!(reader(&c, r) && WriteDriver.holds(&c, w), "{c:?}");
            assert!(!reader(&c, 2), "{c:?}");
        }
    }

    #[test]
    fn writer_hand_off_only_after_a_reader() {
        let c = names(&["a-__WRIT__0000000001", "b-__WRIT__0000000002"]);
        assert_eq!(
            WriteDriver.decide(&c, 1),
            Decision::Watch {
                predecessor: c[0].clone(),
                last_ahead: false
            }
        );
        let c = names(&["a-__READ__0000000001", "b-__WRIT__0000000002"]);
        assert_eq!(
            WriteDriver.decide(&c, 1),
            Decision::Watch {
                predecessor: c[0].clone(),
                last_ahead: true
            }
        );
    }
}
