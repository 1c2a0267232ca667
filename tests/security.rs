//! Locks nobody else can steal: digest credentials and the client's ACL provider, on every
//! backend — the in-memory ensemble (its ACL model), and a real ZooKeeper 3.8 through our own
//! client and through the `zookeeper`-crate backend. One body per case, run as
//! `memory::case`, `native::case` and `crate_backend::case`.
//!
//! A `creator_all` lock refuses a stranger every way in (delete, overwrite, read, list, queue
//! ahead) while a peer with the same credentials shares it; a reconnect re-authenticates; a
//! wrong password, a scheme the server refuses and an ACL that would lock ourselves out are
//! typed errors that leave nothing behind.
//!
//! No sleeps as synchronisation: sessions are awaited with `Session::wait_for_change`.

use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::acl::{perms, Acl, AclProvider};
use zk_locks::client::memory::{MemoryClient, MemoryEnsemble, MemoryOptions};
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::client::zookeeper::{ZkOptions, ZookeeperClient};
use zk_locks::locks::{InterProcessReadWriteLock, InterProcessSemaphoreV2};
use zk_locks::session::ConnectionState;
use zk_locks::testing::harness::reach_state;
use zk_locks::testing::{FaultProxy, TestingServer};
use zk_locks::{Error, InterProcessLock, InterProcessMutex, SharedClient, ZkError};

const SESSION: Duration = Duration::from_secs(2);

/// Where a case runs: clients with or without credentials and with an ACL provider, and a
/// connection blip for one of them.
trait Secured {
    /// A client with `user`'s digest credentials (none when `None`) and this ACL provider.
    fn client(&self, user: Option<(&str, &str)>, acl: AclProvider) -> SharedClient;
    /// As [`Secured::client`], with a function that breaks its connection once (the session
    /// survives).
    fn client_with_blip(
        &self,
        user: Option<(&str, &str)>,
        acl: AclProvider,
    ) -> (SharedClient, Box<dyn Fn()>);
    /// Connecting with credentials of `scheme`: the client, or the error's text.
    fn connect_with_auth(&self, scheme: &str, credentials: &[u8]) -> Result<SharedClient, String>;
}

/// Each case on every backend; the real-server ones skip (or fail under
/// `ZK_LOCKS_REQUIRE_SERVER=1`) without a server.
macro_rules! secured_suite {
    ([$($case:ident),* $(,)?]) => {
        mod memory {
            $(
                #[test]
                fn $case() {
                    super::$case(&super::Memory(zk_locks::client::memory::MemoryEnsemble::new()));
                }
            )*
        }
        mod native {
            $(
                #[test]
                fn $case() {
                    if let Some(server) = zk_locks::testing::shared_server() {
                        super::$case(&super::Real { server, native: true });
                    }
                }
            )*
        }
        mod crate_backend {
            $(
                #[test]
                fn $case() {
                    if let Some(server) = zk_locks::testing::shared_server() {
                        super::$case(&super::Real { server, native: false });
                    }
                }
            )*
        }
    };
}

struct Memory(MemoryEnsemble);

impl Secured for Memory {
    fn client(&self, user: Option<(&str, &str)>, acl: AclProvider) -> SharedClient {
        self.client_with_blip(user, acl).0
    }

    fn client_with_blip(
        &self,
        user: Option<(&str, &str)>,
        acl: AclProvider,
    ) -> (SharedClient, Box<dyn Fn()>) {
        let mut options = MemoryOptions::new().acl_provider(acl);
        if let Some((user, password)) = user {
            options = options.digest_auth(user, password);
        }
        let client: Arc<MemoryClient> = self.0.connect_with(options).expect("connect");
        let blipped = client.clone();
        let blip = Box::new(move || {
            blipped.suspend();
            blipped.resume();
        });
        (client, blip)
    }

    fn connect_with_auth(&self, scheme: &str, credentials: &[u8]) -> Result<SharedClient, String> {
        match self
            .0
            .connect_with(MemoryOptions::new().auth(scheme, credentials))
        {
            Ok(client) => Ok(client),
            Err(e) => Err(format!("{e:?}")),
        }
    }
}

struct Real {
    server: &'static TestingServer,
    native: bool,
}

impl Real {
    fn connect(
        &self,
        connect_string: String,
        auth: Vec<(String, Vec<u8>)>,
        acl: AclProvider,
    ) -> Result<SharedClient, Error> {
        if self.native {
            let mut options = NativeOptions::new(connect_string)
                .session_timeout(SESSION)
                .acl_provider(acl);
            for (scheme, credentials) in &auth {
                options = options.auth(scheme, credentials);
            }
            NativeClient::connect_with(options).map(|c| c as SharedClient)
        } else {
            let mut options = ZkOptions::new(connect_string)
                .session_timeout(SESSION)
                .acl_provider(acl);
            for (scheme, credentials) in &auth {
                options = options.auth(scheme, credentials);
            }
            ZookeeperClient::connect_with(options).map(|c| c as SharedClient)
        }
    }
}

fn digest(user: Option<(&str, &str)>) -> Vec<(String, Vec<u8>)> {
    user.map(|(u, p)| ("digest".to_string(), format!("{u}:{p}").into_bytes()))
        .into_iter()
        .collect()
}

impl Secured for Real {
    fn client(&self, user: Option<(&str, &str)>, acl: AclProvider) -> SharedClient {
        self.connect(self.server.connect_string(), digest(user), acl)
            .expect("connect")
    }

    /// Through a proxy of its own, which lives as long as the blip function.
    fn client_with_blip(
        &self,
        user: Option<(&str, &str)>,
        acl: AclProvider,
    ) -> (SharedClient, Box<dyn Fn()>) {
        let proxy = FaultProxy::start(self.server.addr()).expect("proxy");
        let client = self
            .connect(proxy.connect_string(), digest(user), acl)
            .expect("connect");
        (client, Box::new(move || proxy.cut()))
    }

    fn connect_with_auth(&self, scheme: &str, credentials: &[u8]) -> Result<SharedClient, String> {
        self.connect(
            self.server.connect_string(),
            vec![(scheme.to_string(), credentials.to_vec())],
            AclProvider::open(),
        )
        .map_err(|e| e.to_string())
    }
}

fn unique(prefix: &str) -> String {
    format!("/{prefix}-{}", uuid::Uuid::new_v4())
}

/// A fresh persistent node made by `owner`, so with `owner`'s ACL: the protected base a
/// restricted lock needs (a lock directory made as a container right under the root, whose
/// ACL lets anyone create, would be refused as unprotected).
fn protected_base(owner: &SharedClient, prefix: &str) -> String {
    let top = unique(prefix);
    owner
        .create(&top, b"", zk_locks::CreateMode::Persistent)
        .expect("a protected base");
    top
}

fn mutex(client: &SharedClient, path: &str) -> InterProcessMutex {
    InterProcessMutex::new(client.clone(), path).unwrap()
}

secured_suite!([
    a_creator_all_lock_refuses_a_stranger_and_is_shared_with_the_same_identity,
    read_only_for_world_lets_strangers_look_but_not_queue_or_steal,
    a_reconnect_re_authenticates_so_the_holder_can_still_release,
    an_acl_that_would_lock_ourselves_out_is_refused_before_anything_is_created,
    a_scheme_the_server_refuses_is_a_terminal_auth_failure,
    a_digest_acl_naming_our_credentials_lets_us_in_and_another_is_refused_before_sending,
    acl_checks_come_in_the_servers_order,
    a_restricted_lock_in_an_existing_open_directory_is_refused_naming_its_acl,
    a_restricted_lock_under_an_open_parent_is_refused,
]);

fn a_creator_all_lock_refuses_a_stranger_and_is_shared_with_the_same_identity(b: &dyn Secured) {
    let owner = b.client(Some(("app", "secret")), AclProvider::creator_all());
    let dir = format!("{}/lock", protected_base(&owner, "secure"));
    let held = mutex(&owner, &dir);
    held.acquire().unwrap();
    let node = held.held_node().unwrap().path().to_string();

    // Every client-level way in is refused, on the node and on its directory.
    let stranger = b.client(None, AclProvider::open());
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
    let wrong = b.client(Some(("app", "guessed-pw")), AclProvider::creator_all());
    let err = mutex(&wrong, &dir).acquire_timeout(SESSION).unwrap_err();
    assert!(matches!(err, Error::NotAuthorized { .. }), "{err}");
    assert!(!err.to_string().contains("guessed-pw"), "{err}");

    // Nothing was left behind: the owner's node is the only one in the queue.
    assert_eq!(
        owner.get_children(&dir, None).unwrap(),
        vec![node.rsplit('/').next().unwrap().to_string()]
    );

    // A peer with the same credentials lists the queue and waits its turn.
    let peer = b.client(Some(("app", "secret")), AclProvider::creator_all());
    let waiting = mutex(&peer, &dir);
    assert!(!waiting.acquire_timeout(Duration::from_millis(300)).unwrap());
    held.release().unwrap();
    assert!(waiting.acquire_timeout(SESSION * 5).unwrap());
    waiting.release().unwrap();
}

fn read_only_for_world_lets_strangers_look_but_not_queue_or_steal(b: &dyn Secured) {
    let owner = b.client(Some(("app", "secret")), AclProvider::read_only_for_world());
    let dir = format!("{}/lock", protected_base(&owner, "readable"));
    let held = mutex(&owner, &dir);
    held.acquire().unwrap();
    let node = held.held_node().unwrap().path().to_string();
    let stranger = b.client(None, AclProvider::open());
    assert_eq!(stranger.get_children(&dir, None).unwrap().len(), 1);
    assert!(stranger.get_data(&node, None).is_ok());
    assert_eq!(stranger.delete(&node, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.set_data(&node, b"x", None), Err(ZkError::NoAuth));
    let err = mutex(&stranger, &dir).acquire_timeout(SESSION).unwrap_err();
    assert!(matches!(err, Error::NotAuthorized { .. }), "{err}");
    held.release().unwrap();
}

fn a_reconnect_re_authenticates_so_the_holder_can_still_release(b: &dyn Secured) {
    let (owner, blip) = b.client_with_blip(Some(("app", "secret")), AclProvider::creator_all());
    let dir = format!("{}/lock", protected_base(&owner, "reauth"));
    let held = mutex(&owner, &dir);
    held.acquire().unwrap();
    let node = held.held_node().unwrap().path().to_string();
    blip();
    reach_state(owner.as_ref(), ConnectionState::Reconnected, SESSION * 3);
    held.release().unwrap();
    let observer = b.client(Some(("app", "secret")), AclProvider::open());
    assert_eq!(observer.exists(&node), Ok(None));
}

fn an_acl_that_would_lock_ourselves_out_is_refused_before_anything_is_created(b: &dyn Secured) {
    let observer = b.client(None, AclProvider::open());
    // Read-only for everybody, ourselves included.
    let top = unique("lockout");
    let read_only = b.client(
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
    let anonymous = b.client(None, AclProvider::creator_all());
    let err = mutex(&anonymous, &format!("{top}/lock"))
        .acquire_timeout(SESSION)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidAcl { .. }), "{err}");
    assert_eq!(observer.exists(&top), Ok(None));
}

fn a_scheme_the_server_refuses_is_a_terminal_auth_failure(b: &dyn Secured) {
    let Err(err) = b.connect_with_auth("no-such-scheme", b"x") else {
        panic!("a scheme the server refuses was accepted");
    };
    assert!(err.to_lowercase().contains("auth"), "{err}");
}

fn a_digest_acl_naming_our_credentials_lets_us_in_and_another_is_refused_before_sending(
    b: &dyn Secured,
) {
    let observer = b.client(None, AclProvider::open());
    // Our own digest id, computed on the client: the server agrees that it is us.
    let ours = b.client(
        Some(("app", "secret")),
        AclProvider::per_path(|_| vec![Acl::digest(perms::ALL, "app", "secret")]),
    );
    let top = protected_base(&ours, "digest-acl");
    let lock = mutex(&ours, &format!("{top}/lock"));
    lock.acquire().unwrap();
    let node = lock.held_node().unwrap().path().to_string();
    assert_eq!(observer.get_data(&node, None), Err(ZkError::NoAuth));
    let impostor = b.client(Some(("app", "not-our-password")), AclProvider::open());
    assert_eq!(impostor.get_data(&node, None), Err(ZkError::NoAuth));
    let peer = b.client(Some(("app", "secret")), AclProvider::open());
    assert!(peer.get_data(&node, None).is_ok());
    lock.release().unwrap();

    // The same user with another password is another identity: refused, nothing created.
    let top = unique("digest-acl");
    let other = b.client(
        Some(("app", "secret")),
        AclProvider::per_path(|_| vec![Acl::digest(perms::ALL, "app", "not-our-password")]),
    );
    let err = mutex(&other, &format!("{top}/lock"))
        .acquire_timeout(SESSION)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidAcl { .. }), "{err}");
    assert_eq!(observer.exists(&top), Ok(None));
}

/// Which error wins when a request is both unauthorized and wrong otherwise, as ZooKeeper 3.8
/// checks (the memory model must agree with the real server): a delete or create is checked
/// against the parent's ACL before the node's existence, reads and writes find the node first,
/// and `exists` is not checked at all.
fn acl_checks_come_in_the_servers_order(b: &dyn Secured) {
    let dir = unique("acl-order");
    let owner = b.client(Some(("app", "secret")), AclProvider::creator_all());
    owner
        .create(&dir, b"", zk_locks::CreateMode::Persistent)
        .unwrap();
    let node = format!("{dir}/n");
    owner
        .create(&node, b"", zk_locks::CreateMode::Persistent)
        .unwrap();
    let stranger = b.client(None, AclProvider::open());
    let missing = format!("{dir}/missing");
    let persistent = zk_locks::CreateMode::Persistent;
    assert_eq!(stranger.delete(&missing, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.delete(&node, Some(99)), Err(ZkError::NoAuth));
    assert_eq!(
        stranger.create(&node, b"", persistent),
        Err(ZkError::NoAuth)
    );
    assert_eq!(
        stranger.create(&format!("{missing}/child"), b"", persistent),
        Err(ZkError::NoNode)
    );
    assert_eq!(stranger.get_data(&missing, None), Err(ZkError::NoNode));
    assert_eq!(stranger.get_children(&missing, None), Err(ZkError::NoNode));
    assert_eq!(stranger.set_data(&missing, b"", None), Err(ZkError::NoNode));
    assert_eq!(
        stranger.set_data(&node, b"", Some(99)),
        Err(ZkError::NoAuth)
    );
    assert!(stranger.exists(&node).unwrap().is_some());
    owner.delete(&node, None).unwrap();
    owner.delete(&dir, None).unwrap();
}

/// Issue 25 item 6: a lock directory left with the open ACL (an earlier open-ACL run, a
/// Curator peer without an ACL provider). `creator_all` protects the nodes the client creates,
/// but ZooKeeper checks a delete against the directory's ACL: anyone could delete the holder's
/// node. Every recipe refuses to lock there, with a typed error naming the directory and its
/// ACL, and creates nothing; a provider that accepts unprotected directories locks there.
fn a_restricted_lock_in_an_existing_open_directory_is_refused_naming_its_acl(b: &dyn Secured) {
    let stranger = b.client(None, AclProvider::open());
    let top = unique("left-open");
    let dir = format!("{top}/lock");
    for path in [&top, &dir] {
        stranger
            .create(path, b"", zk_locks::CreateMode::Persistent)
            .unwrap();
    }
    let owner = b.client(Some(("app", "secret")), AclProvider::creator_all());
    let err = mutex(&owner, &dir)
        .acquire_timeout(SESSION)
        .expect_err("a creator_all lock acquired in a directory anyone may delete in");
    match &err {
        Error::UnprotectedLock { lock, path, acl } => {
            assert_eq!((lock, path), (&dir, &dir), "{err}");
            assert_eq!(acl, "world:anyone:cdrwa", "{err}");
        }
        other => panic!("not UnprotectedLock: {other}"),
    }
    assert!(err.to_string().contains(&dir), "{err}");
    assert!(err.to_string().contains("world:anyone:cdrwa"), "{err}");
    assert!(stranger.get_children(&dir, None).unwrap().is_empty());
    // The check lives where every recipe creates its node.
    let rw = InterProcessReadWriteLock::new(owner.clone(), &dir).unwrap();
    let err = rw.write_lock().acquire_timeout(SESSION).unwrap_err();
    assert!(matches!(err, Error::UnprotectedLock { .. }), "{err}");
    let semaphore = InterProcessSemaphoreV2::new(owner.clone(), &dir, 2).unwrap();
    let err = semaphore.acquire_timeout(SESSION).unwrap_err();
    assert!(matches!(err, Error::UnprotectedLock { .. }), "{err}");
    assert!(stranger.get_children(&dir, None).unwrap().is_empty());

    // Accepted on purpose: the lock is taken, and the stranger can indeed break it.
    let accepting = b.client(
        Some(("app", "secret")),
        AclProvider::creator_all().accept_unprotected_directories(),
    );
    let held = mutex(&accepting, &dir);
    assert!(held.acquire_timeout(SESSION).unwrap());
    let node = held.held_node().unwrap().path().to_string();
    assert_eq!(stranger.delete(&node, None), Ok(()));
}

/// The directory is missing (or ours) but its parent lets anyone create and delete: anyone
/// could create the directory first with the open ACL, or delete ours once empty and make it
/// again open. Refused, naming the parent.
fn a_restricted_lock_under_an_open_parent_is_refused(b: &dyn Secured) {
    let stranger = b.client(None, AclProvider::open());
    let top = unique("open-parent");
    stranger
        .create(&top, b"", zk_locks::CreateMode::Persistent)
        .unwrap();
    let owner = b.client(Some(("app", "secret")), AclProvider::creator_all());
    let ours = format!("{top}/ours");
    owner
        .create(&ours, b"", zk_locks::CreateMode::Persistent)
        .unwrap();
    for dir in [format!("{top}/missing"), ours] {
        let err = mutex(&owner, &dir).acquire_timeout(SESSION).unwrap_err();
        match &err {
            Error::UnprotectedLock { path, .. } => assert_eq!(path, &top, "{err}"),
            other => panic!("not UnprotectedLock for {dir}: {other}"),
        }
    }
    assert_eq!(stranger.get_children(&top, None).unwrap(), vec!["ours"]);
}

/// The directory's ACL is read once per lock object, not per acquisition (a read counts as an
/// `exists` on the memory backend).
#[test]
fn the_directory_check_is_made_once_per_lock_object() {
    let e = MemoryEnsemble::new();
    let owner: Arc<MemoryClient> = e
        .connect_with(
            MemoryOptions::new()
                .digest_auth("app", "secret")
                .acl_provider(AclProvider::creator_all()),
        )
        .unwrap();
    let shared: SharedClient = owner.clone();
    let lock = mutex(
        &shared,
        &format!("{}/lock", protected_base(&shared, "once")),
    );
    let reads = || owner.counters().exists;
    let before = reads();
    lock.acquire().unwrap();
    lock.release().unwrap();
    let first = reads() - before;
    assert!(first >= 2, "the directory and its parent read: {first}");
    for _ in 0..3 {
        lock.acquire().unwrap();
        lock.release().unwrap();
    }
    assert_eq!(reads() - before, first, "read again on a later acquisition");
}
