//! TLS (feature `tls`) on a real ZooKeeper 3.8 with a `secureClientPort`
//! (`TestingServer::start_tls`, certificates made by `openssl`): the conformance suite over
//! TLS (the lock suites run over TLS as their `native_tls::*` cases, faults included), a
//! client certificate, and the failures — a CA that did not sign the server, plaintext to the
//! TLS port, TLS to the plain port — as connect errors within the connect timeout.

mod conformance;

use std::time::Duration;

use zk_locks::client::native::{NativeClient, NativeOptions, TlsOptions};
use zk_locks::testing::TestingServer;
use zk_locks::{CreateMode, Error, ZkClient};

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

/// `creator_all` (ZooKeeper's `auth` scheme: every identity of the creating connection) over
/// TLS with a client certificate grants the certificate's identity (`x509:…`) as well as the
/// digest user; the directory guard of restricted locks takes that entry as possibly ours.
#[test]
fn creator_all_with_a_client_certificate_grants_its_identity_too() {
    use zk_locks::client::acl::AclProvider;
    use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient};
    let Some(server) = tls_server() else {
        return;
    };
    let files = server.tls_files().unwrap();
    let tls = TlsOptions::from_ca_file(&files.ca)
        .unwrap()
        .client_cert_files(&files.client_cert, &files.client_key)
        .unwrap();
    let options = options(server, &files.ca)
        .tls(tls)
        .digest_auth("app", "secret")
        .acl_provider(AclProvider::creator_all());
    let client: SharedClient = NativeClient::connect_with(options).unwrap();
    let base = format!("/tls-creator-all-{}", uuid::Uuid::new_v4());
    client.create(&base, b"", CreateMode::Persistent).unwrap();
    let (acl, _) = client.get_acl(&base).unwrap();
    let schemes: Vec<&str> = acl.iter().map(|a| a.scheme.as_str()).collect();
    assert!(schemes.contains(&"digest"), "{acl:?}");
    assert!(schemes.contains(&"x509"), "{acl:?}");
    let lock = InterProcessMutex::new(client, &format!("{base}/lock")).unwrap();
    assert!(lock.acquire_timeout(SESSION).unwrap());
    lock.release().unwrap();
}
