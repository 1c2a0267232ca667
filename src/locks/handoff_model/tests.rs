//! The model's checks: the crate's rule is sound, it is all that is sound, and wrong rules
//! are caught.

use super::*;

#[test]
fn the_hand_off_grants_only_what_a_fresh_listing_grants() {
    let recipes = recipes();
    let starts = starts(&recipes);
    if let Some(Counterexample(c)) = starts.iter().find_map(|s| s.check(real_rule)) {
        panic!("a hand-off without a listing is wrong: {c}");
    }
    // The check ran where the hand-off applies: a mutex or admission waiter right behind the
    // holder, a reader behind one writer (readers beside it), a writer behind one reader.
    let skipping = |recipe: &str, kind: Kind| {
        starts
            .iter()
            .filter(|s| s.recipe.name == recipe && s.kind == kind)
            .filter(|s| real_rule(s.kind, &s.listed, s.our_index(), &s.decision))
            .count()
    };
    for (recipe, kind) in [
        ("mutex", Kind::Lock),
        ("semaphore admission", Kind::Lock),
        ("read/write", Kind::Read),
        ("read/write", Kind::Write),
    ] {
        assert!(
            skipping(recipe, kind) > 0,
            "{recipe} {kind:?}: nothing checked"
        );
    }
}

/// The rule is the whole of what is sound: every wait that lists again after the deletion
/// has a history where granting on the deletion alone would be wrong.
#[test]
fn every_wait_that_lists_again_needs_the_listing() {
    let always: Rule = |_, _, _, _| true;
    let recipes = recipes();
    let starts = starts(&recipes);
    let mut relisting = 0;
    for s in &starts {
        if matches!(
            s.decision,
            Decision::Watch {
                last_ahead: false,
                ..
            }
        ) {
            relisting += 1;
            assert!(
                s.check(always).is_some(),
                "{}: {:?} waiting in {:?} could take the lock without listing again",
                s.recipe.name,
                s.kind,
                s.listed
            );
        }
    }
    assert!(relisting > 0);
}

/// The model can fail: rules that skip the listing where it is needed are caught, each with
/// the history that shows why.
#[test]
fn wrong_rules_are_caught() {
    // Granting whenever the watched node goes: a node further ahead may still hold (the
    // watched one was a waiter that gave up).
    let any_predecessor: Rule = |_, _, _, _| true;
    let c = counterexample(any_predecessor).expect("skipping behind any predecessor is caught");
    assert!(c.0.contains("delete"), "{c:?}");
    // A reader behind two writers, granted when the first one goes: the second still keeps
    // it out.
    let reader_behind_writers: Rule =
        |kind, listed, at, d| kind == Kind::Read || real_rule(kind, listed, at, d);
    let c = counterexample(reader_behind_writers).expect("a reader behind two writers is caught");
    assert!(c.0.starts_with("read/write: Read"), "{c:?}");
    // A writer right behind a writer: the holder's downgrade puts a read node, with the
    // holder's sequence, ahead of us before the write node goes.
    let writer_behind_writer: Rule =
        |kind, listed, at, d| (kind == Kind::Write && at == 1) || real_rule(kind, listed, at, d);
    let c = counterexample(writer_behind_writer).expect("a writer behind a writer is caught");
    assert!(
        c.0.starts_with("read/write: Write") && c.0.contains("downgrade"),
        "{c:?}"
    );
}

/// Sanity of the model's names: the real sort puts protected, bare and downgrade names by
/// sequence, so the model's listings are the engine's.
#[test]
fn model_names_sort_by_sequence() {
    let recipes = recipes();
    let mutex = recipes[0].drivers[0].1.as_ref();
    let dir = Dir {
        nodes: vec![
            Node {
                kind: Kind::BareLock,
                seq: 2,
                id: 1,
            },
            Node {
                kind: Kind::Lock,
                seq: 1,
                id: 2,
            },
            Node {
                kind: Kind::Lock,
                seq: 10,
                id: 3,
            },
        ],
        next_seq: 11,
        next_id: 4,
        creates_left: 0,
    };
    let [listed, _] = dir.listings(mutex);
    let seqs: Vec<&str> = listed.iter().map(|c| &c[c.len() - 10..]).collect();
    assert_eq!(seqs, ["0000000001", "0000000002", "0000000010"]);
}
