//! Secured locks: digest credentials and `CREATOR_ALL_ACL` shared with Curator, and a Curator
//! peer over TLS.

use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::acl::AclProvider;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::locks::{InterProcessLock, InterProcessMutex};
use zk_locks::testing::harness::{eventually, unique_root};
use zk_locks::{SharedClient, ZkClient, ZkError};

use crate::harness::*;

/// A Rust session with digest credentials and `creator_all` on everything it creates.
fn secured_rust_client(connect: &str, user: Option<(&str, &str)>) -> Arc<NativeClient> {
    let mut options = NativeOptions::new(connect)
        .session_timeout(Duration::from_secs(10))
        .acl_provider(AclProvider::creator_all());
    if let Some((user, password)) = user {
        options = options.digest_auth(user, password);
    }
    NativeClient::connect_with(options).expect("connect")
}

/// Curator 5.4 with the same digest credentials and `CREATOR_ALL_ACL` shares a lock with a
/// Rust process: it creates the directory, the Rust peer queues in it and takes over, and a
/// stranger can neither list the queue nor read Curator's node.
#[test]
fn a_secured_lock_is_shared_with_curator_and_refused_to_strangers() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    // A restricted lock needs a base nobody else may create or delete in (a directory made
    // right under the open root would be refused as unprotected by the Rust peer).
    let base = unique_root("interop-secured");
    secured_rust_client(&connect, Some(("app", "secret")))
        .create(&base, b"", zk_locks::CreateMode::Persistent)
        .unwrap();
    let root = format!("{base}/lock");
    let mut jvm = Jvm::spawn_with_env(
        classes,
        &["hold", &connect, "mutex", &root],
        &[("INTEROP_DIGEST", "app:secret")],
    );
    let curator_node = jvm.expect("HELD ")["HELD ".len()..].to_string();

    let stranger = rust_client(&connect);
    assert_eq!(stranger.get_children(&root, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.get_data(&curator_node, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.delete(&curator_node, None), Err(ZkError::NoAuth));

    let peer: SharedClient = secured_rust_client(&connect, Some(("app", "secret")));
    let waiter = Arc::new(InterProcessMutex::new(peer.clone(), &root).unwrap());
    let waiting = {
        let waiter = waiter.clone();
        std::thread::spawn(move || {
            let got = waiter.acquire_timeout(PATIENCE).unwrap();
            let node = waiter.held_node().map(|n| n.path().to_string());
            if got {
                waiter.release().unwrap();
            }
            node
        })
    };
    eventually(
        PATIENCE,
        "the Rust peer queues in Curator's directory",
        || children(peer.as_ref(), &root).len() == 2,
    );
    jvm.send("RELEASE");
    jvm.expect("RELEASED");
    let rust_node = waiting.join().unwrap().expect("the Rust peer got the lock");
    assert_ne!(rust_node, curator_node);
    jvm.finish();
}

/// A Curator 5.4 process over TLS (ZooKeeper's Netty client socket, the test CA as its PEM
/// trust store) and Rust sessions over TLS contend on one mutex through the server's
/// `secureClientPort`; the merged critical sections never overlap and the lock changes sides.
#[cfg(feature = "tls")]
#[test]
fn a_curator_peer_over_tls_shares_the_mutex_with_rust_tls_clients() {
    let Some(classes) = classes() else {
        return;
    };
    let tls = TlsTarget::shared();
    let records = contend_with(
        &tls.connect,
        classes,
        Recipe::Mutex,
        &tls.env(),
        vec![tls.client(), tls.client()],
    );
    let (peak, switches) = check(records, 1).unwrap();
    assert_eq!(peak, 1);
    assert!(switches > 0, "the lock never changed sides");
    eprintln!("mutex over TLS: holder changed side {switches} times");
}
