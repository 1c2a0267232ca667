//! Secured locks: digest credentials and `CREATOR_ALL_ACL` shared with Curator.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{eventually, unique_root};
use zk_locks::client::acl::AclProvider;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::locks::{InterProcessLock, InterProcessMutex};
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
    let root = unique_root("interop-secured");
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
