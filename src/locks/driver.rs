//! `LockDriver`: the strategy part of a lock recipe — how its nodes are named, how they sort,
//! and, given the sorted children, whether we hold the lock or which node to watch.
//!
//! The engine ([`super::internals::LockInternals`]) is the same for every recipe; only the
//! driver changes (Curator's `LockInternalsDriver` split).

/// What the driver decided for one listing of the lock directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Our node holds the lock.
    Acquired,
    /// Wait for `predecessor` (a child name) to change.
    Watch {
        /// The child whose deletion may let us in.
        predecessor: String,
        /// True when the deletion of `predecessor` alone grants us the lock: it was the last
        /// node that kept us out in this listing, and no node can be created ahead of ours
        /// (sequence numbers only grow). Lets the engine take the lock on `NodeDeleted`
        /// without listing again (one read off the hand-off).
        last_ahead: bool,
    },
}

/// The per-recipe strategy of the lock engine.
pub trait LockDriver: Send + Sync + std::fmt::Debug {
    /// The lock name appended to the protected prefix (`lock-`, `__READ__`, `__WRIT__`).
    fn lock_name(&self) -> &str;

    /// The text children sort by (Curator's `fixForSorting`).
    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        standard_sort_key(child, self.lock_name())
    }

    /// Given the children sorted by [`LockDriver::sort_key`] and our index among them: do we
    /// hold the lock, and if not, which node do we watch.
    fn decide(&self, sorted: &[String], our_index: usize) -> Decision;

    /// Whether the node at `index` of `sorted` holds the lock, as anyone looking at the
    /// listing can tell: the rule [`LockDriver::decide`] grants by, without what only the
    /// acquiring thread knows. This is the holder flag of [`super::Participant`].
    fn holds(&self, sorted: &[String], index: usize) -> bool {
        matches!(self.decide(sorted, index), Decision::Acquired)
    }
}

/// Curator's `standardFixForSorting`: the text after the **last** occurrence of `lock_name`, or
/// the whole name when it does not occur. Keys are compared as strings (as Curator does), so
/// Rust and JVM contenders agree on the order, including the wrap-around of the sequence.
pub fn standard_sort_key<'a>(child: &'a str, lock_name: &str) -> &'a str {
    // `str::rfind` builds a two-way searcher at every call (~70 ns for a lock name in a
    // 50-byte child); a byte-window scan from the end finds the same last match (a match of a
    // whole UTF-8 needle in UTF-8 text starts and ends on character boundaries).
    let needle = lock_name.as_bytes();
    if needle.is_empty() {
        return "";
    }
    match child
        .as_bytes()
        .windows(needle.len())
        .rposition(|w| w == needle)
    {
        Some(at) => child.get(at + needle.len()..).unwrap_or(child),
        None => child,
    }
}

/// Sorts children by `driver.sort_key`. The sort is **stable** on purpose: equal keys (a
/// downgraded read node shares its write node's sequence) keep the server's order, as in
/// Curator's `Collections.sort`, so every client computes the same queue.
///
/// Each child's key is found once, not at every comparison: a waiter in a long queue sorts
/// the whole listing at every hand-off (1,000 children: ~20,000 key searches, over a
/// millisecond, when each comparison searched both keys).
pub fn sort_children(driver: &dyn LockDriver, children: &mut [String]) {
    let mut taken: Vec<String> = children.iter_mut().map(std::mem::take).collect();
    let order: Vec<usize> = {
        let mut keyed: Vec<(&str, usize)> = taken
            .iter()
            .enumerate()
            .map(|(i, child)| (driver.sort_key(child), i))
            .collect();
        // Ties broken by the server's position: the stable order.
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, i)| i).collect()
    };
    for (slot, i) in children.iter_mut().zip(order) {
        *slot = std::mem::take(&mut taken[i]);
    }
}

/// The standard predicate (mutex, write lock, semaphore V1): hold the lock when among the
/// first `max_leases`, else watch the node `max_leases` places ahead.
#[derive(Debug, Clone)]
pub struct StandardDriver {
    lock_name: String,
    max_leases: usize,
}

impl StandardDriver {
    /// A driver for `lock_name` with `max_leases` holders (1 for a mutex).
    pub fn new(lock_name: impl Into<String>, max_leases: usize) -> Self {
        StandardDriver {
            lock_name: lock_name.into(),
            max_leases: max_leases.max(1),
        }
    }
}

impl LockDriver for StandardDriver {
    fn lock_name(&self) -> &str {
        &self.lock_name
    }

    fn decide(&self, sorted: &[String], our_index: usize) -> Decision {
        if our_index < self.max_leases {
            return Decision::Acquired;
        }
        Decision::Watch {
            predecessor: sorted[our_index - self.max_leases].clone(),
            // Deleting any of the first max_leases nodes moves us to index max_leases - 1.
            last_ahead: our_index == self.max_leases,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sort_key_is_text_after_last_lock_name() {
        assert_eq!(
            standard_sort_key("_c_abc-lock-0000000007", "lock-"),
            "0000000007"
        );
        assert_eq!(
            standard_sort_key("lock-lock-0000000007", "lock-"),
            "0000000007"
        );
        assert_eq!(standard_sort_key("foreign", "lock-"), "foreign");
        assert_eq!(standard_sort_key("x-lock-", "lock-"), "");
    }

    #[test]
    fn sort_is_by_key_and_stable() {
        let d = StandardDriver::new("lock-", 1);
        let mut c = names(&[
            "_c_b-lock-0000000002",
            "_c_z-lock-0000000001",
            "_c_a-lock-0000000002",
        ]);
        sort_children(&d, &mut c);
        assert_eq!(
            c,
            names(&[
                "_c_z-lock-0000000001",
                "_c_b-lock-0000000002",
                "_c_a-lock-0000000002"
            ])
        );
    }

    /// Counts the sort keys a sort asks for.
    #[derive(Debug, Default)]
    struct CountingKeys(std::sync::atomic::AtomicUsize);

    impl LockDriver for CountingKeys {
        fn lock_name(&self) -> &str {
            "lock-"
        }
        fn sort_key<'a>(&self, child: &'a str) -> &'a str {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            standard_sort_key(child, "lock-")
        }
        fn decide(&self, _: &[String], _: usize) -> Decision {
            Decision::Acquired
        }
    }

    /// A long queue's listing is sorted at every hand-off: each child's key is found once
    /// (a search for the lock name), not at every comparison (1,000 children took ~20,000
    /// searches, over a millisecond per hand-off); the order is the stable sort's by key.
    #[test]
    fn a_sort_finds_each_key_once_and_keeps_equal_keys_in_server_order() {
        let d = CountingKeys::default();
        let n = 1000u64;
        // Sequences in a scrambled order, every tenth one twice (equal keys).
        let mut children: Vec<String> = (0..n)
            .map(|i| {
                let seq = (i * 7919) % n / 10 * 10 + i % 2 * (i % 10 / 9);
                format!("_c_{i:04}-lock-{seq:010}")
            })
            .collect();
        let mut expected = children.clone();
        expected.sort_by(|a, b| standard_sort_key(a, "lock-").cmp(standard_sort_key(b, "lock-")));
        sort_children(&d, &mut children);
        assert_eq!(children, expected);
        assert_eq!(d.0.load(std::sync::atomic::Ordering::SeqCst), n as usize);
    }

    #[test]
    fn sort_keys_match_the_last_occurrence_of_any_lock_name() {
        for (child, name, key) in [
            ("_c_abc-lock-0000000007", "lock-", "0000000007"),
            ("lock-lock-0000000007", "lock-", "0000000007"),
            ("foreign", "lock-", "foreign"),
            ("x-lock-", "lock-", ""),
            ("lock-", "lock-", ""),
            ("ock-", "lock-", "ock-"),
            ("_c_é-__READ__0001", "__READ__", "0001"),
            ("ééé", "é", ""),
            ("aaaa", "aa", ""),
            ("abc", "", ""),
        ] {
            assert_eq!(standard_sort_key(child, name), key, "{child:?} {name:?}");
            let by_std = child
                .rfind(name)
                .map_or(child, |at| &child[at + name.len()..]);
            assert_eq!(standard_sort_key(child, name), by_std, "{child:?} {name:?}");
        }
    }

    #[test]
    fn standard_predicate() {
        let d = StandardDriver::new("lock-", 1);
        let c = names(&[
            "a-lock-0000000001",
            "b-lock-0000000002",
            "c-lock-0000000003",
        ]);
        assert_eq!(d.decide(&c, 0), Decision::Acquired);
        assert_eq!(
            d.decide(&c, 1),
            Decision::Watch {
                predecessor: c[0].clone(),
                last_ahead: true
            }
        );
        assert_eq!(
            d.decide(&c, 2),
            Decision::Watch {
                predecessor: c[1].clone(),
                last_ahead: false
            }
        );
        let sem = StandardDriver::new("lock-", 2);
        assert_eq!(sem.decide(&c, 1), Decision::Acquired);
        assert_eq!(
            sem.decide(&c, 2),
            Decision::Watch {
                predecessor: c[0].clone(),
                last_ahead: true
            }
        );
    }
}
