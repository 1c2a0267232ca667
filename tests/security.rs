//! Locks nobody else can steal, on a real ZooKeeper 3.8: digest credentials and the client's
//! ACL provider (`NativeOptions::acl_provider`).
//!
//! A `creator_all` lock refuses a stranger every way in (delete, overwrite, read, list, queue
//! ahead) while a peer with the same credentials shares it; a reconnect re-authenticates; a
//! wrong password, a scheme the server refuses and an ACL that would lock ourselves out are
//! typed errors that leave nothing behind.
//!
//! No sleeps as synchronisation: sessions are awaited with `Session::wait_for_change`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::acl::{perms, Acl, AclProvider};
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::session::ConnectionState;
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{Error, InterProcessLock, InterProcessMutex, SharedClient, ZkClient, ZkError};

const SESSION: Duration = Duration::from_secs(2);

fn client(connect_string: &str, user: Option<(&str, &str)>, acl: AclProvider) -> Arc<NativeClient> {
    let mut options = NativeOptions::new(connect_string)
        .session_timeout(SESSION)
        .acl_provider(acl);
    if let Some((user, password)) = user {
        options = options.digest_auth(user, password);
    }
    NativeClient::connect_with(options).expect("connect")
}

fn unique(prefix: &str) -> String {
    format!("/{prefix}-{}", uuid::Uuid::new_v4())
}

fn mutex(client: &Arc<NativeClient>, path: &str) -> InterProcessMutex {
    let shared: SharedClient = client.clone();
    InterProcessMutex::new(shared, path).unwrap()
}

fn reach(client: &NativeClient, state: ConnectionState, within: Duration) {
    let deadline = Instant::now() + within;
    let mut snapshot = client.session().snapshot();
    while snapshot.state != state && Instant::now() < deadline {
        snapshot = client
            .session()
            .wait_for_change(snapshot.epoch, Some(deadline));
    }
    assert_eq!(snapshot.state, state);
}

#[test]
fn a_creator_all_lock_refuses_a_stranger_and_is_shared_with_the_same_identity() {
    let Some(server) = shared_server() else {
        return;
    };
    let dir = format!("{}/lock", unique("secure"));
    let owner = client(
        &server.connect_string(),
        Some(("app", "secret")),
        AclProvider::creator_all(),
    );
    let held = mutex(&owner, &dir);
    held.acquire().unwrap();
    let node = held.held_node().unwrap().path().to_string();

    // Every client-level way in is refused, on the node and on its directory.
    let stranger = client(&server.connect_string(), None, AclProvider::open());
    assert_eq!(stranger.delete(&node, None), Err(ZkError::NoAuth));
    assert_eq!(
        stranger.set_data(&node, b"mine", None),
        Err(ZkError::NoAuth)
    );
    assert_eq!(stranger.get_data(&node, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.get_children(&dir, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.delete(&dir, None), Err(ZkError::NoAuth));
    // Its own mutex cannot queue (ahead or behind): a typed error naming the likely cause.
    let err = mutex(&stranger, &dir).acquire_timeout(SESSION).unwrap_err();
    assert!(matches!(err, Error::NotAuthorized { .. }), "{err}");
    assert_eq!(err.zk_code(), Some(ZkError::NoAuth));
    assert!(err.to_string().contains("wrong password"), "{err}");

    // A wrong password is the same identity to nobody: refused, and the message never shows it.
    let wrong = client(
        &server.connect_string(),
        Some(("app", "guessed-pw")),
        AclProvider::creator_all(),
    );
    let err = mutex(&wrong, &dir).acquire_timeout(SESSION).unwrap_err();
    assert!(matches!(err, Error::NotAuthorized { .. }), "{err}");
    assert!(!err.to_string().contains("guessed-pw"), "{err}");

    // Nothing was left behind: the owner's node is the only one in the queue.
    assert_eq!(
        owner.get_children(&dir, None).unwrap(),
        vec![node.rsplit('/').next().unwrap().to_string()]
    );

    // A peer with the same credentials lists the queue and waits its turn.
    let peer = client(
        &server.connect_string(),
        Some(("app", "secret")),
        AclProvider::creator_all(),
    );
    let waiting = mutex(&peer, &dir);
    assert!(!waiting.acquire_timeout(Duration::from_millis(300)).unwrap());
    held.release().unwrap();
    assert!(waiting.acquire_timeout(SESSION * 5).unwrap());
    waiting.release().unwrap();
}

#[test]
fn read_only_for_world_lets_strangers_look_but_not_queue_or_steal() {
    let Some(server) = shared_server() else {
        return;
    };
    let dir = format!("{}/lock", unique("readable"));
    let owner = client(
        &server.connect_string(),
        Some(("app", "secret")),
        AclProvider::read_only_for_world(),
    );
    let held = mutex(&owner, &dir);
    held.acquire().unwrap();
    let node = held.held_node().unwrap().path().to_string();
    let stranger = client(&server.connect_string(), None, AclProvider::open());
    assert_eq!(stranger.get_children(&dir, None).unwrap().len(), 1);
    assert!(stranger.get_data(&node, None).is_ok());
    assert_eq!(stranger.delete(&node, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.set_data(&node, b"x", None), Err(ZkError::NoAuth));
    let err = mutex(&stranger, &dir).acquire_timeout(SESSION).unwrap_err();
    assert!(matches!(err, Error::NotAuthorized { .. }), "{err}");
    held.release().unwrap();
}

#[test]
fn a_reconnect_re_authenticates_so_the_holder_can_still_release() {
    let Some(server) = shared_server() else {
        return;
    };
    let dir = format!("{}/lock", unique("reauth"));
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let owner = client(
        &proxy.connect_string(),
        Some(("app", "secret")),
        AclProvider::creator_all(),
    );
    let held = mutex(&owner, &dir);
    held.acquire().unwrap();
    let node = held.held_node().unwrap().path().to_string();
    proxy.cut();
    reach(&owner, ConnectionState::Reconnected, SESSION * 2);
    held.release().unwrap();
    let observer = client(
        &server.connect_string(),
        Some(("app", "secret")),
        AclProvider::open(),
    );
    assert_eq!(observer.exists(&node), Ok(None));
}

#[test]
fn an_acl_that_would_lock_ourselves_out_is_refused_before_anything_is_created() {
    let Some(server) = shared_server() else {
        return;
    };
    let observer = client(&server.connect_string(), None, AclProvider::open());
    // Read-only for everybody, ourselves included.
    let top = unique("lockout");
    let read_only = client(
        &server.connect_string(),
        Some(("app", "secret")),
        AclProvider::per_path(|_| vec![Acl::world(perms::READ)]),
    );
    let err = mutex(&read_only, &format!("{top}/lock"))
        .acquire_timeout(SESSION)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidAcl { .. }), "{err}");
    assert_eq!(observer.exists(&top), Ok(None));

    // `creator_all` without credentials: the server would refuse the `auth` scheme.
    let top = unique("lockout");
    let anonymous = client(&server.connect_string(), None, AclProvider::creator_all());
    let err = mutex(&anonymous, &format!("{top}/lock"))
        .acquire_timeout(SESSION)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidAcl { .. }), "{err}");
    assert_eq!(observer.exists(&top), Ok(None));
}

#[test]
fn a_scheme_the_server_refuses_is_a_terminal_auth_failure() {
    let Some(server) = shared_server() else {
        return;
    };
    let options = NativeOptions::new(server.connect_string())
        .session_timeout(SESSION)
        .auth("no-such-scheme", b"x");
    let err = NativeClient::connect_with(options).unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("authentication failed")),
        "{err}"
    );
}

#[test]
fn a_digest_acl_naming_our_credentials_lets_us_in_and_another_is_refused_before_sending() {
    let Some(server) = shared_server() else {
        return;
    };
    let observer = client(&server.connect_string(), None, AclProvider::open());
    // Our own digest id, computed on the client: the server agrees that it is us.
    let top = unique("digest-acl");
    let ours = client(
        &server.connect_string(),
        Some(("app", "secret")),
        AclProvider::per_path(|_| vec![Acl::digest(perms::ALL, "app", "secret")]),
    );
    let lock = mutex(&ours, &format!("{top}/lock"));
    lock.acquire().unwrap();
    let node = lock.held_node().unwrap().path().to_string();
    assert_eq!(observer.get_data(&node, None), Err(ZkError::NoAuth));
    let impostor = client(
        &server.connect_string(),
        Some(("app", "not-our-password")),
        AclProvider::open(),
    );
    assert_eq!(impostor.get_data(&node, None), Err(ZkError::NoAuth));
    let peer = client(
        &server.connect_string(),
        Some(("app", "secret")),
        AclProvider::open(),
    );
    assert!(peer.get_data(&node, None).is_ok());
    lock.release().unwrap();

    // The same user with another password is another identity: refused, nothing created.
    let top = unique("digest-acl");
    let other = client(
        &server.connect_string(),
        Some(("app", "secret")),
        AclProvider::per_path(|_| vec![Acl::digest(perms::ALL, "app", "not-our-password")]),
    );
    let err = mutex(&other, &format!("{top}/lock"))
        .acquire_timeout(SESSION)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidAcl { .. }), "{err}");
    assert_eq!(observer.exists(&top), Ok(None));
}
