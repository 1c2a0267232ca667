//! Revocation in both directions (Curator's `__REVOKE__` protocol).

use std::sync::mpsc::{self};

use zk_locks::locks::{InterProcessLock, InterProcessMutex, Revoker};
use zk_locks::testing::harness::unique_root;
use zk_locks::{SharedClient, ZkClient};

use crate::harness::*;

#[test]
fn rust_revokes_a_curator_holder() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let root = unique_root("interop-revoke-curator");
    let jvm = Jvm::spawn(classes, &["hold", &connect, "revocable", &root]);
    let curator_node = jvm.expect("HELD ")["HELD ".len()..].to_string();
    let client: SharedClient = rust_client(&connect);
    let mutex = InterProcessMutex::new(client.clone(), &root).unwrap();
    assert_eq!(
        mutex.participant_nodes().unwrap(),
        vec![curator_node.clone()]
    );
    // A revocable Curator node starts empty, so that only `__REVOKE__` means revoke.
    assert!(client.get_data(&curator_node, None).unwrap().0.is_empty());
    Revoker::attempt_revoke(&client, &curator_node).unwrap();
    jvm.expect("REVOKED");
    assert!(mutex.acquire_timeout(PATIENCE).unwrap());
    mutex.release().unwrap();
    jvm.finish();
}

#[test]
fn curator_revokes_a_rust_holder() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let root = unique_root("interop-revoke-rust");
    let client: SharedClient = rust_client(&connect);
    let mutex = InterProcessMutex::new(client.clone(), &root).unwrap();
    let (revoked_tx, revoked) = mpsc::channel();
    let revoked_tx = parking_lot::Mutex::new(revoked_tx);
    mutex.make_revocable(move || {
        let _ = revoked_tx.lock().send(());
    });
    let guard = mutex.lock().unwrap();
    let node = guard.node_path().unwrap().to_string();
    let jvm = Jvm::spawn(classes, &["revoke", &connect, &node]);
    jvm.expect("OK");
    revoked
        .recv_timeout(PATIENCE)
        .expect("Curator's revocation reached the Rust holder");
    drop(guard);
    assert!(children(client.as_ref(), &root).is_empty());
    jvm.finish();
}
