//! The double-leader reports against Curator's leader recipes, replayed against ours. Each
//! test runs a monitor that samples every participant's leadership while the faults happen:
//! at no moment do two participants report leadership `Held`, and the terms of successive
//! leaders only grow.
//!
//! - CURATOR-460: a leader that tolerates SUSPENDED on a timer leads on after its session
//!   expired. Ours stops the moment the link is suspended.
//! - CURATOR-444: a leader cut off by a silent partition keeps leading. Ours turns `Suspect`
//!   when its client stops hearing the server, before the server can expire the session
//!   (real server, `FaultProxy::blackhole`), a latch's and a selector's alike.
//! - Netflix curator #216: stale leadership after connection trouble (three of twelve
//!   instances leading). Twelve latches under rounds of blips, expiries and given-up
//!   sessions; the same rounds for four auto-requeueing selectors.
//! - CURATOR-346: wrong participants after a suspension. The queue names each participant
//!   once and flags the one that leads.
//! - CURATOR-653: a reset racing a leader switch. A follower's request runs in a new session
//!   the client has not reported while the leader hands over (a latch, then a selector).

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use zk_locks::client::memory::{Fault, MemoryClient, MemoryEnsemble, Op};
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::locks::{LeaderLatch, LeaderSelector, Leadership};
use zk_locks::testing::harness::{eventually, unique_root};
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{LockState, SharedClient, ZkClient};

const PATIENCE: Duration = Duration::from_secs(20);

/// One participant of either recipe, as the monitor reads it.
trait Participates: Sync {
    fn spell(&self) -> Option<Leadership>;
    fn name(&self) -> &str;
}

impl Participates for LeaderLatch {
    fn spell(&self) -> Option<Leadership> {
        self.leadership()
    }
    fn name(&self) -> &str {
        self.id()
    }
}

impl Participates for LeaderSelector {
    fn spell(&self) -> Option<Leadership> {
        self.leadership()
    }
    fn name(&self) -> &str {
        self.id()
    }
}

/// The (participant, term) of every participant that leads as `order` reads them, one
/// after another.
fn leading_in<P: Participates>(
    participants: &[P],
    order: impl Iterator<Item = usize>,
) -> Vec<(usize, i64)> {
    order
        .filter_map(|i| {
            let spell = participants[i].spell().filter(|s| s.is_leading())?;
            Some((i, spell.term()))
        })
        .collect()
}

/// Samples `participants` until `stop`: the most seen leading at once, and the successive
/// (id, term) of the leaders seen.
///
/// One pass reads the participants one after another, not at one instant: it can see a
/// leader that stopped just after it was read and its successor that started just before.
/// So when a pass sees two, a second pass reads them again in the opposite order, and only
/// participants seen leading in both, with the same term, count as leading at once: a term is
/// one node, no other participant can lead while that node is there, and it never leads
/// again once the node is gone, so two such spells both span the moment between the passes.
fn monitor<P: Participates>(participants: &[P], stop: &AtomicBool) -> (usize, Vec<(String, i64)>) {
    let mut most = 0;
    let mut seen: Vec<(String, i64)> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let first = leading_in(participants, 0..participants.len());
        let at_once = match first.len() {
            0 | 1 => first.len(),
            _ => leading_in(participants, (0..participants.len()).rev())
                .iter()
                .filter(|again| first.contains(again))
                .count(),
        };
        most = most.max(at_once);
        if let [(i, term)] = first[..] {
            let now = (participants[i].name().to_string(), term);
            if seen.last() != Some(&now) {
                seen.push(now);
            }
        }
        thread::sleep(Duration::from_millis(1)); // the sampling period
    }
    (most, seen)
}

/// What the monitor saw must be one leader at a time, terms only growing.
fn assert_one_leader_per_term(most: usize, seen: &[(String, i64)]) {
    assert!(most <= 1, "{most} participants led at once");
    assert!(
        seen.windows(2).all(|w| w[1].1 > w[0].1),
        "terms repeated or went back: {seen:?}"
    );
}

fn latch(client: SharedClient, path: &str, id: &str) -> LeaderLatch {
    let latch = LeaderLatch::new(client, path, id).unwrap();
    latch.start().unwrap();
    latch
}

/// Latches on `clients`, ids `ids`, queued in that order (each started once the one before
/// is in the queue): the first leads.
fn in_order(clients: Vec<SharedClient>, path: &str, ids: &[&str]) -> Vec<LeaderLatch> {
    let latches: Vec<LeaderLatch> = clients
        .into_iter()
        .zip(ids)
        .enumerate()
        .map(|(i, (c, id))| {
            let l = latch(c, path, id);
            eventually(PATIENCE, "queued", || {
                l.participants().is_ok_and(|p| p.len() == i + 1)
            });
            l
        })
        .collect();
    assert_eq!(the_leader(&latches), 0);
    latches
}

/// Runs `faults` while a monitor samples `participants`, then checks what it saw.
fn monitored<P: Participates>(participants: &[P], faults: impl FnOnce()) -> Vec<(String, i64)> {
    /// Stops the monitor however `faults` ends (a panic included: the scope joins it).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = AtomicBool::new(false);
    let (most, seen) = thread::scope(|s| {
        let watching = s.spawn(|| monitor(participants, &stop));
        {
            let _stop = Stop(&stop);
            faults();
        }
        watching.join().unwrap()
    });
    assert_one_leader_per_term(most, &seen);
    seen
}

/// The one participant that leads (waited for).
fn the_leader<P: Participates>(participants: &[P]) -> usize {
    let mut found = None;
    eventually(PATIENCE, "one leader", || {
        let leading: Vec<usize> = (0..participants.len())
            .filter(|&i| participants[i].spell().is_some_and(|s| s.is_leading()))
            .collect();
        assert!(leading.len() <= 1, "two leaders: {leading:?}");
        found = leading.first().copied();
        found.is_some()
    });
    found.unwrap()
}

/// Every participant is in the queue exactly once, and the one flagged leads.
fn assert_queue_names_each_once(latches: &[LeaderLatch]) {
    eventually(PATIENCE, "each participant queued once", || {
        let queue = latches[0].participants().unwrap();
        let mut ids: Vec<String> = queue.iter().map(|p| p.id().into_owned()).collect();
        ids.sort();
        let mut expected: Vec<String> = latches.iter().map(|l| l.id().to_string()).collect();
        expected.sort();
        ids == expected
    });
    let leader = the_leader(latches);
    let queue = latches[0].participants().unwrap();
    assert_eq!(queue[0].id(), latches[leader].id());
    assert!(queue[0].is_holder && queue[1..].iter().all(|p| !p.is_holder));
}

#[test]
fn curator_460_a_suspended_leader_stops_at_once_not_on_a_timer() {
    let e = MemoryEnsemble::new();
    let ca = e.connect();
    let latches = in_order(vec![ca.clone(), e.connect()], "/e460", &["a", "b"]);
    monitored(&latches, || {
        ca.suspend();
        assert!(!latches[0].has_leadership(), "a leads on while suspended");
        ca.expire();
        latches[1].await_leadership_for(PATIENCE).unwrap().unwrap();
        ca.resume();
        eventually(PATIENCE, "a queued again", || {
            latches[1].participants().unwrap().len() == 2
        });
    });
    assert_queue_names_each_once(&latches);
    assert!(latches[1].has_leadership());
}

#[test]
fn netflix_216_no_stale_leader_after_rounds_of_connection_trouble() {
    let e = MemoryEnsemble::new();
    let clients: Vec<std::sync::Arc<MemoryClient>> = (0..12).map(|_| e.connect()).collect();
    let latches: Vec<LeaderLatch> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| latch(c.clone(), "/e216", &format!("n{i:02}")))
        .collect();
    the_leader(&latches);
    let seen = monitored(&latches, || {
        for round in 0..12 {
            let leader = the_leader(&latches);
            // The leader and two others have trouble, each its own kind.
            let hit = [leader, (leader + 5) % 12, (leader + 7) % 12];
            for (k, &i) in hit.iter().enumerate() {
                trouble(&e, &clients[i], round + k);
            }
        }
        assert_queue_names_each_once(&latches);
    });
    assert!(seen.len() >= 2, "leadership never moved: {seen:?}");
}

#[test]
fn curator_346_the_queue_after_a_suspension_names_each_participant_once() {
    let e = MemoryEnsemble::new();
    let clients: Vec<_> = (0..3).map(|_| e.connect()).collect();
    let latches: Vec<LeaderLatch> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| latch(c.clone(), "/e346", &format!("p{i}")))
        .collect();
    monitored(&latches, || {
        assert_queue_names_each_once(&latches);
        let leader = the_leader(&latches);
        clients[leader].suspend();
        clients[leader].resume(); // same session: the same leader, the same queue
        assert_queue_names_each_once(&latches);
        assert_eq!(the_leader(&latches), leader);
        let follower = (leader + 1) % 3;
        clients[follower].suspend();
        clients[follower].expire();
        clients[follower].resume(); // a new session: queued again, once
        assert_queue_names_each_once(&latches);
    });
}

#[test]
fn curator_653_a_session_change_not_reported_during_a_handover_leaves_one_leader() {
    let e = MemoryEnsemble::new();
    let cb = e.connect();
    let latches = in_order(vec![e.connect(), cb.clone()], "/e653", &["a", "b"]);
    monitored(&latches, || {
        // b's session is replaced under it without b being told: its node and its watch on
        // a's node go with the old session, and a request of b's runs in the new one.
        cb.inject(Fault::in_new_session(Op::Exists));
        let _ = cb.exists("/elsewhere");
        latches[0].close().unwrap(); // the handover b cannot see yet
        assert!(!latches[1].has_leadership());
        cb.report_session_change(); // b learns of it: it queues anew, alone, and leads
        eventually(PATIENCE, "b leads", || latches[1].has_leadership());
    });
    eventually(PATIENCE, "b's old node gone", || {
        latches[1].participants().is_ok_and(|q| q.len() == 1)
    });
    assert_eq!(latches[1].leader().unwrap().unwrap().id(), "b");
    assert_eq!(latches[1].leadership().unwrap().state(), LockState::Held);
}

/// CURATOR-653 for selectors: the same unreported session change of the waiting selector
/// while the leader hands over.
#[test]
fn curator_653_a_selector_whose_session_changed_unreported_leads_alone_once_told() {
    let e = MemoryEnsemble::new();
    let cb = e.connect();
    let selector = |client: SharedClient, id: &str| {
        let s = LeaderSelector::new(client, "/e653s", |l| {
            while !l.ended().is_cancelled() {
                l.wait_while_leading(Some(Duration::from_millis(20)));
            }
        })
        .unwrap()
        .with_id(id);
        s.start().unwrap();
        s
    };
    let a = selector(e.connect(), "a");
    eventually(PATIENCE, "a leads", || a.has_leadership());
    let b = selector(cb.clone(), "b");
    eventually(PATIENCE, "b queued", || {
        b.participants().is_ok_and(|p| p.len() == 2)
    });
    let selectors = [a, b];
    monitored(&selectors, || {
        cb.inject(Fault::in_new_session(Op::Exists));
        let _ = cb.exists("/elsewhere");
        selectors[0].close().unwrap(); // the handover b cannot see yet
        assert!(!selectors[1].has_leadership());
        cb.report_session_change(); // b learns of it: it queues anew, alone, and leads
        eventually(PATIENCE, "b leads", || selectors[1].has_leadership());
    });
    eventually(PATIENCE, "b's old node gone", || {
        selectors[1].participants().is_ok_and(|q| q.len() == 1)
    });
    assert_eq!(selectors[1].leader().unwrap().unwrap().id(), "b");
    assert_eq!(selectors[1].leadership().unwrap().state(), LockState::Held);
}

/// A silent partition: the leader's link goes quiet (no reset) and it cannot reconnect. Its
/// client stops hearing the server and suspends before the server expires the session; only
/// then can the other lead.
#[test]
fn curator_444_a_partitioned_leader_stops_before_another_leads() {
    let Some(server) = shared_server() else {
        return;
    };
    let path = format!("{}/election", unique_root("e444"));
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let options =
        NativeOptions::new(proxy.connect_string()).session_timeout(Duration::from_secs(3));
    let ca: SharedClient = NativeClient::connect_with(options).unwrap();
    let cb: SharedClient = NativeClient::connect(&server.connect_string(), PATIENCE).unwrap();
    let latches = in_order(vec![ca, cb], &path, &["a", "b"]);
    monitored(&latches, || {
        proxy.refuse(true);
        proxy.blackhole();
        latches[1].await_leadership_for(PATIENCE).unwrap().unwrap();
    });
    assert!(latches[1].has_leadership());
    assert!(!latches[0].has_leadership());
}

/// CURATOR-444 for selectors: the leading selector's link goes silent; its callback's token
/// ends when its client stops hearing the server, and the callback returns, before the
/// server expires the session and the other selector's callback runs.
#[test]
fn curator_444_a_partitioned_selector_stops_before_another_leads() {
    let Some(server) = shared_server() else {
        return;
    };
    let path = format!("{}/selector", unique_root("e444s"));
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let options =
        NativeOptions::new(proxy.connect_string()).session_timeout(Duration::from_secs(3));
    let ca: SharedClient = NativeClient::connect_with(options).unwrap();
    let cb: SharedClient = NativeClient::connect(&server.connect_string(), PATIENCE).unwrap();
    let (led, leaders) = std::sync::mpsc::channel();
    let selector = |client: SharedClient, id: &str| {
        let led = led.clone();
        let s = LeaderSelector::new(client, &path, move |l| {
            let _ = led.send(l.id().to_string());
            while !l.ended().is_cancelled() {
                l.wait_while_leading(Some(Duration::from_millis(50)));
            }
            let _ = led.send(format!("{} returned", l.id()));
        })
        .unwrap()
        .with_id(id);
        s.start().unwrap();
        s
    };
    let a = selector(ca, "a");
    assert_eq!(leaders.recv_timeout(PATIENCE).unwrap(), "a");
    let b = selector(cb, "b");
    eventually(PATIENCE, "b queued", || {
        b.participants().is_ok_and(|p| p.len() == 2)
    });
    let selectors = [a, b];
    monitored(&selectors, || {
        proxy.refuse(true);
        proxy.blackhole();
        // a's callback is told to stop, and returns, before b's runs.
        assert_eq!(leaders.recv_timeout(PATIENCE).unwrap(), "a returned");
        assert_eq!(leaders.recv_timeout(PATIENCE).unwrap(), "b");
    });
    assert!(selectors[1].has_leadership());
    assert!(!selectors[0].has_leadership());
}

/// The trouble of a round for one client, by kind: a blip (the same session), an expiry
/// while the link is down, or a session the client gives up before the server expires it.
/// Every expiry comes while the link is down, as a real server's does (it expires a session
/// only after hearing nothing for its timeout). An instant expiry of a connected client, or a
/// node deleted by someone else, ends a leadership before its holder can know, so another
/// may lead while it still reads `Held`: no client can tell, and the torture soak sets such
/// spells aside (`expired-sections`) for fencing to judge.
fn trouble(e: &MemoryEnsemble, c: &MemoryClient, kind: usize) {
    match kind % 3 {
        0 => {
            c.suspend();
            c.resume();
        }
        1 => {
            c.suspend();
            c.expire();
            c.resume();
        }
        _ => {
            let old = c.session_id();
            c.suspend();
            c.give_up_session();
            e.expire_session(old);
            c.resume();
        }
    }
}

/// Auto-requeueing selectors under rounds of trouble (the leader and another each round),
/// each callback leading until its token ends: never two selectors leading at once, every
/// term larger than the last, and each selector in the queue once afterwards.
///
/// A callback records its term only if its spell still leads, checked under the record's
/// lock: a callback can start after its spell already ended (the session went between the
/// grant and the call), and such a spell was never leadership.
#[test]
fn selectors_under_rounds_of_trouble_never_lead_twice_at_once() {
    use std::sync::{Arc, Mutex};
    let e = MemoryEnsemble::new();
    let clients: Vec<Arc<MemoryClient>> = (0..4).map(|_| e.connect()).collect();
    let terms = Arc::new(Mutex::new(Vec::new()));
    let selectors: Vec<LeaderSelector> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let terms = terms.clone();
            let s = LeaderSelector::new(c.clone(), "/eselect", move |l| {
                {
                    let mut terms = terms.lock().unwrap();
                    if l.is_leading() {
                        terms.push(l.term());
                    }
                }
                while !l.ended().is_cancelled() {
                    l.wait_while_leading(Some(Duration::from_millis(20)));
                }
            })
            .unwrap()
            .with_id(format!("s{i}"));
            s.auto_requeue();
            s.start().unwrap();
            s
        })
        .collect();
    the_leader(&selectors);
    let seen = monitored(&selectors, || {
        for round in 0..12 {
            let leader = the_leader(&selectors);
            let other = (leader + 1 + round % 3) % 4;
            trouble(&e, &clients[leader], round);
            trouble(&e, &clients[other], round + 1);
        }
        eventually(PATIENCE, "each selector queued once", || {
            let mut ids: Vec<String> = selectors[0]
                .participants()
                .unwrap()
                .iter()
                .map(|p| p.id().into_owned())
                .collect();
            ids.sort();
            ids == ["s0", "s1", "s2", "s3"]
        });
        the_leader(&selectors);
    });
    assert!(seen.len() >= 2, "leadership never moved: {seen:?}");
    for s in &selectors {
        s.close().unwrap();
    }
    let terms = terms.lock().unwrap().clone();
    assert!(terms.len() >= 2, "{terms:?}");
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "{terms:?}");
}
