//! Waiting for a state in tests: a client connected again, a session in a given state, or a
//! condition the test cannot be notified of.

use std::time::{Duration, Instant};

use crate::{ConnectionState, SessionSnapshot, ZkClient};

/// Blocks until the client is connected (any state that serves requests); panics after 30 s.
pub fn wait_connected(client: &dyn ZkClient) {
    let s = client
        .session()
        .wait_until_connected(Some(Instant::now() + Duration::from_secs(30)));
    assert!(s.state.is_connected(), "client did not reconnect: {s:?}");
}

/// Blocks until `done` holds of `client`'s session, checked at once and at every change of it
/// (no polling), and returns the session then; panics with `what` after `within`. Changes that
/// land together are seen together: `done` should not depend on a state passed through.
pub fn wait_for_session(
    client: &dyn ZkClient,
    within: Duration,
    what: &str,
    done: impl Fn(&SessionSnapshot) -> bool,
) -> SessionSnapshot {
    let deadline = crate::testing::deadline_after(within);
    loop {
        let s = client.session().snapshot();
        if done(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {s:?}"
        );
        client.session().wait_for_change(s.epoch, Some(deadline));
    }
}

/// Blocks until `client`'s session is in `state` ([`wait_for_session`]); panics after
/// `within`.
pub fn reach_state(
    client: &dyn ZkClient,
    state: ConnectionState,
    within: Duration,
) -> SessionSnapshot {
    wait_for_session(client, within, &format!("the session {state:?}"), |s| {
        s.state == state
    })
}

/// Polls `cond` until it holds (a state the test cannot be notified of, such as another
/// process's node appearing); panics with `what` after `patience`.
pub fn eventually(patience: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = crate::testing::deadline_after(patience);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The children of `path` through `client` (empty when it is missing or the call fails).
pub fn children(client: &dyn ZkClient, path: &str) -> Vec<String> {
    client.get_children(path, None).unwrap_or_default()
}

/// Every node under `dirs` through `client`, with the session that owns it (its
/// `ephemeralOwner`; 0 for a persistent node). Nodes that go between the listing and their
/// `exists` are left out.
pub fn owned_nodes(client: &dyn ZkClient, dirs: &[String]) -> Vec<(String, i64)> {
    let mut all = Vec::new();
    for dir in dirs {
        for child in children(client, dir) {
            let path = format!("{dir}/{child}");
            if let Ok(Some(stat)) = client.exists(&path) {
                all.push((path, stat.ephemeral_owner));
            }
        }
    }
    all
}

/// Whether `client`'s session is asked to prove itself to the quorum now: some lock or
/// election node of it is held or waited for (`session/quorum.rs`'s interests). On the
/// memory backend, which keeps no proof (so no grace after the last interest), exactly
/// while one is.
pub fn wants_proof(client: &dyn ZkClient) -> bool {
    client.session().quorum_demand().0
}
