//! A model check of the hand-off without a second listing.
//!
//! When a waiter's listing says that the node it watches is the last one keeping it out
//! ([`Decision::Watch`] with `last_ahead`), the engine takes the lock as soon as it sees that
//! node deleted, without listing the directory again. That is sound only if, from the listing
//! on, nothing can come to keep the waiter out once that node is gone. This module explores
//! every history of a lock directory within small bounds, with the crate's real drivers
//! deciding, and checks: whenever the rule grants on a deletion, a fresh listing at that moment
//! (and at any later moment the deletion may be seen at: a notification can be late, a restored
//! watch fires after the reconnect) is granted by the same driver too.
//!
//! The directory model: nodes are created with sequence numbers that only grow (the server's
//! per-directory counter); any node but ours may be deleted at any time (a release, a waiter
//! that timed out or was cancelled, a lost session, a copy of a node given back); a write node
//! that holds may add a downgrade read node with its own sequence (Curator 5.5, and this
//! crate; Curator 5.4's downgrade read node takes a new sequence, which is a create). Names
//! are those of every Curator client (`_c_<uuid>-lock-<seq>`, `__READ__`, `__WRIT__`) and
//! bare `lock-<seq>` names, mixed in one directory; the server lists children in no
//! particular order, and the sort is stable, so every listing is tried in two orders.
//!
//! Outside the model, and why: our own node is never deleted while we wait (a lost session
//! of ours ends the wait before any hand-off: the engine checks the loss count and the epoch,
//! `tests/lock_faults_memory/sessions.rs`
//! `a_waiter_whose_session_expired_meanwhile_does_not_hand_over_on_its_old_node`; a deletion
//! by hand is the documented exception in ARCHITECTURE.md); nodes are only made by lock recipes (a name without the lock name, made by
//! hand, sorts by its whole text and could land anywhere); the sequence counter does not wrap
//! (after 2^31 creates in one directory the new names sort first, and every Curator client
//! grants two holders then, listing or not).

use std::collections::HashSet;
use std::sync::Arc;

use super::driver::{sort_children, Decision, LockDriver};
use super::{InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2};
use crate::client::memory::MemoryEnsemble;

/// Who made a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// A mutex or admission node as Curator names it: `_c_<uuid>-lock-<seq>`.
    Lock,
    /// A mutex node without the protection prefix: `lock-<seq>`.
    BareLock,
    /// `_c_<uuid>-__READ__<seq>`.
    Read,
    /// `_c_<uuid>-__WRIT__<seq>`.
    Write,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Node {
    kind: Kind,
    seq: u32,
    /// Tells nodes apart (their UUIDs).
    id: u32,
}

impl Node {
    fn name(&self) -> String {
        let uuid = format!(
            "{:08x}-9d1e-4c4b-a3f0-{:012x}",
            self.id.wrapping_mul(2_654_435_761),
            self.id
        );
        match self.kind {
            Kind::Lock => format!("_c_{uuid}-lock-{:010}", self.seq),
            Kind::BareLock => format!("lock-{:010}", self.seq),
            Kind::Read => format!("_c_{uuid}-__READ__{:010}", self.seq),
            Kind::Write => format!("_c_{uuid}-__WRIT__{:010}", self.seq),
        }
    }
}

/// What the search tells states apart by: the nodes' kinds and sequences, the next sequence,
/// the creates left.
type StateKey = (Vec<(Kind, u32)>, u32, u8);

/// A lock directory.
#[derive(Clone, Debug)]
struct Dir {
    /// Live nodes, in creation order.
    nodes: Vec<Node>,
    next_seq: u32,
    next_id: u32,
    /// Creates still allowed in this history (a bound of the search).
    creates_left: u8,
}

impl Dir {
    /// What the drivers can tell apart (not the UUIDs): for the set of states already seen.
    fn key(&self) -> StateKey {
        let nodes = self.nodes.iter().map(|n| (n.kind, n.seq)).collect();
        (nodes, self.next_seq, self.creates_left)
    }

    /// The two listings the server may give (creation order and its reverse), each sorted
    /// by `driver` as the engine sorts them.
    fn listings(&self, driver: &dyn LockDriver) -> [Vec<String>; 2] {
        let forward: Vec<String> = self.nodes.iter().map(Node::name).collect();
        let mut backward = forward.clone();
        backward.reverse();
        [forward, backward].map(|mut listed| {
            sort_children(driver, &mut listed);
            listed
        })
    }
}

/// What happens to the directory between two moments.
#[derive(Clone)]
enum Action {
    /// A contender queues (the next sequence number).
    Create(Kind),
    /// Released, given up, or gone with its session.
    Delete(Node),
    /// The write node holds and its thread takes the read lock: a read node with its sequence.
    Downgrade(Node),
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Create(kind) => write!(f, "create {kind:?}"),
            Action::Delete(n) => write!(f, "delete {}", label(&n.name())),
            Action::Downgrade(n) => write!(f, "downgrade {}", label(&n.name())),
        }
    }
}

/// A short name for a node in a counterexample: its kind's letter (`L` protected lock, `l`
/// bare lock, `R` read, `W` write) and sequence, `*` for ours.
fn label(name: &str) -> String {
    let kind = if name.contains("__READ__") {
        "R"
    } else if name.contains("__WRIT__") {
        "W"
    } else if name.starts_with("_c_") {
        "L"
    } else {
        "l"
    };
    let seq = name[name.len() - 10..].trim_start_matches('0');
    let ours = if name.starts_with("_c_00000000-") {
        "*"
    } else {
        ""
    };
    format!("{kind}{}{ours}", if seq.is_empty() { "0" } else { seq })
}

fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Acquired => "acquired".into(),
        Decision::Watch {
            predecessor,
            last_ahead,
        } => format!("watch {} (last ahead: {last_ahead})", label(predecessor)),
    }
}

fn labels(listed: &[String]) -> Vec<String> {
    listed.iter().map(|c| label(c)).collect()
}

/// One recipe as the model sees it.
struct Recipe {
    name: &'static str,
    /// What other contenders create.
    kinds: &'static [Kind],
    /// The real driver of each kind of node we may wait with.
    drivers: Vec<(Kind, Arc<dyn LockDriver>)>,
    /// The write side's driver, which says whether a write node holds (and may downgrade);
    /// `None` where nothing downgrades.
    downgrades: Option<Arc<dyn LockDriver>>,
}

/// The recipes whose waits go through the engine's hand-off, with their real drivers.
fn recipes() -> Vec<Recipe> {
    let client = MemoryEnsemble::new().connect();
    let mutex = InterProcessMutex::new(client.clone(), "/model/mutex").unwrap();
    let semaphore = InterProcessSemaphoreV2::new(client.clone(), "/model/semaphore", 1).unwrap();
    let rw = InterProcessReadWriteLock::new(client, "/model/rw").unwrap();
    let (read, write) = rw.side_drivers();
    vec![
        Recipe {
            name: "mutex",
            kinds: &[Kind::Lock, Kind::BareLock],
            drivers: vec![(Kind::Lock, mutex.driver().clone())],
            downgrades: None,
        },
        Recipe {
            name: "semaphore admission",
            kinds: &[Kind::Lock],
            drivers: vec![(Kind::Lock, semaphore.admission_driver())],
            downgrades: None,
        },
        Recipe {
            name: "read/write",
            kinds: &[Kind::Read, Kind::Write],
            drivers: vec![(Kind::Read, read), (Kind::Write, write.clone())],
            downgrades: Some(write),
        },
    ]
}

/// Whether the engine takes the lock on the deletion of the watched node without listing
/// again, given our kind of node, the sorted listing, our index in it and the driver's
/// decision. The crate's rule is [`real_rule`]; the tests also feed wrong ones.
type Rule = fn(Kind, &[String], usize, &Decision) -> bool;

/// The engine's rule: the driver's `last_ahead`.
fn real_rule(_: Kind, _: &[String], _: usize, decision: &Decision) -> bool {
    matches!(
        decision,
        Decision::Watch {
            last_ahead: true,
            ..
        }
    )
}

/// Actions before the watched node's deletion, and after it (the deletion may be seen late).
const BEFORE_DEPTH: u8 = 4;
const AFTER_DEPTH: u8 = 3;
/// Nodes queued ahead of ours in the first listing, and creates in any one history.
const MAX_AHEAD: usize = 3;
const MAX_CREATES: u8 = 2;

/// What the search found: one history where the rule grants and a listing would not.
#[derive(Debug)]
struct Counterexample(String);

/// One waiter's search: its node, the node it watches and what happened so far.
struct Search<'a> {
    recipe: &'a Recipe,
    /// Our node (id 0).
    ours: Node,
    driver: &'a dyn LockDriver,
    watched: String,
    /// Actions allowed after the watched node's deletion.
    after_depth: u8,
    trace: Vec<String>,
    /// (after the deletion, state, depth left) already searched.
    seen: HashSet<(bool, StateKey, u8)>,
}

impl Search<'_> {
    /// Everything that may happen to `dir` next.
    /// Everything that may happen to `dir` next (deletes first, creates last: the search
    /// then finds the shortest history first).
    fn actions(&self, dir: &Dir) -> Vec<Action> {
        let mut actions: Vec<Action> = dir
            .nodes
            .iter()
            .filter(|n| n.id != self.ours.id)
            .map(|n| Action::Delete(n.clone()))
            .collect();
        if let Some(write) = &self.recipe.downgrades {
            let [listed, _] = dir.listings(write.as_ref());
            // Ours waits: it downgrades nothing.
            for n in dir
                .nodes
                .iter()
                .filter(|n| n.kind == Kind::Write && n.id != 0)
            {
                let name = n.name();
                let at = listed.iter().position(|c| *c == name).unwrap();
                let downgraded = dir
                    .nodes
                    .iter()
                    .any(|r| r.kind == Kind::Read && r.seq == n.seq);
                if !downgraded && write.holds(&listed, at) {
                    actions.push(Action::Downgrade(n.clone()));
                }
            }
        }
        if dir.creates_left > 0 {
            actions.extend(self.recipe.kinds.iter().map(|&k| Action::Create(k)));
        }
        actions
    }

    fn apply(dir: &Dir, action: &Action) -> Dir {
        let mut next = dir.clone();
        match action {
            Action::Create(kind) => {
                next.nodes.push(Node {
                    kind: *kind,
                    seq: next.next_seq,
                    id: next.next_id,
                });
                next.next_seq += 1;
                next.next_id += 1;
                next.creates_left -= 1;
            }
            Action::Delete(node) => next.nodes.retain(|n| n != node),
            Action::Downgrade(writer) => {
                next.nodes.push(Node {
                    kind: Kind::Read,
                    seq: writer.seq,
                    id: next.next_id,
                });
                next.next_id += 1;
            }
        }
        next
    }

    /// The watched node is still there: anything may happen, its deletion included.
    fn before(&mut self, dir: &Dir, depth: u8) -> Option<Counterexample> {
        if !self.seen.insert((false, dir.key(), depth)) {
            return None;
        }
        for action in self.actions(dir) {
            let next = Self::apply(dir, &action);
            self.trace.push(format!("{action:?}"));
            let found = match &action {
                Action::Delete(n) if n.name() == self.watched => {
                    self.after(&next, self.after_depth)
                }
                _ if depth > 0 => self.before(&next, depth - 1),
                _ => None,
            };
            self.trace.pop();
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// The watched node is gone, so the rule has granted: a fresh listing must grant too,
    /// now and after whatever happens before the deletion is seen.
    fn after(&mut self, dir: &Dir, depth: u8) -> Option<Counterexample> {
        if !self.seen.insert((true, dir.key(), depth)) {
            return None;
        }
        let ours = self.ours.name();
        for listed in dir.listings(self.driver) {
            let at = listed.iter().position(|c| *c == ours).unwrap();
            let decision = self.driver.decide(&listed, at);
            if decision != Decision::Acquired {
                return Some(Counterexample(format!(
                    "{}: {:?} node {} granted on the deletion of {}; after {}, a fresh \
                     listing {:?} decides {}",
                    self.recipe.name,
                    self.ours.kind,
                    label(&ours),
                    label(&self.watched),
                    self.trace.join(", "),
                    labels(&listed),
                    describe(&decision),
                )));
            }
        }
        if depth == 0 {
            return None;
        }
        for action in self.actions(dir) {
            let next = Self::apply(dir, &action);
            self.trace.push(format!("{action:?}"));
            let found = self.after(&next, depth - 1);
            self.trace.pop();
            if found.is_some() {
                return found;
            }
        }
        None
    }
}

/// One first listing of a waiter: the directory when it listed, our node, our driver, and
/// what the driver decided from that listing.
struct Start<'a> {
    recipe: &'a Recipe,
    kind: Kind,
    driver: &'a dyn LockDriver,
    dir: Dir,
    ours: Node,
    listed: Vec<String>,
    decision: Decision,
}

impl Start<'_> {
    fn our_index(&self) -> usize {
        let ours = self.ours.name();
        self.listed.iter().position(|c| *c == ours).unwrap()
    }

    /// A history where `rule` hands over and a listing would not, if there is one.
    fn check(&self, rule: Rule) -> Option<Counterexample> {
        let Decision::Watch { predecessor, .. } = &self.decision else {
            return None;
        };
        if !rule(self.kind, &self.listed, self.our_index(), &self.decision) {
            return None;
        }
        // Deeper and deeper, so that a counterexample is a shortest one.
        (0..=BEFORE_DEPTH).find_map(|before| {
            (0..=AFTER_DEPTH).find_map(|after| {
                let mut search = Search {
                    recipe: self.recipe,
                    ours: self.ours.clone(),
                    driver: self.driver,
                    watched: predecessor.clone(),
                    after_depth: after,
                    trace: vec![format!("first listing {:?}", labels(&self.listed))],
                    seen: HashSet::new(),
                };
                search.before(&self.dir, before)
            })
        })
    }
}

/// Every kind of sequence of `len` kinds.
fn sequences(kinds: &[Kind], len: usize) -> Vec<Vec<Kind>> {
    (0..len).fold(vec![Vec::new()], |acc, _| {
        acc.into_iter()
            .flat_map(|prefix| {
                kinds.iter().map(move |&k| {
                    let mut v = prefix.clone();
                    v.push(k);
                    v
                })
            })
            .collect()
    })
}

/// Every first listing within the bounds, for every recipe and kind of waiter: up to
/// [`MAX_AHEAD`] nodes of any kind queued ahead, a downgrade read node beside any write node
/// that holds, both server orders.
fn starts(recipes: &[Recipe]) -> Vec<Start<'_>> {
    let mut starts = Vec::new();
    for recipe in recipes {
        for (kind, driver) in &recipe.drivers {
            for len in 0..=MAX_AHEAD {
                for ahead in sequences(recipe.kinds, len) {
                    let mut dirs = vec![directory(&ahead, *kind)];
                    if let Some(write) = &recipe.downgrades {
                        let base = dirs[0].clone();
                        let [listed, _] = base.listings(write.as_ref());
                        let writers = base.nodes.iter().filter(|n| n.kind == Kind::Write);
                        for n in writers.filter(|n| n.id != 0) {
                            let at = listed.iter().position(|c| *c == n.name()).unwrap();
                            if write.holds(&listed, at) {
                                dirs.push(Search::apply(&base, &Action::Downgrade(n.clone())));
                            }
                        }
                    }
                    for dir in dirs {
                        let ours = dir.nodes.iter().find(|n| n.id == 0).unwrap().clone();
                        for listed in dir.listings(driver.as_ref()) {
                            let at = listed.iter().position(|c| *c == ours.name()).unwrap();
                            starts.push(Start {
                                recipe,
                                kind: *kind,
                                driver: driver.as_ref(),
                                decision: driver.decide(&listed, at),
                                dir: dir.clone(),
                                ours: ours.clone(),
                                listed,
                            });
                        }
                    }
                }
            }
        }
    }
    starts
}

/// `ahead` queued in that order, then our node of kind `ours` (id 0).
fn directory(ahead: &[Kind], ours: Kind) -> Dir {
    let mut nodes: Vec<Node> = ahead
        .iter()
        .enumerate()
        .map(|(i, &kind)| Node {
            kind,
            seq: i as u32,
            id: i as u32 + 1,
        })
        .collect();
    nodes.push(Node {
        kind: ours,
        seq: ahead.len() as u32,
        id: 0,
    });
    Dir {
        nodes,
        next_seq: ahead.len() as u32 + 1,
        next_id: ahead.len() as u32 + 1,
        creates_left: MAX_CREATES,
    }
}

/// The first counterexample to `rule` over every start, if any.
fn counterexample(rule: Rule) -> Option<Counterexample> {
    let recipes = recipes();
    let found = starts(&recipes).iter().find_map(|s| s.check(rule));
    found
}

mod tests;
