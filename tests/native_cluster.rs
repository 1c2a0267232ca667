//! Our own client on a 3-node ensemble: a rolling restart (each server in turn) and then a
//! leader kill while 8 sessions contend for one mutex. Nothing may break: no two holders at
//! once, no session lost, no held lock reported lost, and the lock keeps changing hands.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
use zk_locks::testing::{shared_server, TestingCluster};
use zk_locks::{ConnectionState, InterProcessLock, InterProcessMutex, LockState, ZkClient};

const SESSION: Duration = Duration::from_secs(10);
const CONTENDERS: usize = 8;

#[derive(Default)]
struct Tally {
    holders: AtomicUsize,
    violations: AtomicUsize,
    lost_while_held: AtomicUsize,
    acquisitions: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

fn contend(client: Arc<NativeClient>, path: String, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    let mutex = InterProcessMutex::new(client.clone(), &path).unwrap();
    while !stop.load(Ordering::SeqCst) {
        let guard = match mutex.try_lock_for(Duration::from_secs(5)) {
            Ok(Some(guard)) => guard,
            Ok(None) => continue,
            Err(e) => {
                // A request may fail while its server restarts; the recipe must stay safe.
                tally.errors.lock().unwrap().push(e.to_string());
                continue;
            }
        };
        if tally.holders.fetch_add(1, Ordering::SeqCst) != 0 {
            tally.violations.fetch_add(1, Ordering::SeqCst);
        }
        // The work: a request of our own under the lock.
        let _ = client.exists(&path);
        if guard.state() == LockState::Lost {
            tally.lost_while_held.fetch_add(1, Ordering::SeqCst);
        }
        tally.holders.fetch_sub(1, Ordering::SeqCst);
        tally.acquisitions.fetch_add(1, Ordering::SeqCst);
        drop(guard);
    }
}

/// Blocks until `n` more acquisitions happened (progress); false after a minute without.
fn made_progress(tally: &Tally, n: usize) -> bool {
    let target = tally.acquisitions.load(Ordering::SeqCst) + n;
    let deadline = Instant::now() + Duration::from_secs(60);
    while tally.acquisitions.load(Ordering::SeqCst) < target {
        if Instant::now() >= deadline {
            return false;
        }
        // Polling a counter another thread bumps; not synchronisation of the subject.
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// One client's session transitions, as its listener records them.
type Transitions = Arc<Mutex<Vec<(Instant, ConnectionState)>>>;

/// What happened when, for the failure message: the test's own steps and every session
/// transition of every client.
struct Timeline {
    start: Instant,
    steps: Mutex<Vec<(Instant, String)>>,
    transitions: Vec<Transitions>,
}

impl Timeline {
    fn new(clients: &[Arc<NativeClient>]) -> Timeline {
        let transitions = clients
            .iter()
            .map(|c| {
                let log = Arc::new(Mutex::new(Vec::new()));
                let sink = log.clone();
                c.session()
                    .subscribe(move |s| sink.lock().unwrap().push((Instant::now(), s.state)));
                log
            })
            .collect();
        Timeline {
            start: Instant::now(),
            steps: Mutex::new(Vec::new()),
            transitions,
        }
    }

    /// Client `i`'s longest time between leaving a connected state and reaching one again.
    fn longest_outage(&self, i: usize) -> Duration {
        let mut longest = Duration::ZERO;
        let mut down_since = None;
        for (at, state) in self.transitions[i].lock().unwrap().iter() {
            match (state.is_connected(), down_since) {
                (false, None) => down_since = Some(*at),
                (true, Some(since)) => {
                    longest = longest.max(at.saturating_duration_since(since));
                    down_since = None;
                }
                _ => {}
            }
        }
        longest
    }

    fn step(&self, what: String) {
        eprintln!("{:>7.3}s {what}", self.start.elapsed().as_secs_f64());
        self.steps.lock().unwrap().push((Instant::now(), what));
    }

    /// Client `i`'s story: the steps, its transitions and its link journal, merged in time
    /// order (seconds since the test started), with the member each port belongs to.
    fn story(&self, i: usize, client: &NativeClient, cluster: &TestingCluster) -> String {
        let member = |text: String| {
            (0..cluster.len()).fold(text, |t, m| {
                let port = format!("127.0.0.1:{}", cluster.port(m));
                t.replace(&port, &format!("{port} (member {m})"))
            })
        };
        let mut lines: Vec<(Instant, String)> = self.steps.lock().unwrap().clone();
        lines.extend(
            self.transitions[i]
                .lock()
                .unwrap()
                .iter()
                .map(|(at, state)| (*at, format!("    session -> {state:?}"))),
        );
        lines.extend(
            client
                .link_journal()
                .into_iter()
                .map(|(at, what)| (at, format!("    link: {}", member(what)))),
        );
        lines.sort_by_key(|(at, _)| *at);
        lines
            .iter()
            .map(|(at, what)| {
                let t = at.saturating_duration_since(self.start).as_secs_f64();
                format!("{t:>8.3}s {what}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[test]
fn rolling_restart_and_leader_kill_lose_nothing() {
    if shared_server().is_none() {
        return;
    }
    let cluster = TestingCluster::start(3).unwrap();
    let path = format!("/rolling-{}", uuid::Uuid::new_v4());
    let clients: Vec<Arc<NativeClient>> = (0..CONTENDERS)
        .map(|_| NativeClient::connect(&cluster.connect_string(), SESSION).unwrap())
        .collect();
    let ids: Vec<_> = clients.iter().map(|c| c.session().session_id()).collect();
    let epochs: Vec<_> = clients.iter().map(|c| c.session().epoch()).collect();
    let timeline = Timeline::new(&clients);
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = clients
        .iter()
        .map(|c| {
            let (c, path, tally, stop) = (c.clone(), path.clone(), tally.clone(), stop.clone());
            std::thread::spawn(move || contend(c, path, tally, stop))
        })
        .collect();
    // Every client's story, for a failure message.
    let stories = || {
        (0..clients.len())
            .map(|i| format!("client {i}:\n{}", timeline.story(i, &clients[i], &cluster)))
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let progress = |when: &str| {
        assert!(
            made_progress(&tally, 20),
            "no progress {when}\n{}",
            stories()
        );
        timeline.step("20 more acquisitions".into());
    };
    progress("at the start");
    // Each fault starts only once the ensemble and every client are back from the last one:
    // a session faces one outage at a time, however slow the machine is to recover.
    let quorum = |after: &str| {
        cluster.wait_for_quorum(Duration::from_secs(90)).unwrap();
        timeline.step(format!("quorum after {after}"));
        let deadline = Instant::now() + Duration::from_secs(90);
        for (i, c) in clients.iter().enumerate() {
            let s = c.session().wait_until_connected(Some(deadline));
            assert!(
                s.state.is_connected(),
                "client {i} did not reconnect: {s:?}\n{}",
                stories()
            );
        }
        timeline.step("every client connected".into());
    };
    for i in 0..cluster.len() {
        let leader = cluster.leader();
        cluster.kill(i);
        timeline.step(format!("killed member {i} (leader: {leader:?})"));
        cluster.restart(i).unwrap();
        timeline.step(format!("restarted member {i}"));
        quorum("the restart");
        progress("after the restart");
    }
    let leader = cluster.leader().expect("a leader");
    cluster.kill(leader);
    timeline.step(format!("killed the leader, member {leader}"));
    quorum("the leader kill");
    progress("after the leader kill");
    cluster.restart(leader).unwrap();
    timeline.step(format!("restarted member {leader}"));
    quorum("the restart");
    progress("after the leader's restart");
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    let outages: Vec<_> = (0..clients.len())
        .map(|i| format!("{:.1}s", timeline.longest_outage(i).as_secs_f64()))
        .collect();
    eprintln!("longest outage per client: {outages:?}");
    let errors = tally.errors.lock().unwrap().clone();
    eprintln!(
        "{} acquisitions, {} errors: {:?}",
        tally.acquisitions.load(Ordering::SeqCst),
        errors.len(),
        errors.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(
        tally.violations.load(Ordering::SeqCst),
        0,
        "two holders at once"
    );
    assert_eq!(
        tally.lost_while_held.load(Ordering::SeqCst),
        0,
        "a held lock was lost"
    );
    let lost: Vec<String> = clients
        .iter()
        .enumerate()
        .filter(|(_, c)| c.session().snapshot().losses != 0)
        .map(|(i, c)| {
            format!(
                "client {i}, session {:x?}: {:?}\n{}",
                ids[i],
                c.session().snapshot(),
                timeline.story(i, c, &cluster)
            )
        })
        .collect();
    assert!(
        lost.is_empty(),
        "{} session(s) lost:\n{}\n\nthe members' elections:\n{}",
        lost.len(),
        lost.join("\n\n"),
        elections(&cluster)
    );
    for ((client, id), before) in clients.iter().zip(ids).zip(epochs) {
        let s = client.session().snapshot();
        assert_eq!(s.session_id, id);
        // Every server was restarted, so every session moved at least once (Suspended, then
        // Reconnected elsewhere): the faults reached everyone.
        assert!(s.epoch >= before + 2, "{s:?}");
    }
}

/// Every member's log lines about its state and its elections (what a slow election did).
fn elections(cluster: &TestingCluster) -> String {
    (0..cluster.len())
        .map(|m| {
            let log = std::fs::read_to_string(cluster.log_path(m)).unwrap_or_default();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| {
                    [
                        "LOOKING",
                        "LEADING",
                        "FOLLOWING",
                        "Notification time out",
                        "Exception",
                    ]
                    .iter()
                    .any(|k| l.contains(k))
                })
                .collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            format!("member {m}:\n{}", tail.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
