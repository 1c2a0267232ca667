//! A long queue on one mutex, many waiters per session (they share the session's reader and
//! event threads): each release notifies exactly one waiter, also when every waiter's watch
//! was restored after its session's link went down (and the holder released meanwhile), and
//! the drain costs no listing or watch beyond one listing per hand-off. On the memory
//! backend (exact, many waiters) and on a real server through a `FaultProxy` (our own client,
//! SetWatches; smaller). Counts only, no timing. (A waiter's wake-up does not wait behind a
//! user's callback that blocks the session's event thread: `tests/blocked_event_thread.rs`.)

use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::client::{Counters, CountingClient};
use zk_locks::session::ConnectionState;
use zk_locks::testing::harness::{eventually, unique_root};
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

/// Bound of every wait on a condition (a loaded machine).
const PATIENCE: Duration = Duration::from_secs(120);

/// `waiters` threads over `clients` (waiter `i` on client `i % clients.len()`), each taking
/// the mutex at `path` once and letting go at once.
fn queue(clients: &[SharedClient], path: &str, waiters: usize) -> Vec<JoinHandle<()>> {
    (0..waiters)
        .map(|i| {
            let m = InterProcessMutex::new(clients[i % clients.len()].clone(), path).unwrap();
            thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    m.acquire().unwrap();
                    m.release().unwrap();
                })
                .unwrap()
        })
        .collect()
}

fn sum(counters: impl Iterator<Item = Counters>) -> Counters {
    counters.fold(Counters::default(), |a, c| Counters {
        create: a.create + c.create,
        delete: a.delete + c.delete,
        exists: a.exists + c.exists,
        get_data: a.get_data + c.get_data,
        get_children: a.get_children + c.get_children,
        set_data: a.set_data + c.set_data,
        multi: a.multi + c.multi,
        watch_events: a.watch_events + c.watch_events,
        round_trips: a.round_trips + c.round_trips,
    })
}

/// What the waiters' clients did during the drain: one notification per release (the
/// holder's and every waiter's but the last one's), no watch set again, at most one listing
/// per hand-off, one delete per waiter.
fn assert_drained_with_one_notification_per_release(during: Counters, waiters: u64) {
    assert_eq!(
        during.watch_events, waiters,
        "one notification per release: {during:?}"
    );
    assert_eq!(during.get_data, 0, "no watch set again: {during:?}");
    assert!(
        during.get_children <= waiters,
        "at most one listing per hand-off: {during:?}"
    );
    assert_eq!(during.delete, waiters, "{during:?}");
    assert_eq!(during.create, 0, "{during:?}");
}

#[test]
fn a_long_queue_drains_with_one_notification_per_release_on_memory() {
    for reconnect in [false, true] {
        let e = MemoryEnsemble::new();
        let holder_client = e.connect();
        let holder = InterProcessMutex::new(holder_client.clone(), "/long").unwrap();
        holder.acquire().unwrap();
        let clients: Vec<_> = (0..4).map(|_| e.connect()).collect();
        for c in &clients {
            c.set_watches_survive_reconnect(true);
        }
        let shared: Vec<SharedClient> = clients.iter().map(|c| c.clone() as SharedClient).collect();
        let waiters = 200;
        let threads = queue(&shared, "/long", waiters);
        eventually(PATIENCE, "every waiter queued and watching", || {
            e.children("/long").unwrap().len() == waiters + 1 && e.watch_count() == waiters
        });
        for c in &clients {
            c.reset_counters();
        }
        if reconnect {
            // Every waiter's link goes down, the holder lets go meanwhile, the links come
            // back: the deletion reaches the one waiter whose restored watch saw it.
            for c in &clients {
                c.suspend();
            }
            holder.release().unwrap();
            for c in &clients {
                c.resume();
            }
        } else {
            holder.release().unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        let during = sum(clients.iter().map(|c| c.counters()));
        assert_drained_with_one_notification_per_release(during, waiters as u64);
        assert_eq!(e.watch_count(), 0, "reconnect: {reconnect}");
    }
}

/// The same on a real server: 60 waiters over 3 sessions of our own client behind a proxy
/// that cuts and refuses every link while the holder (on a direct link) releases; the
/// sessions resume, SetWatches restores each waiter's watch, the server fires the one whose
/// node went, and the queue drains.
#[test]
fn a_long_queue_drains_with_one_notification_per_release_after_restored_watches() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let options = || {
        NativeOptions::new(proxy.connect_string())
            .session_timeout(Duration::from_secs(30))
            .call_timeout(Duration::from_secs(30))
    };
    let holder_client: SharedClient =
        NativeClient::connect(&server.connect_string(), Duration::from_secs(30)).unwrap();
    let path = unique_root("long-queue");
    let holder = InterProcessMutex::new(holder_client.clone(), &path).unwrap();
    holder.acquire().unwrap();
    let natives: Vec<Arc<NativeClient>> = (0..3)
        .map(|_| NativeClient::connect_with(options()).unwrap())
        .collect();
    let clients: Vec<Arc<CountingClient<SharedClient>>> = natives
        .iter()
        .map(|native| Arc::new(CountingClient::new(native.clone() as SharedClient)))
        .collect();
    let shared: Vec<SharedClient> = clients.iter().map(|c| c.clone() as SharedClient).collect();
    let waiters = 60;
    let threads = queue(&shared, &path, waiters);
    eventually(PATIENCE, "every waiter queued and watching", || {
        natives.iter().map(|c| c.watch_count()).sum::<usize>() == waiters
    });
    for c in &clients {
        c.reset_counters();
    }
    proxy.refuse(true);
    proxy.cut();
    for c in &clients {
        wait_for(c.as_ref(), ConnectionState::Suspended);
    }
    holder.release().unwrap();
    proxy.refuse(false);
    for t in threads {
        t.join().unwrap();
    }
    let during = sum(clients.iter().map(|c| c.counters()));
    assert_drained_with_one_notification_per_release(during, waiters as u64);
    for c in &clients {
        c.close();
    }
    holder_client.close();
}

/// Waits until `client`'s session is in `state` (or was since the last look).
fn wait_for(client: &dyn ZkClient, state: ConnectionState) {
    let deadline = Instant::now() + PATIENCE;
    let mut seen = client.session().snapshot();
    while seen.state != state {
        assert!(Instant::now() < deadline, "never {state:?}: {seen:?}");
        seen = client.session().wait_for_change(seen.epoch, Some(deadline));
    }
}
