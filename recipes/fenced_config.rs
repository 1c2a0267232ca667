//! Fenced writes in ZooKeeper: when the state a lock protects lives in ZooKeeper itself (a
//! config node, a job table), the write can be fenced by the server. `guard.fenced_multi(ops)`
//! sends one transaction: a `check` that the holder's lock node still exists, then the
//! writes. ZooKeeper applies all or nothing, so a holder that lost its lock — even one that
//! stalled and never noticed — cannot write; it gets `Error::LockLost` instead.
//!
//! Story: two services keep a shared config node up to date, each taking the lock, reading
//! the config and writing the next version. A holds the lock and writes; A stalls (a long GC
//! pause) and its session dies meanwhile; B takes the lock, reads A's value and writes its
//! own; A wakes up and — without checking its guard, as a stalled process would — writes
//! what it computed before the stall: refused, and the config keeps B's value.
//!
//! ```sh
//! cargo run --example fenced_config
//! cargo run --example fenced_config -- --connect 127.0.0.1:2181
//! ```

use log::{info, warn};
use zk_locks::client::MultiOp;
use zk_locks::{CreateMode, Error, InterProcessLock, InterProcessMutex, ZkClient, ZkError};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};

const ROOT: &str = "/zk-locks/fenced-config";
const LOCK: &str = "/zk-locks/fenced-config/lock";
const CONFIG: &str = "/zk-locks/fenced-config/config";

/// What happened: every write attempt (writer, value, accepted) and the config at the end.
#[derive(Debug, Default)]
pub struct Outcome {
    /// (writer, value, accepted)
    pub writes: Vec<(String, String, bool)>,
    /// The config node's value at the end.
    pub config: String,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

/// The config write: one `setData` (any version), sent behind the lock's check.
fn config_write(value: &str) -> [MultiOp; 1] {
    [MultiOp::SetData {
        path: CONFIG.into(),
        data: value.as_bytes().to_vec(),
        version: -1,
    }]
}

/// Creates the config node (and its parents) with `initial`, or sets it back to `initial`.
fn reset_config(client: &dyn ZkClient, initial: &str) -> AnyResult<()> {
    for path in ["/zk-locks", ROOT] {
        match client.create(path, b"", CreateMode::Persistent) {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match client.create(CONFIG, initial.as_bytes(), CreateMode::Persistent) {
        Ok(_) => {}
        Err(ZkError::NodeExists) => {
            client.set_data(CONFIG, initial.as_bytes(), None)?;
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

fn read_config(client: &dyn ZkClient) -> AnyResult<String> {
    Ok(String::from_utf8_lossy(&client.get_data(CONFIG, None)?.0).into_owned())
}

/// Runs the story; returns every write attempt and the final config.
pub fn run(args: &[String]) -> AnyResult<Outcome> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("fenced config on {}", options.describe());
    let a = backend.try_connect()?;
    let b = backend.try_connect()?;
    reset_config(&*b.client, "version 0")?;
    let lock_a = InterProcessMutex::new(a.client.clone(), LOCK)?;
    let lock_b = InterProcessMutex::new(b.client.clone(), LOCK)?;
    let mut outcome = Outcome::default();
    let mut record = |writer: &str, value: &str, result: &zk_locks::Result<()>| {
        outcome
            .writes
            .push((writer.into(), value.into(), result.is_ok()));
    };

    let guard_a = lock_a.lock()?;
    let seen = read_config(&*a.client)?;
    let value = "version 1 (by A)";
    let result = guard_a.fenced_multi(&config_write(value)).map(drop);
    info!(
        "A holds the lock, reads {seen:?}, writes {value:?}: {}",
        verdict(&result)
    );
    record("A", value, &result);
    result?;
    // A computes its next version now, then stalls before writing it.
    let stale = "version 2 (by A, computed before the stall)";

    info!("A stalls (a long GC pause) ... and its session dies meanwhile");
    a.kill();

    let guard_b = lock_b.lock()?;
    let seen = read_config(&*b.client)?;
    let value = "version 2 (by B)";
    let result = guard_b.fenced_multi(&config_write(value)).map(drop);
    info!(
        "B takes over, reads {seen:?}, writes {value:?}: {}",
        verdict(&result)
    );
    record("B", value, &result);
    result?;

    info!("A wakes up and writes what it computed before the stall, without a look at its guard");
    let result = guard_a.fenced_multi(&config_write(stale)).map(drop);
    record("A", stale, &result);
    match &result {
        Err(Error::LockLost { node, .. }) => info!(
            "REFUSED: A's lock node {} is gone, so nothing was written",
            cookbook::short(node)
        ),
        Err(e) => warn!("A's write failed otherwise: {e}"),
        Ok(()) => warn!("A's stale write was ACCEPTED"),
    }
    outcome.config = read_config(&*b.client)?;
    info!("the config is {:?}", outcome.config);
    ensure(
        matches!(result, Err(Error::LockLost { .. })),
        format!("A's stale write was not refused as LockLost: {result:?}"),
    )?;
    ensure(
        outcome.config == "version 2 (by B)",
        "the config does not hold B's value",
    )?;

    // A's hold went with its session, so its release is `Ok`: an error is a real failure.
    if let Err(e) = guard_a.unlock() {
        warn!("A's release failed: {e}");
    }
    guard_b.unlock()?;
    b.client.close();
    Ok(outcome)
}

fn verdict(result: &zk_locks::Result<()>) -> String {
    match result {
        Ok(()) => "committed".into(),
        Err(e) => format!("failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(outcome: &Outcome) {
        let verdicts: Vec<(&str, bool)> = outcome
            .writes
            .iter()
            .map(|(w, _, ok)| (w.as_str(), *ok))
            .collect();
        assert_eq!(verdicts, [("A", true), ("B", true), ("A", false)]);
        assert_eq!(outcome.config, "version 2 (by B)");
    }

    #[test]
    fn the_stale_holders_config_write_is_refused() {
        check(&run(&cookbook::memory_args()).unwrap());
    }

    #[test]
    fn the_stale_holders_config_write_is_refused_on_a_real_server() {
        let Some(args) = cookbook::shared_server_args() else {
            return;
        };
        check(&run(&args).unwrap());
    }
}
