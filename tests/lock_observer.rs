//! `LockObserver`: the events of scripted scenarios on the in-memory ensemble, exactly.
//!
//! Each observer records every call as a line (`event kind node session [duration]`); a test
//! scripts a scenario and compares the whole record, so an event too many, too few or out of
//! order fails it.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use zk_locks::client::memory::{MemoryEnsemble, MemoryOptions};
use zk_locks::locks::{
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, LockEvent,
    LockObserver, LockState, ParticipantKind,
};
use zk_locks::{Error, InterProcessLock, InterProcessMutex, SharedClient};

const PATIENCE: Duration = Duration::from_secs(20);

/// Records every event, with its node and session, and the durations apart.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
    durations: Mutex<Vec<(&'static str, Duration)>>,
}

impl Recorder {
    fn push(&self, what: &str, e: &LockEvent<'_>) {
        let session = e.session_id.map(|s| format!("0x{s:x}"));
        self.events.lock().unwrap().push(format!(
            "{what} {} {} {} {}",
            e.kind,
            e.lock,
            e.node,
            session.as_deref().unwrap_or("none")
        ));
    }

    fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    fn kinds(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e.split(' ').next().unwrap().to_string())
            .collect()
    }

    fn durations(&self) -> Vec<(&'static str, Duration)> {
        self.durations.lock().unwrap().clone()
    }
}

impl LockObserver for Recorder {
    fn queued(&self, e: &LockEvent<'_>) {
        self.push("queued", e);
    }
    fn acquired(&self, e: &LockEvent<'_>, wait: Duration) {
        self.push("acquired", e);
        self.durations.lock().unwrap().push(("wait", wait));
    }
    fn timed_out(&self, lock: &str, kind: ParticipantKind, wait: Duration) {
        self.events
            .lock()
            .unwrap()
            .push(format!("timed_out {kind} {lock}"));
        self.durations.lock().unwrap().push(("timed_out", wait));
    }
    fn failed(&self, lock: &str, kind: ParticipantKind, error: &Error) {
        self.events
            .lock()
            .unwrap()
            .push(format!("failed {kind} {lock} {error}"));
    }
    fn released(&self, e: &LockEvent<'_>, held: Duration) {
        self.push("released", e);
        self.durations.lock().unwrap().push(("held", held));
    }
    fn suspect(&self, e: &LockEvent<'_>) {
        self.push("suspect", e);
    }
    fn held_again(&self, e: &LockEvent<'_>) {
        self.push("held_again", e);
    }
    fn lost(&self, e: &LockEvent<'_>) {
        self.push("lost", e);
    }
}

fn hex(client: &SharedClient) -> String {
    format!("0x{:x}", client.session().session_id().unwrap())
}

/// Waits until `cond` holds (bounded: a loaded machine may be slow).
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let end = std::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(std::time::Instant::now() < end, "never happened: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn queued_acquired_released_with_their_nodes_sessions_and_durations() {
    let e = MemoryEnsemble::new();
    let (a, b): (SharedClient, SharedClient) = (e.connect(), e.connect());
    let seen_a = Arc::new(Recorder::default());
    let seen_b = Arc::new(Recorder::default());
    let first = InterProcessMutex::new(a.clone(), "/locks/o")
        .unwrap()
        .with_observer(seen_a.clone());
    let second = Arc::new(
        InterProcessMutex::new(b.clone(), "/locks/o")
            .unwrap()
            .with_observer(seen_b.clone()),
    );

    let guard = first.lock().unwrap();
    let held_node = guard.node_path().unwrap().to_string();
    let waiter = {
        let second = second.clone();
        thread::spawn(move || {
            let guard = second.lock().unwrap();
            let node = guard.node_path().unwrap().to_string();
            drop(guard);
            node
        })
    };
    eventually("the second contender queued", || {
        seen_b.kinds() == ["queued"]
    });
    thread::sleep(Duration::from_millis(20)); // a wait and a hold measurably above zero
    drop(guard);
    let waited_node = waiter.join().unwrap();

    let (sa, sb) = (hex(&a), hex(&b));
    assert_eq!(
        seen_a.events(),
        [
            format!("acquired mutex /locks/o {held_node} {sa}"),
            format!("released mutex /locks/o {held_node} {sa}"),
        ]
    );
    assert_eq!(
        seen_b.events(),
        [
            format!("queued mutex /locks/o {waited_node} {sb}"),
            format!("acquired mutex /locks/o {waited_node} {sb}"),
            format!("released mutex /locks/o {waited_node} {sb}"),
        ]
    );
    let held_a = seen_a.durations()[1];
    assert_eq!(held_a.0, "held");
    assert!(held_a.1 >= Duration::from_millis(20), "{held_a:?}");
    let wait_b = seen_b.durations()[0];
    assert_eq!(wait_b.0, "wait");
    assert!(wait_b.1 >= Duration::from_millis(20), "{wait_b:?}");
}

#[test]
fn a_session_loss_is_seen_as_suspect_then_lost_then_released() {
    let e = MemoryEnsemble::new();
    let client = e.connect();
    let shared: SharedClient = client.clone();
    let seen = Arc::new(Recorder::default());
    let mutex = InterProcessMutex::new(shared.clone(), "/locks/s")
        .unwrap()
        .with_observer(seen.clone());
    let guard = mutex.lock().unwrap();
    let node = guard.node_path().unwrap().to_string();
    let session = hex(&shared);

    client.suspend();
    assert_eq!(guard.wait_while_held(Some(PATIENCE)), LockState::Suspect);
    assert_eq!(guard.state(), LockState::Suspect); // seen again: reported once
    client.give_up_session();
    assert_eq!(guard.wait_until_lost(Some(PATIENCE)), LockState::Lost);
    assert_eq!(guard.state(), LockState::Lost);
    drop(guard);

    assert_eq!(
        seen.events(),
        [
            format!("acquired mutex /locks/s {node} {session}"),
            format!("suspect mutex /locks/s {node} {session}"),
            format!("lost mutex /locks/s {node} {session}"),
            format!("released mutex /locks/s {node} {session}"),
        ]
    );
}

#[test]
fn a_suspect_hold_that_comes_back_is_held_again() {
    let e = MemoryEnsemble::new();
    let client = e.connect();
    let seen = Arc::new(Recorder::default());
    let mutex = InterProcessMutex::new(client.clone(), "/locks/h")
        .unwrap()
        .with_observer(seen.clone());
    let guard = mutex.lock().unwrap();
    client.suspend();
    assert_eq!(guard.state(), LockState::Suspect);
    client.resume();
    assert_eq!(guard.state(), LockState::Held);
    guard.unlock().unwrap();
    assert_eq!(
        seen.kinds(),
        ["acquired", "suspect", "held_again", "released"]
    );
}

#[test]
fn a_loss_nobody_looked_at_is_reported_on_release() {
    let e = MemoryEnsemble::new();
    let client = e.connect();
    let seen = Arc::new(Recorder::default());
    let mutex = InterProcessMutex::new(client.clone(), "/locks/l")
        .unwrap()
        .with_observer(seen.clone());
    let guard = mutex.lock().unwrap();
    client.expire();
    drop(guard);
    assert_eq!(seen.kinds(), ["acquired", "lost", "released"]);
}

#[test]
fn a_timed_out_acquire_is_reported_after_its_queued() {
    let e = MemoryEnsemble::new();
    let seen = Arc::new(Recorder::default());
    let holder = InterProcessMutex::new(e.connect(), "/locks/t").unwrap();
    let waiter = InterProcessMutex::new(e.connect(), "/locks/t")
        .unwrap()
        .with_observer(seen.clone());
    let _guard = holder.lock().unwrap();
    assert!(waiter
        .try_lock_for(Duration::from_millis(30))
        .unwrap()
        .is_none());
    let events = seen.events();
    assert_eq!(seen.kinds(), ["queued", "timed_out"], "{events:?}");
    assert_eq!(events[1], "timed_out mutex /locks/t");
    assert!(seen.durations()[0].1 >= Duration::from_millis(30));
}

#[test]
fn a_failed_acquire_is_reported() {
    let e = MemoryEnsemble::new();
    let client = e.connect();
    let seen = Arc::new(Recorder::default());
    let mutex = InterProcessMutex::new(client.clone(), "/locks/f")
        .unwrap()
        .with_observer(seen.clone());
    zk_locks::client::ZkClient::close(&*client);
    assert!(mutex.lock().is_err());
    assert_eq!(seen.kinds(), ["failed"]);
}

#[test]
fn the_client_observer_sees_every_recipe_unless_one_sets_its_own() {
    let e = MemoryEnsemble::new();
    let on_client = Arc::new(Recorder::default());
    let on_recipe = Arc::new(Recorder::default());
    let client: SharedClient = e
        .connect_with(MemoryOptions::new().lock_observer(on_client.clone()))
        .unwrap();
    let plain = InterProcessMutex::new(client.clone(), "/locks/c1").unwrap();
    let own = InterProcessMutex::new(client.clone(), "/locks/c2")
        .unwrap()
        .with_observer(on_recipe.clone());
    drop(plain.lock().unwrap());
    drop(own.lock().unwrap());
    let rw = InterProcessReadWriteLock::new(client.clone(), "/locks/c3").unwrap();
    drop(rw.write_lock().lock().unwrap());
    drop(rw.read_lock().lock().unwrap());

    let lines = on_client.events();
    let summary: Vec<String> = lines
        .iter()
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        summary,
        [
            "acquired mutex /locks/c1",
            "released mutex /locks/c1",
            "acquired write /locks/c3",
            "released write /locks/c3",
            "acquired read /locks/c3",
            "released read /locks/c3",
        ]
    );
    assert_eq!(on_recipe.kinds(), ["acquired", "released"]);
}

#[test]
fn nothing_is_reported_without_an_observer() {
    // An observer on one recipe of a client sees nothing of another recipe on it, nor of
    // another client's.
    let e = MemoryEnsemble::new();
    let seen = Arc::new(Recorder::default());
    let client: SharedClient = e.connect();
    let _observed = InterProcessMutex::new(client.clone(), "/locks/n")
        .unwrap()
        .with_observer(seen.clone());
    let unobserved = InterProcessMutex::new(client.clone(), "/locks/n").unwrap();
    let other = InterProcessSemaphoreV2::new(e.connect(), "/locks/nsem", 1).unwrap();
    drop(unobserved.lock().unwrap());
    drop(other.acquire().unwrap());
    assert!(client.lock_observer().is_none());
    assert_eq!(seen.events(), Vec::<String>::new());
}

#[test]
fn a_semaphore_reports_its_lease_and_one_queued_for_the_admission_wait() {
    let e = MemoryEnsemble::new();
    let seen = Arc::new(Recorder::default());
    let holder = InterProcessSemaphoreV2::new(e.connect(), "/locks/sem", 1).unwrap();
    let (waiting_client, other): (SharedClient, SharedClient) = (e.connect(), e.connect());
    let waiting = Arc::new(
        InterProcessSemaphoreV2::new(waiting_client.clone(), "/locks/sem", 1)
            .unwrap()
            .with_observer(seen.clone()),
    );
    // A third contender waits for room first, so `waiting` waits for admission behind it.
    let third = Arc::new(InterProcessSemaphoreV2::new(other, "/locks/sem", 1).unwrap());
    let lease = holder.acquire().unwrap();
    let third_thread = {
        let third = third.clone();
        thread::spawn(move || drop(third.acquire().unwrap()))
    };
    eventually("the third contender waits for room", || {
        holder.participant_nodes().unwrap().len() == 2
    });
    let waiter = {
        let waiting = waiting.clone();
        thread::spawn(move || {
            let lease = waiting.acquire().unwrap();
            let node = lease.node_path().to_string();
            drop(lease);
            node
        })
    };
    eventually("the observed contender queued", || {
        seen.kinds() == ["queued"]
    });
    drop(lease);
    third_thread.join().unwrap();
    let lease_node = waiter.join().unwrap();
    let events = seen.events();
    assert_eq!(
        seen.kinds(),
        ["queued", "acquired", "released"],
        "{events:?}"
    );
    // The wait was for admission: `queued` names the admission node, under the semaphore.
    assert!(
        events[0].starts_with("queued lease /locks/sem /locks/sem/locks/"),
        "{events:?}"
    );
    let s = hex(&waiting_client);
    assert_eq!(
        events[1],
        format!("acquired lease /locks/sem {lease_node} {s}")
    );
    assert_eq!(
        events[2],
        format!("released lease /locks/sem {lease_node} {s}")
    );
}

#[test]
fn a_semaphore_mutex_that_times_out_waiting_for_room_reports_queued_then_timed_out() {
    let e = MemoryEnsemble::new();
    let seen = Arc::new(Recorder::default());
    let holder = InterProcessSemaphoreMutex::new(e.connect(), "/locks/sm").unwrap();
    let waiter = InterProcessSemaphoreMutex::new(e.connect(), "/locks/sm")
        .unwrap()
        .with_observer(seen.clone());
    let _guard = holder.lock().unwrap();
    assert!(waiter
        .try_lock_for(Duration::from_millis(30))
        .unwrap()
        .is_none());
    let events = seen.events();
    assert_eq!(seen.kinds(), ["queued", "timed_out"], "{events:?}");
    assert!(events[0].starts_with("queued lease /locks/sm /locks/sm/leases/"));
}

/// On a real server, through our own client's options: the client's observer sees a waiter
/// queue, acquire and release, with the session ids the server gave.
#[test]
fn the_native_client_reports_to_the_observer_of_its_options() {
    use zk_locks::client::native::{NativeClient, NativeOptions};
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let root = zk_locks::testing::harness::unique_root("lock-observer-native");
    let seen = Arc::new(Recorder::default());
    let options = || {
        NativeOptions::new(server.connect_string())
            .session_timeout(Duration::from_secs(10))
            .lock_observer(seen.clone())
    };
    let a: SharedClient = NativeClient::connect_with(options()).unwrap();
    let b: SharedClient = NativeClient::connect_with(options()).unwrap();
    let first = InterProcessMutex::new(a.clone(), &root).unwrap();
    let second = Arc::new(InterProcessMutex::new(b.clone(), &root).unwrap());
    let guard = first.lock().unwrap();
    let held = guard.node_path().unwrap().to_string();
    let waiter = {
        let second = second.clone();
        thread::spawn(move || {
            let guard = second.lock().unwrap();
            let node = guard.node_path().unwrap().to_string();
            drop(guard);
            node
        })
    };
    eventually("the second contender queued", || seen.kinds().len() == 2);
    drop(guard);
    let waited = waiter.join().unwrap();
    let (sa, sb) = (hex(&a), hex(&b));
    assert_eq!(
        seen.events(),
        [
            format!("acquired mutex {root} {held} {sa}"),
            format!("queued mutex {root} {waited} {sb}"),
            format!("released mutex {root} {held} {sa}"),
            format!("acquired mutex {root} {waited} {sb}"),
            format!("released mutex {root} {waited} {sb}"),
        ]
    );
    a.close();
    b.close();
}
