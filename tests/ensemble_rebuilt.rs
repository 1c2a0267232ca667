//! A whole ensemble replaced by a fresh one (restored from nothing: its zxids are behind
//! everything the clients saw) behind the same addresses. Every server refuses a
//! ConnectRequest carrying a last zxid ahead of its own, so a client that kept the old
//! session's zxid for its next session would be refused for ever; Curator gets a new session
//! at once (a new handle starts from zxid 0). Both real backends must hold a mutex and a
//! 1-lease semaphore again within a minute of the new ensemble answering.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use zk_locks::locks::InterProcessSemaphoreMutex;
use zk_locks::testing::harness::ClientKind;
use zk_locks::testing::{require_server, FaultProxy, TestingCluster};
use zk_locks::{CreateMode, InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

const SESSION: Duration = Duration::from_secs(4);
/// Writes on the old ensemble, so the zxid the clients saw is ahead of a fresh ensemble's.
const WRITES: usize = 150;

fn addr(cluster: &TestingCluster, i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], cluster.port(i)))
}

/// Tries `recipe` until it is held once (each try bounded), or the deadline passes; `Err`
/// tells the last failure.
fn held_by(recipe: &dyn Fn() -> zk_locks::Result<bool>, deadline: Instant) -> Result<(), String> {
    let mut last = String::from("no attempt");
    while Instant::now() < deadline {
        match recipe() {
            Ok(true) => return Ok(()),
            Ok(false) => last = "not granted in time".into(),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

#[test]
fn both_backends_take_locks_again_after_the_ensemble_is_rebuilt() {
    if !require_server() {
        return;
    }
    let old = TestingCluster::start(3).unwrap();
    let proxies: Vec<FaultProxy> = (0..3)
        .map(|i| FaultProxy::start(addr(&old, i)).unwrap())
        .collect();
    let hosts = proxies
        .iter()
        .map(FaultProxy::connect_string)
        .collect::<Vec<_>>()
        .join(",");
    let clients: Vec<(ClientKind, SharedClient)> = [ClientKind::Native, ClientKind::Crate]
        .into_iter()
        .map(|kind| (kind, kind.connect(&hosts, SESSION).unwrap()))
        .collect();
    let root = &format!("/rebuilt-{}", uuid::Uuid::new_v4());
    let writer = &clients[0].1;
    writer.create(root, b"", CreateMode::Persistent).unwrap();
    for i in 0..WRITES {
        writer.set_data(root, &i.to_be_bytes(), None).unwrap();
    }
    for (kind, client) in &clients {
        // Every client's last zxid seen is now past the writes.
        assert!(client.exists(root).unwrap().is_some(), "{kind:?}");
        let mutex = InterProcessMutex::new(client.clone(), &format!("{root}/mutex")).unwrap();
        drop(mutex.lock().unwrap());
    }

    // The whole ensemble goes; a fresh one (nothing of the old data, zxids from the start)
    // takes its addresses.
    drop(old);
    let fresh = TestingCluster::start(3).unwrap();
    for (i, proxy) in proxies.iter().enumerate() {
        proxy.set_target(addr(&fresh, i));
        proxy.cut();
    }
    // Each backend, each recipe on its own thread, all against the same deadline.
    let deadline = Instant::now() + Duration::from_secs(60);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let mut tries = Vec::new();
        for (kind, client) in &clients {
            for recipe in ["mutex", "semaphore"] {
                tries.push(scope.spawn(move || {
                    let path = format!("{root}/{recipe}");
                    let held = if recipe == "mutex" {
                        let mutex = InterProcessMutex::new(client.clone(), &path).unwrap();
                        held_by(
                            &|| Ok(mutex.try_lock_for(Duration::from_secs(5))?.is_some()),
                            deadline,
                        )
                    } else {
                        let semaphore =
                            InterProcessSemaphoreMutex::new(client.clone(), &path).unwrap();
                        held_by(
                            &|| Ok(semaphore.try_lock_for(Duration::from_secs(5))?.is_some()),
                            deadline,
                        )
                    };
                    held.err().map(|e| {
                        format!(
                            "{kind:?} {recipe}: not held within a minute ({e}); session {:?}",
                            client.session().snapshot()
                        )
                    })
                }));
            }
        }
        tries
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
    for (_, client) in &clients {
        client.close();
    }
}
