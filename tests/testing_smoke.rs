//! The test support itself: a server starts, answers four-letter words, restarts on its port.

use zk_locks::testing::{shared_server, FaultProxy};

#[test]
fn shared_server_answers_four_letter_words() {
    let Some(server) = shared_server() else {
        return;
    };
    assert_eq!(server.four_letter("ruok").unwrap().trim(), "imok");
    let srvr = server.four_letter("srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    let _ = server.watch_count().unwrap();
    let proxy = FaultProxy::start(server.addr()).unwrap();
    assert_eq!(
        zk_locks::testing::FaultProxy::connect_string(&proxy),
        proxy.addr().to_string()
    );
}

/// A member that was started but exited on its own (here: its client port is taken) is a
/// failure of `wait_for_quorum`, not a member to leave out: with the other two serving, the
/// ensemble would otherwise pass for whole and the next fault would take its quorum away;
/// `has_died` tells it from a member that was killed.
#[test]
fn a_member_that_dies_at_startup_fails_the_quorum_wait() {
    if shared_server().is_none() {
        return;
    }
    let cluster = zk_locks::testing::TestingCluster::start(3).unwrap();
    cluster.kill(2);
    assert!(!cluster.has_died(2), "killed is not died");
    let _taken = std::net::TcpListener::bind(("127.0.0.1", cluster.port(2))).unwrap();
    cluster.restart(2).unwrap();
    let err = cluster
        .wait_for_quorum(std::time::Duration::from_secs(60))
        .expect_err("member 2 cannot serve");
    assert!(err.to_string().contains("exited"), "{err}");
    // `has_died` names it (the torture soak restarts such a member and counts the crash).
    assert!(cluster.has_died(2));
    assert!(!cluster.has_died(0) && !cluster.has_died(1));
}
