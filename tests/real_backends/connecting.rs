//! Connect strings and timeouts: bad input is a typed error whose message names it, nothing
//! panics; no server is a `Connect` error within the connect timeout; a chroot is applied to
//! paths and events.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use zk_locks::testing::shared_server;
use zk_locks::{CreateMode, Error, InterProcessLock, InterProcessMutex};

use crate::backend::{connect, dead_port, try_connect, unique_root, ClientKind, Connect, SESSION};

/// A connect attempt that must fail with an error accepted by `expected` whose message names
/// `names` (the connect string itself, unless a timeout is the bad input).
fn connect_row(kind: ClientKind, options: Connect, names: &str, expected: impl Fn(&Error) -> bool) {
    let hosts = options.hosts.clone();
    let result = std::panic::catch_unwind(|| try_connect(kind, options))
        .unwrap_or_else(|_| panic!("{hosts:?}: panicked"));
    let err = match result {
        Ok(c) => {
            c.close();
            panic!("{hosts:?}: connected")
        }
        Err(e) => e,
    };
    assert!(expected(&err), "{hosts:?}: {err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&format!("{names:?}")) || message.contains(names),
        "{hosts:?}: message {message:?} does not name {names:?}"
    );
}

fn bad_connect_strings_are_typed_errors(kind: ClientKind) {
    let connect = |e: &Error| matches!(e, Error::Connect { .. });
    let argument = |e: &Error| matches!(e, Error::InvalidArgument { .. });
    for (s, expected) in [
        ("", connect as fn(&Error) -> bool),
        (" ", connect),
        (",", connect),
        ("127.0.0.1:2181,", connect),
        ("no-such-host.invalid:2181", connect),
        ("127.0.0.1:notaport", connect),
        ("127.0.0.1:99999", connect),
        ("127.0.0.1:2181/bad//chroot", argument),
        ("127.0.0.1:2181/chroot/", argument),
        ("127.0.0.1:2181/a/../b", argument),
        ("127.0.0.1:2181/nul\0", argument),
    ] {
        connect_row(kind, Connect::new(s), s, expected);
    }
}

fn bad_timeouts_when_connecting_are_typed_errors(kind: ClientKind) {
    let hosts = format!("127.0.0.1:{}", dead_port());
    let session_timeout = |e: &Error| {
        matches!(
            e,
            Error::InvalidArgument {
                name: "session_timeout",
                ..
            }
        )
    };
    connect_row(
        kind,
        Connect::new(hosts.clone()).session_timeout(Duration::ZERO),
        "session_timeout",
        session_timeout,
    );
    // Longer than the wire's i32 of milliseconds (the crate would overflow).
    connect_row(
        kind,
        Connect::new(hosts)
            .session_timeout(Duration::MAX)
            .connect_timeout(Duration::from_millis(300)),
        "session_timeout",
        session_timeout,
    );
}

fn no_server_fails_within_the_connect_timeout(kind: ClientKind) {
    let port = dead_port();
    let started = Instant::now();
    let err = try_connect(
        kind,
        Connect::new(format!("127.0.0.1:{port}")).connect_timeout(Duration::from_secs(1)),
    )
    .err()
    .expect("nothing listens");
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

/// Against a real server: nothing listening is a `Connect` error within the connect timeout,
/// and a valid chroot works (and is where the nodes go).
fn connect_strings_against_a_real_server(kind: ClientKind) {
    let Some(server) = shared_server() else {
        return;
    };
    let dead = format!("127.0.0.1:{}", dead_port());
    connect_row(
        kind,
        Connect::new(dead.clone()).connect_timeout(Duration::from_millis(500)),
        &dead,
        |e| matches!(e, Error::Connect { .. }),
    );
    let bad_chroot = format!("{}/x//y", server.connect_string());
    connect_row(kind, Connect::new(bad_chroot.clone()), &bad_chroot, |e| {
        matches!(e, Error::InvalidArgument { .. })
    });
    let root = unique_root("bad-input");
    let chrooted = format!("{}{root}", server.connect_string());
    // A maximal connect (and call) timeout must not overflow an `Instant`.
    let c = try_connect(
        kind,
        Connect::new(chrooted)
            .session_timeout(Duration::from_secs(6))
            .connect_timeout(Duration::MAX)
            .call_timeout(Duration::MAX),
    )
    .unwrap();
    let m = InterProcessMutex::new(c.shared(), "/lock").unwrap();
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    assert!(node.starts_with("/lock/"), "{node}");
    // The node is where the chroot puts it, and goes with the release. (Not a listing of the
    // lock directory: it is a container, which the server may reap once empty.)
    let plain = connect(kind, &server.connect_string());
    let on_server = format!("{root}{node}");
    assert!(plain.exists(&on_server).unwrap().is_some(), "{on_server}");
    drop(g);
    c.close();
    assert_eq!(plain.exists(&on_server).unwrap(), None, "{on_server}");
    plain.close();
}

fn chroot_is_applied_to_paths_and_events(kind: ClientKind) {
    let Some(server) = shared_server() else {
        return;
    };
    let chroot = unique_root("chroot") + "/nested";
    let client = connect(kind, &format!("{}{chroot}", server.connect_string()));
    assert_eq!(client.chroot(), Some(chroot.as_str()));
    assert_eq!(
        client.create("/a", b"", CreateMode::Persistent).unwrap(),
        "/a"
    );
    let plain = connect(kind, &server.connect_string());
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
        try_connect(
            kind,
            Connect::new(format!("{}/bad/", server.connect_string()))
        ),
        Err(Error::InvalidArgument { .. })
    ));
}

on_both_backends!([
    bad_connect_strings_are_typed_errors,
    bad_timeouts_when_connecting_are_typed_errors,
    no_server_fails_within_the_connect_timeout,
    connect_strings_against_a_real_server,
    chroot_is_applied_to_paths_and_events,
]);
