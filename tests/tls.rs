//! TLS (feature `tls`) on a real ZooKeeper 3.8 with a `secureClientPort`
//! (`TestingServer::start_tls`, certificates made by `openssl`): the conformance suite over
//! TLS (the lock suites run over TLS as their `native_tls::*` cases, faults included; the
//! session suite's cut, freeze and watch-restore cases as `real_backends`' `native_tls::*`), a
//! client certificate, and the failures — a CA that did not sign the server, plaintext to the
//! TLS port, TLS to the plain port — as connect errors within the connect timeout.
//!
//! Frames of every size up to the packet limit, both ways: requests larger than rustls's
//! 64 KiB send buffer, replies larger than its 16 KiB receive buffer, back to back from
//! several threads and pipelined, and a SetWatches restore of thousands of watches after a cut.

mod conformance;

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions, TlsOptions};
use zk_locks::client::{EventType, Request, Response};
use zk_locks::session::ConnectionState;
use zk_locks::testing::{FaultProxy, TestingServer};
use zk_locks::{CreateMode, Error, ZkClient, ZkError};

const SESSION: Duration = Duration::from_secs(4);

/// One TLS server per test process.
fn tls_server() -> Option<&'static TestingServer> {
    zk_locks::testing::shared_tls_server()
}

fn options(server: &TestingServer, ca: &std::path::Path) -> NativeOptions {
    NativeOptions::new(server.secure_connect_string().unwrap())
        .session_timeout(SESSION)
        .connect_timeout(SESSION)
        .tls(TlsOptions::from_ca_file(ca).unwrap())
}

conformance_tests!(zk_locks::testing::harness::Real::native_tls());

#[test]
fn a_client_certificate_is_presented_and_accepted() {
    let Some(server) = tls_server() else {
        return;
    };
    let files = server.tls_files().unwrap();
    let tls = TlsOptions::from_ca_file(&files.ca)
        .unwrap()
        .client_cert_files(&files.client_cert, &files.client_key)
        .unwrap();
    let client = NativeClient::connect_with(options(server, &files.ca).tls(tls)).unwrap();
    let path = format!("/tls-cert-{}", uuid::Uuid::new_v4());
    client.create(&path, b"x", CreateMode::Ephemeral).unwrap();
    assert_eq!(client.get_data(&path, None).unwrap().0, b"x");
}

#[test]
fn a_wrong_ca_is_a_connect_error_naming_the_certificate() {
    let Some(server) = tls_server() else {
        return;
    };
    let files = server.tls_files().unwrap();
    let err = NativeClient::connect_with(options(server, &files.other_ca)).unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("certificate")),
        "{err}"
    );
}

#[test]
fn plaintext_to_the_tls_port_and_tls_to_the_plain_port_fail_to_connect() {
    let Some(server) = tls_server() else {
        return;
    };
    let plain_to_tls = NativeOptions::new(server.secure_connect_string().unwrap())
        .session_timeout(SESSION)
        .connect_timeout(SESSION);
    let err = NativeClient::connect_with(plain_to_tls).unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    let files = server.tls_files().unwrap();
    let tls_to_plain = NativeOptions::new(server.connect_string())
        .session_timeout(SESSION)
        .connect_timeout(SESSION)
        .tls(TlsOptions::from_ca_file(&files.ca).unwrap());
    let err = NativeClient::connect_with(tls_to_plain).unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("TLS")),
        "{err}"
    );
}

#[test]
fn zklock_runs_over_tls_and_a_wrong_ca_exits_69() {
    let Some(server) = tls_server() else {
        return;
    };
    let files = server.tls_files().unwrap();
    let secure = server.secure_connect_string().unwrap();
    let path = format!("/tls-zklock-{}", uuid::Uuid::new_v4());
    let zklock = |ca: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_zklock"))
            .env_remove("ZK_CONNECT")
            .env_remove("ZK_AUTH")
            .args(["--connect", &secure, "--session-timeout", "4s", "--tls-ca"])
            .arg(ca)
            .args(["--tls-cert"])
            .arg(&files.client_cert)
            .arg("--tls-key")
            .arg(&files.client_key)
            .args([&path, "--", "sh", "-c", "test -n \"$ZKLOCK_NODE\""])
            .output()
            .unwrap()
    };
    let ok = zklock(&files.ca);
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let wrong = zklock(&files.other_ca);
    assert_eq!(wrong.status.code(), Some(69), "{wrong:?}");
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("certificate"));
}

/// Our own client on the TLS port at `hosts` (the server's own, or a proxy in front of it),
/// with [`SESSION`] and a call timeout patient with bulk work on a loaded machine.
fn tls_client(server: &TestingServer, hosts: &str) -> Arc<NativeClient> {
    let files = server.tls_files().unwrap();
    NativeClient::connect_with(
        NativeOptions::new(hosts)
            .session_timeout(SESSION)
            .connect_timeout(SESSION)
            .call_timeout(SESSION * 5)
            .tls(TlsOptions::from_ca_file(&files.ca).unwrap()),
    )
    .unwrap()
}

/// `len` bytes that are not all alike (a shifted frame would not compare equal).
fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The session made no transition since `epoch`: the link never dropped.
fn assert_never_dropped(client: &NativeClient, epoch: u64) {
    let now = client.session().snapshot();
    assert_eq!(
        (now.epoch, now.state),
        (epoch, ConnectionState::Connected),
        "the link dropped"
    );
}

/// Requests larger than rustls's 64 KiB send buffer (a 100 KB and a 1000 KB `set_data`, the
/// latter near the 1 MiB packet limit) go through over TLS as over plain TCP, and their data
/// comes back whole, on one link.
#[test]
fn requests_and_replies_up_to_the_packet_limit_go_through() {
    let Some(server) = tls_server() else {
        return;
    };
    let client = tls_client(server, &server.secure_connect_string().unwrap());
    let epoch = client.session().epoch();
    let path = format!("/tls-large-{}", uuid::Uuid::new_v4());
    client.create(&path, b"", CreateMode::Ephemeral).unwrap();
    for len in [100_000, 1_000_000] {
        let data = payload(len);
        client.set_data(&path, &data, None).unwrap();
        let (read, stat) = client.get_data(&path, None).unwrap();
        assert_eq!(stat.data_length as usize, len);
        assert!(read == data, "the {len}-byte value came back altered");
    }
    assert_never_dropped(&client, epoch);
}

/// Replies larger than rustls's 16 KiB plaintext buffer, back to back: 8 threads list a
/// lock directory of 560 children (33 KB replies) at once, over one link.
#[test]
fn eight_threads_listing_a_large_directory() {
    let Some(server) = tls_server() else {
        return;
    };
    let client = tls_client(server, &server.secure_connect_string().unwrap());
    // Made through the plain port: only the replies cross TLS.
    let plain = NativeClient::connect(&server.connect_string(), SESSION).unwrap();
    let root = format!("/tls-listing-{}", uuid::Uuid::new_v4());
    plain.create(&root, b"", CreateMode::Persistent).unwrap();
    let creates: Vec<Request> = (0..560)
        .map(|_| Request::Create {
            path: format!("{root}/_c_{}-lock-", uuid::Uuid::new_v4()),
            data: vec![],
            mode: CreateMode::EphemeralSequential,
        })
        .collect();
    for result in plain.pipeline(&creates) {
        result.unwrap();
    }
    let epoch = client.session().epoch();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (client, root) = (client.clone(), root.clone());
            std::thread::spawn(move || {
                for _ in 0..20 {
                    assert_eq!(client.get_children(&root, None).unwrap().len(), 560);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_never_dropped(&client, epoch);
}

/// Pipelined reads of 16 to 60 KiB values: every reply whole and in order, over one link.
#[test]
fn pipelined_reads_of_16_to_60_kib() {
    let Some(server) = tls_server() else {
        return;
    };
    let client = tls_client(server, &server.secure_connect_string().unwrap());
    let root = format!("/tls-pipelined-{}", uuid::Uuid::new_v4());
    client.create(&root, b"", CreateMode::Persistent).unwrap();
    let sizes: Vec<usize> = (16..=60).step_by(4).map(|k| k * 1024 - 7).collect();
    let nodes: Vec<(String, Vec<u8>)> = sizes
        .iter()
        .map(|&len| (format!("{root}/n-{len}"), payload(len)))
        .collect();
    for (path, data) in &nodes {
        client.create(path, data, CreateMode::Ephemeral).unwrap();
    }
    let epoch = client.session().epoch();
    let reads: Vec<Request> = (0..4)
        .flat_map(|_| nodes.iter())
        .map(|(path, _)| Request::GetData { path: path.clone() })
        .collect();
    for _ in 0..5 {
        let results = client.pipeline(&reads);
        assert_eq!(results.len(), reads.len());
        for (result, (path, data)) in results.into_iter().zip(nodes.iter().cycle()) {
            match result {
                Ok(Response::GetData(read, _)) => assert!(read == *data, "{path} altered"),
                other => panic!("{path}: {other:?}"),
            }
        }
    }
    assert_never_dropped(&client, epoch);
}

/// A TLS client watching thousands of nodes (~300 KB of path text: SetWatches packets far
/// beyond 64 KiB) survives a cut: the same session, calls working again within a few
/// session timeouts, and every watch restored (each fires on its node's deletion).
#[test]
fn thousands_of_watches_survive_a_cut() {
    let Some(server) = tls_server() else {
        return;
    };
    const NODES: usize = 2000;
    let proxy = FaultProxy::start(std::net::SocketAddr::from((
        [127, 0, 0, 1],
        server.secure_port().unwrap(),
    )))
    .unwrap();
    let client = tls_client(server, &proxy.connect_string());
    // Nodes made and deleted through the plain port: the watches are the subject.
    let other = NativeClient::connect(&server.connect_string(), SESSION * 5).unwrap();
    let root = format!("/tls-watches-{}", uuid::Uuid::new_v4());
    other.create(&root, b"", CreateMode::Persistent).unwrap();
    let long = "w".repeat(100);
    let paths: Vec<String> = (0..NODES)
        .map(|i| format!("{root}/{long}-{i:05}"))
        .collect();
    let creates: Vec<Request> = paths
        .iter()
        .map(|p| Request::Create {
            path: p.clone(),
            data: vec![],
            mode: CreateMode::Persistent,
        })
        .collect();
    for result in other.pipeline(&creates) {
        result.unwrap();
    }
    let (tx, rx) = mpsc::channel();
    for p in &paths {
        let tx = tx.clone();
        client
            .get_data(p, Some(Box::new(move |e| tx.send(e).unwrap())))
            .unwrap();
    }
    let before = client.session().snapshot();
    proxy.cut();
    // Calls work again (the reconnect restored every watch first) in the same session.
    let deadline = Instant::now() + SESSION * 3;
    loop {
        match client.exists(&root) {
            Ok(stat) => {
                assert!(stat.is_some());
                break;
            }
            Err(e) if e.is_retryable() => {
                assert!(
                    Instant::now() < deadline,
                    "no call worked after the cut: {e}, {:?}",
                    client.session().snapshot()
                );
                // Retry pacing for a client reconnecting on its own; not synchronisation.
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{e}"),
        }
    }
    let after = client.session().snapshot();
    assert_eq!(after.session_id, before.session_id);
    assert_eq!(after.losses, before.losses);
    assert_eq!(client.watch_count(), NODES);
    // Every restored watch fires.
    let deletes: Vec<Request> = paths
        .iter()
        .map(|p| Request::Delete {
            path: p.clone(),
            version: None,
        })
        .collect();
    for result in other.pipeline(&deletes) {
        assert_eq!(result.err(), None::<ZkError>);
    }
    for _ in 0..NODES {
        let event = rx
            .recv_timeout(SESSION * 5)
            .expect("every restored watch fires");
        assert_eq!(event.event_type, EventType::NodeDeleted);
    }
    assert_eq!(client.watch_count(), 0);
}
