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
