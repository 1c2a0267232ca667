//! An active/passive service with `LeaderLatch` (Curator's recipe): three instances join one
//! election; the leader does the work — here it publishes the service's configuration in
//! ZooKeeper with a fenced write stamped with its term — and the others wait to take over.
//! When the leader shuts down cleanly (`close`), the next instance leads within a round trip
//! and its term is larger; a write from a leader that lost its node is refused by ZooKeeper
//! itself. `close` is an error when our node may still stand in the election (its delete
//! went to the background with the link down): a service that shuts down logs it, the
//! delete goes on until the node or its session is gone.
//!
//! ```sh
//! cargo run --example leader_latch
//! cargo run --example leader_latch -- --connect 127.0.0.1:2181
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use log::info;
use zk_locks::client::MultiOp;
use zk_locks::locks::{LeaderLatch, LeaderLatchListener, Leadership};
use zk_locks::{CreateMode, Error, ZkError};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};

const ELECTION: &str = "/zk-locks/leader_latch/election";
const CONFIG: &str = "/zk-locks/leader_latch/config";
const INSTANCES: usize = 3;

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

/// Logs every change of leadership (listeners run on the latch's own thread).
struct Log(String);

impl LeaderLatchListener for Log {
    fn is_leader(&self, leadership: &Leadership) {
        info!("{}: now leader (term {})", self.0, leadership.term());
    }
    fn not_leader(&self) {
        info!("{}: no longer leader", self.0);
    }
}

/// Runs the service; returns the terms of the leaders in order.
pub fn run(args: &[String]) -> AnyResult<Vec<i64>> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("leader_latch on {}", options.describe());
    let setup = backend.try_connect()?;
    for dir in ["/zk-locks", "/zk-locks/leader_latch", CONFIG] {
        match setup.client.create(dir, b"", CreateMode::Persistent) {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // One instance after the other (each once the one before is in the queue), so the queue
    // is instance-0, -1, -2.
    let mut latches = Vec::new();
    for i in 0..INSTANCES {
        let client = backend.try_connect()?.client;
        let latch = LeaderLatch::new(client, ELECTION, format!("instance-{i}"))?;
        latch.add_listener(Arc::new(Log(format!("instance-{i}"))));
        latch.start()?;
        let deadline = Instant::now() + cookbook::SESSION_TIMEOUT * 3;
        while latch.participants()?.len() <= i {
            ensure(
                Instant::now() < deadline,
                "an instance did not queue in time",
            )?;
            std::thread::sleep(Duration::from_millis(2));
        }
        latches.push(latch);
    }

    let mut terms = Vec::new();
    for (i, latch) in latches.iter().enumerate() {
        // Every instance awaits its turn; the first leads at once.
        let leadership = latch
            .await_leadership_for(cookbook::SESSION_TIMEOUT * 3)?
            .ok_or("no leader in time")?;
        let leader = latches[0].leader()?.map(|p| p.id().into_owned());
        info!("the election names {leader:?} as leader; instance-{i} holds {leadership:?}");
        // The leader's work: a write that commits only while its election node exists.
        let config = format!("owner=instance-{i} term={}", leadership.term());
        let write = [MultiOp::SetData {
            path: CONFIG.into(),
            data: config.clone().into_bytes(),
            version: -1,
        }];
        leadership.fenced_multi(&write)?;
        terms.push(leadership.term());
        latch.close()?; // a clean shutdown: the next instance leads
                        // The old leadership is over: its fenced write is refused without reaching the data.
        let refused = leadership.fenced_multi(&write);
        ensure(
            matches!(refused, Err(Error::LockLost { .. })),
            format!("a closed leader wrote: {refused:?}"),
        )?;
    }
    let (data, _) = setup.client.get_data(CONFIG, None)?;
    info!("config: {}", String::from_utf8_lossy(&data));
    ensure(
        terms.windows(2).all(|w| w[0] < w[1]),
        "terms did not grow from leader to leader",
    )?;
    setup.client.close();
    Ok(terms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_instance_leads_in_turn_with_a_growing_term() {
        let terms = run(&cookbook::memory_args()).unwrap();
        assert_eq!(terms.len(), INSTANCES);
    }

    #[test]
    fn every_instance_leads_in_turn_on_a_real_server() {
        let Some(args) = cookbook::shared_server_args() else {
            return;
        };
        assert_eq!(run(&args).unwrap().len(), INSTANCES);
    }
}
