//! A stolen-lock attempt, refused: a service holds a lock created with digest credentials and
//! the `creator_all` ACL; an intruder without the credentials, then one with a guessed
//! password, try every way in — delete the holder's node, overwrite it, read it, list the
//! queue, queue for the lock — and each is refused with `NoAuth`. A second instance of the
//! service, with the same credentials, waits its turn and gets the lock. The lock lives under
//! a persistent base the service made with its own ACL: without it, anyone could create the
//! lock directory first with the open ACL, and the recipes refuse such a lock.
//!
//! ACLs are checked by the server: the embedded in-memory ensemble checks them as ZooKeeper
//! does (world, auth and digest entries; the parent's ACL for create and delete), and a real
//! ensemble is one flag away.
//!
//! ```sh
//! cargo run --example stolen_lock                       # the embedded in-memory ensemble
//! cargo run --example stolen_lock -- --connect 127.0.0.1:2181
//! ```

use std::sync::Arc;
use std::time::Duration;

use log::info;
use zk_locks::client::acl::AclProvider;
use zk_locks::client::memory::{MemoryEnsemble, MemoryOptions};
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::{Error, InterProcessLock, InterProcessMutex, SharedClient, ZkClient, ZkError};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};

/// A persistent node the service makes with its own ACL: a restricted lock needs a base that
/// nobody else may create or delete in (a directory made as a container right under the
/// root, which lets anyone in, is refused as `Error::UnprotectedLock`).
const BASE: &str = "/zk-locks-stolen_lock";
const LOCK: &str = "/zk-locks-stolen_lock/lock";

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

/// Runs the scenario on `--connect HOSTS`, or on the embedded in-memory ensemble.
pub fn run(args: &[String]) -> AnyResult<Outcome> {
    let options = cookbook::Options::parse(args)?;
    match &options.connect {
        Some(hosts) => scenario(&|credentials| real_session(hosts, credentials)),
        None => {
            let ensemble = MemoryEnsemble::new();
            scenario(&|credentials| memory_session(&ensemble, credentials))
        }
    }
}

/// A session with `credentials` (user, password), or none.
type Connect<'a> = dyn Fn(Option<(&str, &str)>) -> AnyResult<SharedClient> + 'a;

// Without credentials `creator_all` cannot be created: the intruder keeps the default (open).
fn real_session(hosts: &str, credentials: Option<(&str, &str)>) -> AnyResult<SharedClient> {
    let mut options = NativeOptions::new(hosts).session_timeout(cookbook::SESSION_TIMEOUT);
    if let Some((user, password)) = credentials {
        options = options
            .digest_auth(user, password)
            .acl_provider(AclProvider::creator_all());
    }
    let client: Arc<NativeClient> = NativeClient::connect_with(options)?;
    Ok(client)
}

fn memory_session(
    ensemble: &MemoryEnsemble,
    credentials: Option<(&str, &str)>,
) -> AnyResult<SharedClient> {
    let mut options = MemoryOptions::new();
    if let Some((user, password)) = credentials {
        options = options
            .digest_auth(user, password)
            .acl_provider(AclProvider::creator_all());
    }
    Ok(ensemble.connect_with(options)?)
}

fn scenario(session: &Connect) -> AnyResult<Outcome> {
    let mut outcome = Outcome::default();
    let service: SharedClient = session(Some(("billing", "s3cret")))?;
    match service.create(BASE, b"", zk_locks::CreateMode::Persistent) {
        Ok(_) | Err(ZkError::NodeExists) => {}
        Err(e) => return Err(e.into()),
    }
    let lock = InterProcessMutex::new(service.clone(), LOCK)?;
    let guard = lock.lock()?;
    let node = guard.node_path().ok_or("the guard names no node")?;
    info!("the service holds {LOCK} as {node} (creator_all, user billing)");

    let intruder = session(None)?;
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
        let client: SharedClient = session(credentials)?;
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
    let peer: SharedClient = session(Some(("billing", "s3cret")))?;
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

    fn every_way_in_is_refused_and_the_peer_takes_over(args: &[String]) {
        let outcome = run(args).unwrap();
        assert_eq!(outcome.refusals.len(), 6, "{:?}", outcome.refusals);
        assert!(outcome.peer_took_over);
    }

    #[test]
    fn stolen_lock_attempts_are_refused_in_memory() {
        every_way_in_is_refused_and_the_peer_takes_over(&cookbook::memory_args());
    }

    #[test]
    fn stolen_lock_attempts_are_refused_on_a_real_server() {
        if let Some(args) = cookbook::shared_server_args() {
            every_way_in_is_refused_and_the_peer_takes_over(&args);
        }
    }
}
