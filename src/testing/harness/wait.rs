//! Waiting for a state in tests: a client connected again, or a condition the test cannot
//! be notified of.

use std::time::{Duration, Instant};

use crate::ZkClient;

/// Blocks until the client is connected (any state that serves requests); panics after 30 s.
pub fn wait_connected(client: &dyn ZkClient) {
    let s = client
        .session()
        .wait_until_connected(Some(Instant::now() + Duration::from_secs(30)));
    assert!(s.state.is_connected(), "client did not reconnect: {s:?}");
}

/// Polls `cond` until it holds (a state the test cannot be notified of, such as another
/// process's node appearing); panics with `what` after `patience`.
pub fn eventually(patience: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The children of `path` through `client` (empty when it is missing or the call fails).
pub fn children(client: &dyn ZkClient, path: &str) -> Vec<String> {
    client.get_children(path, None).unwrap_or_default()
}
