//! A stolen-lock attempt, refused: a service holds a lock created with digest credentials and
//! the `creator_all` ACL; an intruder without the credentials, then one with a guessed
//! password, try every way in — delete the holder's node, overwrite it, read it, list the
//! queue, queue for the lock — and each is refused with `NoAuth`. A second instance of the
//! service, with the same credentials, waits its turn and gets the lock.
//!
//! ACLs live on the server, so this recipe needs a real one: `--connect HOSTS`, or without it
//! a throw-away `testing::TestingServer`.
//!
//! ```sh
//! cargo run --example stolen_lock                       # starts a throw-away server
//! cargo run --example stolen_lock -- --connect 127.0.0.1:2181
//! ```

use std::sync::Arc;
use std::time::Duration;

use log::info;
use zk_locks::client::acl::AclProvider;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::{Error, InterProcessLock, InterProcessMutex, SharedClient, ZkClient, ZkError};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};

const LOCK: &str = "/zk-locks/stolen_lock/lock";

/// What the intruders got, for the test that runs this recipe.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The refusals seen, one line each (`what: error`).
    pub refusals: Vec<String>,
    /// True when the second instance of the service got the lock after the first released.
    pub peer_took_over: bool,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

/// Runs the scenario on `--connect HOSTS`, or on a throw-away server.
pub fn run(args: &[String]) -> AnyResult<Outcome> {
    let options = cookbook::Options::parse(args)?;
    match &options.connect {
        Some(hosts) => scenario(hosts),
        None => embedded(),
    }
}

fn embedded() -> AnyResult<Outcome> {
    info!("no --connect: starting a throw-away ZooKeeper (testing::TestingServer)");
    let server = zk_locks::testing::TestingServer::start()?;
    scenario(&server.connect_string())
}

fn session(hosts: &str, credentials: Option<(&str, &str)>) -> AnyResult<Arc<NativeClient>> {
    // Without credentials `creator_all` cannot be created: the intruder keeps the default.
    let mut options = NativeOptions::new(hosts).session_timeout(cookbook::SESSION_TIMEOUT);
    if let Some((user, password)) = credentials {
        options = options
            .digest_auth(user, password)
            .acl_provider(AclProvider::creator_all());
    }
    Ok(NativeClient::connect_with(options)?)
}

fn scenario(hosts: &str) -> AnyResult<Outcome> {
    let mut outcome = Outcome::default();
    let service: SharedClient = session(hosts, Some(("billing", "s3cret")))?;
    let lock = InterProcessMutex::new(service.clone(), LOCK)?;
    let guard = lock.lock()?;
    let node = guard.node_path().ok_or("the guard names no node")?;
    info!("the service holds {LOCK} as {node} (creator_all, user billing)");

    let intruder = session(hosts, None)?;
    let mut refused = |what: &str, result: Result<(), ZkError>| -> AnyResult<()> {
        ensure(
            result == Err(ZkError::NoAuth),
            format!("{what} was not refused: {result:?}"),
        )?;
        info!("intruder: {what}: refused (NoAuth)");
        outcome.refusals.push(format!("{what}: NoAuth"));
        Ok(())
    };
    refused("delete the holder's node", intruder.delete(node, None))?;
    refused(
        "overwrite the holder's node",
        intruder.set_data(node, b"mine", None).map(drop),
    )?;
    refused(
        "read the holder's node",
        intruder.get_data(node, None).map(drop),
    )?;
    refused(
        "list the queue",
        intruder.get_children(LOCK, None).map(drop),
    )?;

    for (who, credentials) in [
        ("intruder", None),
        (
            "intruder with a guessed password",
            Some(("billing", "guess")),
        ),
    ] {
        let client: SharedClient = session(hosts, credentials)?;
        let rival = InterProcessMutex::new(client, LOCK)?;
        match rival.acquire_timeout(Duration::from_secs(1)) {
            Err(e @ Error::NotAuthorized { .. }) => {
                info!("{who}: queue for the lock: {e}");
                outcome.refusals.push(format!("{who} queue: NoAuth"));
            }
            other => return Err(format!("{who} was not refused: {other:?}").into()),
        }
    }

    // A second instance of the service shares the lock: same credentials, same identity.
    let peer: SharedClient = session(hosts, Some(("billing", "s3cret")))?;
    let second = InterProcessMutex::new(peer, LOCK)?;
    ensure(
        !second.acquire_timeout(Duration::from_millis(200))?,
        "the peer got the lock while it was held",
    )?;
    drop(guard);
    outcome.peer_took_over = second.acquire_timeout(Duration::from_secs(10))?;
    ensure(outcome.peer_took_over, "the peer never got the lock")?;
    info!("the second instance of the service took the lock after the first released it");
    second.release()?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ACLs need a real server: every way in is refused to strangers, the peer takes over.
    #[test]
    fn stolen_lock_attempts_are_refused() {
        let Some(args) = cookbook::shared_server_args() else {
            return;
        };
        let outcome = run(&args).unwrap();
        assert_eq!(outcome.refusals.len(), 6, "{:?}", outcome.refusals);
        assert!(outcome.peer_took_over);
    }
}
