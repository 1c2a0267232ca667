//! Mutual exclusion across Rust and Curator: mutex, read/write lock and semaphore under
//! contention from both sides, and the checker itself.

use crate::harness::*;

#[test]
fn mutex_excludes_across_rust_and_curator() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let records = contend(&connect, classes, Recipe::Mutex);
    let (peak, switches) = check(records, 1).unwrap();
    assert_eq!(peak, 1);
    eprintln!("mutex: holder changed side {switches} times");
}

#[test]
fn read_write_lock_excludes_writers_across_rust_and_curator() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let records = contend(&connect, classes, Recipe::ReadWrite);
    for (side, kind) in [("jvm", 'w'), ("jvm", 'r'), ("rust", 'w'), ("rust", 'r')] {
        assert!(
            records
                .iter()
                .any(|r| r.who.starts_with(side) && r.kind == kind),
            "no {kind} section from {side}"
        );
    }
    let (peak, switches) = check(records, usize::MAX).unwrap();
    eprintln!("read/write: peak {peak} holders, holder changed side {switches} times");
}

#[test]
fn semaphore_v2_grants_at_most_3_across_rust_and_curator() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let records = contend(&connect, classes, Recipe::Semaphore(3));
    let (peak, switches) = check(records, 3).unwrap();
    eprintln!("semaphore(3): peak {peak} holders, holder changed side {switches} times");
}

/// The same contention, the Rust side on the async API: one engine, the same exclusion.
#[test]
fn async_acquires_exclude_across_rust_and_curator() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let records = contend_async(&connect, classes, Recipe::Mutex);
    assert_eq!(check(records, 1).unwrap().0, 1);
    let records = contend_async(&connect, classes, Recipe::ReadWrite);
    assert!(records
        .iter()
        .any(|r| r.who.starts_with("rust") && r.kind == 'w'));
    check(records, usize::MAX).unwrap();
    let records = contend_async(&connect, classes, Recipe::Semaphore(3));
    check(records, 3).unwrap();
}

#[test]
fn the_checker_catches_overlaps() {
    let r = |at, enter, kind: char, who: &str| Record {
        at,
        enter,
        kind,
        who: who.into(),
    };
    let ok = vec![
        r(1, true, 'x', "a"),
        r(2, false, 'x', "a"),
        r(2, true, 'x', "b"),
        r(3, false, 'x', "b"),
    ];
    assert_eq!(check(ok, 1).unwrap().0, 1);
    let overlap = vec![
        r(1, true, 'x', "a"),
        r(2, true, 'x', "b"),
        r(3, false, 'x', "a"),
        r(4, false, 'x', "b"),
    ];
    assert!(check(overlap.clone(), 1).is_err());
    assert_eq!(check(overlap, 2).unwrap().0, 2);
    let writer_with_reader = vec![
        r(1, true, 'r', "a"),
        r(2, true, 'w', "b"),
        r(3, false, 'r', "a"),
        r(4, false, 'w', "b"),
    ];
    assert!(check(writer_with_reader, usize::MAX)
        .unwrap_err()
        .contains("writer"));
}
