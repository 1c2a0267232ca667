//! The `zookeeper` crate backend on a real ZooKeeper 3.8: session states under faults
//! (FaultProxy), server restarts, a cluster leader kill, deadlines, watchers, chroot.
//!
//! No sleeps as synchronisation: tests wait on `Session::wait_for_change` or channels, always
//! with a deadline.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::zookeeper::{ZkOptions, ZookeeperClient};
use zk_locks::session::{ConnectionState, SessionSnapshot};
use zk_locks::testing::{shared_server, FaultProxy, TestingCluster, TestingServer};
use zk_locks::{CreateMode, Error, ZkClient, ZkError};

const SESSION: Duration = Duration::from_secs(2);

fn connect(connect_string: &str) -> Arc<ZookeeperClient> {
    // A generous connect timeout: a freshly started server on a loaded machine can take
    // longer than one session timeout to create its first session.
    let options = ZkOptions::new(connect_string)
        .session_timeout(SESSION)
        .connect_timeout(SESSION * 5);
    ZookeeperClient::connect_with(options).expect("connect")
}

fn unique(prefix: &str) -> String {
    format!("/{prefix}-{}", uuid::Uuid::new_v4())
}

/// Waits until the session reaches `state` (or the deadline passes); returns every snapshot
/// seen on the way, the last one being the final state.
fn wait_for_state(
    client: &ZookeeperClient,
    state: ConnectionState,
    within: Duration,
) -> Vec<SessionSnapshot> {
    let deadline = Instant::now() + within;
    let mut seen = vec![client.session().snapshot()];
    while seen.last().unwrap().state != state && Instant::now() < deadline {
        let epoch = seen.last().unwrap().epoch;
        let next = client.session().wait_for_change(epoch, Some(deadline));
        if next.epoch != epoch {
            seen.push(next);
        }
    }
    seen
}

/// Like [`wait_for_state`], and asserts that `state` was reached; returns the snapshots seen and
/// the last one.
fn reach(
    client: &ZookeeperClient,
    state: ConnectionState,
    within: Duration,
) -> (Vec<SessionSnapshot>, SessionSnapshot) {
    let seen = wait_for_state(client, state, within);
    let last = *seen.last().unwrap();
    assert_eq!(last.state, state, "{:?}", states(&seen));
    (seen, last)
}

fn states(seen: &[SessionSnapshot]) -> Vec<ConnectionState> {
    seen.iter().map(|s| s.state).collect()
}

/// Waits until a call succeeds (the client may be reconnecting), with a deadline.
fn until_ok<T>(within: Duration, mut f: impl FnMut() -> Result<T, ZkError>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if e.is_retryable() || e == ZkError::SessionExpired => {
                assert!(Instant::now() < deadline, "still failing: {e}");
                // Retry pacing for a client that is reconnecting on its own; not synchronisation.
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("call failed: {e}"),
        }
    }
}

#[test]
fn basic_operations_and_ephemeral_owner() {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(&server.connect_string());
    let root = unique("basic");
    assert_eq!(
        client.create(&root, b"x", CreateMode::Persistent).unwrap(),
        root
    );
    let seq = client
        .create(&format!("{root}/n-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    assert!(seq.starts_with(&format!("{root}/n-")) && seq.len() == root.len() + 3 + 10);
    let stat = client.exists(&seq).unwrap().unwrap();
    assert_eq!(Some(stat.ephemeral_owner), client.session().session_id());
    assert_eq!(client.get_children(&root, None).unwrap().len(), 1);
    assert_eq!(client.exists(&format!("{root}/none")).unwrap(), None);
    assert_eq!(
        client.get_data(&format!("{root}/none"), None).unwrap_err(),
        ZkError::NoNode
    );
    let stat = client.set_data(&root, b"y", Some(0)).unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(
        client.set_data(&root, b"z", Some(0)).unwrap_err(),
        ZkError::BadVersion
    );
    // Container is created Persistent on purpose.
    let container = client
        .create(&format!("{root}/c"), b"", CreateMode::Container)
        .unwrap();
    assert_eq!(
        client.exists(&container).unwrap().unwrap().ephemeral_owner,
        0
    );
    assert_eq!(client.delete(&root, None).unwrap_err(), ZkError::NotEmpty);
    assert_eq!(
        client
            .create("bad", b"", CreateMode::Persistent)
            .unwrap_err(),
        ZkError::BadArguments
    );
    // close deletes the ephemerals and is idempotent.
    client.close();
    client.close();
    assert_eq!(client.session().state(), ConnectionState::Closed);
    assert_eq!(client.exists("/").unwrap_err(), ZkError::Closed);
    let other = connect(&server.connect_string());
    assert_eq!(other.exists(&seq).unwrap(), None);
}

#[test]
fn watches_fire_and_a_panicking_watcher_does_not_kill_the_client() {
    let Some(server) = shared_server() else {
        return;
    };
    let client = connect(&server.connect_string());
    let root = unique("watch");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    client
        .get_data(&root, Some(Box::new(|_| panic!("a watcher that panics"))))
        .unwrap();
    client.set_data(&root, b"1", None).unwrap();
    let (tx, rx) = mpsc::channel();
    client
        .get_children(&root, Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    client
        .create(&format!("{root}/a"), b"", CreateMode::Persistent)
        .unwrap();
    let event = rx
        .recv_timeout(SESSION)
        .expect("child watch after a panicking watcher");
    assert_eq!(event.path, root);
    assert_eq!(
        event.event_type,
        zk_locks::client::EventType::NodeChildrenChanged
    );
    client.exists("/").unwrap();
    // A watcher on a missing node is disarmed, not left to fire later.
    let (tx, rx) = mpsc::channel();
    let missing = format!("{root}/missing");
    assert_eq!(
        client
            .get_data(&missing, Some(Box::new(move |e| tx.send(e).unwrap())))
            .unwrap_err(),
        ZkError::NoNode
    );
    client
        .create(&missing, b"", CreateMode::Persistent)
        .unwrap();
    client.delete(&missing, None).unwrap();
    client.exists("/").unwrap();
    assert!(rx.try_recv().is_err());
}

#[test]
fn chroot_is_applied_to_paths_and_events() {
    let Some(server) = shared_server() else {
        return;
    };
    let chroot = unique("chroot") + "/nested";
    let client = connect(&format!("{}{chroot}", server.connect_string()));
    assert_eq!(client.chroot(), Some(chroot.as_str()));
    assert_eq!(
        client.create("/a", b"", CreateMode::Persistent).unwrap(),
        "/a"
    );
    let plain = connect(&server.connect_string());
    assert!(plain.exists(&format!("{chroot}/a")).unwrap().is_some());
    let (tx, rx) = mpsc::channel();
    client
        .get_children("/", Some(Box::new(move |e| tx.send(e).unwrap())))
        .unwrap();
    plain
        .create(&format!("{chroot}/b"), b"", CreateMode::Persistent)
        .unwrap();
    assert_eq!(rx.recv_timeout(SESSION).unwrap().path, "/");
    let mut children = client.get_children("/", None).unwrap();
    children.sort();
    assert_eq!(children, vec!["a", "b"]);
    assert!(matches!(
        ZookeeperClient::connect(&format!("{}/bad/", server.connect_string()), SESSION),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn bad_connect_strings_are_typed_errors() {
    for bad in ["", ",", "no-such-host.invalid:2181"] {
        let err = ZookeeperClient::connect(bad, SESSION).unwrap_err();
        assert!(matches!(err, Error::Connect { .. }), "{bad:?}: {err}");
    }
}

#[test]
fn no_server_fails_within_the_connect_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let options = ZkOptions::new(format!("127.0.0.1:{port}"))
        .session_timeout(SESSION)
        .connect_timeout(Duration::from_secs(1));
    let err = ZookeeperClient::connect_with(options).unwrap_err();
    assert!(
        matches!(&err, Error::Connect { hosts, .. } if hosts.contains(&port.to_string())),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn young_client_cut_suspends_then_reconnects_the_same_session() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let before = client.session().snapshot();
    proxy.cut();
    let (_, last) = reach(&client, ConnectionState::Reconnected, SESSION * 2);
    // Suspended then Reconnected: two transitions (a waiter may wake only once).
    assert_eq!(last.session_id, before.session_id);
    assert!(last.epoch >= before.epoch + 2);
    assert_eq!(last.losses, 0);
    client.exists("/").unwrap();
}

#[test]
fn freeze_longer_than_the_session_is_lost_in_time_then_a_new_session() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let before = client.session().snapshot();
    proxy.freeze();
    let frozen_at = Instant::now();
    let (seen, _) = reach(&client, ConnectionState::Lost, SESSION * 2);
    let lost_after = frozen_at.elapsed();
    assert!(
        lost_after <= SESSION + Duration::from_secs(1),
        "Lost after {lost_after:?}"
    );
    assert!(
        states(&seen).contains(&ConnectionState::Suspended),
        "{:?}",
        states(&seen)
    );
    proxy.thaw();
    let (_, last) = reach(&client, ConnectionState::Connected, SESSION * 4);
    assert_ne!(last.session_id, before.session_id);
    assert_eq!(last.losses, 1);
    client.exists("/").unwrap();
}

#[test]
fn a_call_in_flight_during_a_freeze_returns_by_the_deadline() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    proxy.freeze();
    let started = Instant::now();
    let err = client.get_children("/", None).unwrap_err();
    let took = started.elapsed();
    assert!(err.is_retryable(), "{err}");
    assert!(
        took <= SESSION + Duration::from_millis(300),
        "returned after {took:?}"
    );
    proxy.thaw();
}

#[test]
fn targeted_expiry_is_lost_then_a_new_session() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let root = unique("expiry");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let ephemeral = client
        .create(&format!("{root}/e"), b"", CreateMode::Ephemeral)
        .unwrap();
    let before = client.session().snapshot();
    // Listeners see every transition (a waiter may wake only after Lost → Connected).
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    client.session().subscribe(move |s| {
        let _ = tx.lock().unwrap().send(s.state);
    });
    assert_eq!(proxy.expire_session().unwrap(), before.session_id.unwrap());
    let deadline = Instant::now() + SESSION * 3;
    let mut seen = Vec::new();
    while seen.last() != Some(&ConnectionState::Connected) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(state) => seen.push(state),
            Err(_) => panic!("no new session in time: {seen:?}"),
        }
    }
    let lost = seen.iter().position(|s| *s == ConnectionState::Lost);
    assert!(
        lost.is_some_and(|i| i + 1 < seen.len()),
        "Lost then Connected: {seen:?}"
    );
    let last = client.session().snapshot();
    assert_eq!(last.losses, before.losses + 1);
    assert_ne!(last.session_id, before.session_id);
    assert_eq!(client.exists(&ephemeral).unwrap(), None);
}

#[test]
fn server_stop_and_restart() {
    if shared_server().is_none() {
        return;
    }
    let server = TestingServer::start().unwrap();
    let client = connect(&server.connect_string());
    let root = unique("restart");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    server.stop();
    let seen = wait_for_state(&client, ConnectionState::Suspended, SESSION * 2);
    assert!(
        !seen.last().unwrap().state.is_connected(),
        "{:?}",
        states(&seen)
    );
    server.restart().unwrap();
    until_ok(SESSION * 15, || client.exists(&root)).expect("persistent node survives a restart");
    let state = client
        .session()
        .wait_until_connected(Some(Instant::now() + SESSION * 3))
        .state;
    assert!(state.is_connected(), "{state:?}");
}

#[test]
fn cluster_leader_kill_the_client_moves_on() {
    if shared_server().is_none() {
        return;
    }
    let cluster = TestingCluster::start(3).unwrap();
    let client =
        ZookeeperClient::connect(&cluster.connect_string(), Duration::from_secs(4)).unwrap();
    let root = unique("cluster");
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let leader = cluster.leader().expect("a leader");
    cluster.kill(leader);
    cluster.wait_for_quorum(Duration::from_secs(60)).unwrap();
    assert_ne!(cluster.leader(), Some(leader));
    until_ok(Duration::from_secs(30), || {
        client
            .create(&format!("{root}/after"), b"", CreateMode::Persistent)
            .or_else(|e| {
                if e == ZkError::NodeExists {
                    Ok(String::new())
                } else {
                    Err(e)
                }
            })
    });
    assert!(client.exists(&format!("{root}/after")).unwrap().is_some());
}

/// Known limitation (see the report): the `zookeeper` crate gives up on reconnecting
/// (`Closed`) when it has not sent one of its own pings for a session timeout, and it only
/// pings when idle for 2/3 of it — which a heartbeat every 1/3 (or any busy client) prevents.
/// So a client older than one session timeout turns a mere cut into Lost + a new session.
#[test]
#[ignore = "zookeeper 0.8 stale-ping give-up: needs a crate fix (refresh ping_sent on every reply)"]
fn aged_client_cut_suspends_then_reconnects_the_same_session() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let before = client.session().snapshot();
    // Let the client be older than a session timeout (the crate's stale-ping rule).
    let idle = client
        .session()
        .wait_for_change(before.epoch, Some(Instant::now() + SESSION * 2));
    assert_eq!(
        idle.epoch, before.epoch,
        "no transition while idle: {idle:?}"
    );
    proxy.cut();
    let (seen, last) = reach(&client, ConnectionState::Reconnected, SESSION * 3);
    assert!(
        states(&seen).contains(&ConnectionState::Suspended),
        "{:?}",
        states(&seen)
    );
    assert_eq!(last.session_id, before.session_id);
    assert!(last.epoch > before.epoch);
    assert_eq!(last.losses, 0);
    client.exists("/").unwrap();
}

/// Connects and closes many times against a healthy server: every connect must get its
/// session. (The `zookeeper` crate's request channel can lose its wake-up when the first
/// request races the IO thread's start, which wedged about 1 connect in 400.)
#[test]
fn thousands_of_connects_to_a_healthy_server_all_succeed() {
    let Some(server) = shared_server() else {
        return;
    };
    let rounds: usize = std::env::var("ZK_LOCKS_CONNECT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let options = ZkOptions::new(server.connect_string())
        .session_timeout(Duration::from_secs(4))
        .connect_timeout(Duration::from_secs(4));
    let started = Instant::now();
    let mut failures = Vec::new();
    for round in 0..rounds {
        match ZookeeperClient::connect_with(options.clone()) {
            Ok(client) => client.close(),
            Err(e) => failures.push(format!("connect {round}: {e}")),
        }
    }
    eprintln!("{rounds} connects in {:?}", started.elapsed());
    assert!(
        failures.is_empty(),
        "{} failures: {failures:?}",
        failures.len()
    );
}

/// A server that accepts every connection and answers its ConnectRequest, then never answers
/// anything: to a client, a handle that looks connected but is wedged.
struct MuteServer {
    addr: std::net::SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// Receives the session id of every connect answered.
    answered: mpsc::Receiver<i64>,
}

impl MuteServer {
    fn start() -> MuteServer {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let accept_stop = stop.clone();
        let (answered_tx, answered) = mpsc::channel();
        std::thread::spawn(move || {
            for (n, sock) in listener.incoming().enumerate() {
                if accept_stop.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let Ok(mut sock) = sock else { continue };
                let answered_tx = answered_tx.clone();
                let session_id = 0x5000 + n as i64;
                std::thread::spawn(move || {
                    let mut len = [0u8; 4];
                    if sock.read_exact(&mut len).is_err() {
                        return;
                    }
                    let mut request = vec![0u8; i32::from_be_bytes(len).clamp(0, 4096) as usize];
                    if sock.read_exact(&mut request).is_err() {
                        return;
                    }
                    let mut body = Vec::new();
                    body.extend_from_slice(&0i32.to_be_bytes());
                    body.extend_from_slice(&(SESSION.as_millis() as i32).to_be_bytes());
                    body.extend_from_slice(&session_id.to_be_bytes());
                    body.extend_from_slice(&16i32.to_be_bytes());
                    body.extend_from_slice(&[9u8; 16]);
                    body.push(0);
                    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
                    frame.extend_from_slice(&body);
                    if sock.write_all(&frame).is_err() {
                        return;
                    }
                    let _ = answered_tx.send(session_id);
                    // Swallow every request until the client goes away.
                    let mut sink = [0u8; 4096];
                    while matches!(sock.read(&mut sink), Ok(n) if n > 0) {}
                });
            }
        });
        MuteServer {
            addr,
            stop,
            answered,
        }
    }
}

impl Drop for MuteServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
    }
}

/// After a lost session, the replacement handle connects but never answers (wedged): the
/// client must give up on it too and try another, not stay `Lost` for good.
#[test]
fn a_replacement_handle_that_answers_nothing_is_replaced_too() {
    let Some(server) = shared_server() else {
        return;
    };
    let mute = MuteServer::start();
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    let before = client.session().snapshot();
    // The link goes silent, and new connections reach a server that answers only connects.
    proxy.set_target(mute.addr);
    proxy.blackhole();
    reach(&client, ConnectionState::Lost, SESSION * 3);
    mute.answered
        .recv_timeout(SESSION * 3)
        .expect("the replacement handle connected to the mute server");
    // A session timeout later that handle is given up, and the next one reaches the real
    // server again.
    proxy.set_target(server.addr());
    let (_, last) = reach(&client, ConnectionState::Connected, SESSION * 5);
    assert_ne!(last.session_id, before.session_id);
    client.exists("/").unwrap();
}
