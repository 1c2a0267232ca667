//! Leader election with the mutex: every candidate queues for one `InterProcessMutex`; the
//! holder is the leader and leads until its guard says the lock is no longer `Held`. When the
//! leader's session dies (a crash, a partition longer than the session timeout), its node
//! goes with it and the next candidate in the queue takes over — no polling, no herd: each
//! candidate watches only the one ahead of it. The fencing token numbers the terms.
//!
//! Here three candidates run; the conductor kills each leader's session in turn.
//!
//! ```sh
//! cargo run --example leader_election
//! cargo run --example leader_election -- --connect 127.0.0.1:2181
//! ```

use std::sync::mpsc;
use std::thread;

use log::{info, warn};
use zk_locks::{InterProcessLock, InterProcessMutex, LockState};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};
use zk_locks::testing::harness::TestClient;

const LOCK: &str = "/zk-locks/leader_election/leader";
const CANDIDATES: usize = 3;

/// One term of office.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// Which candidate led.
    pub leader: usize,
    /// Its fencing token (grows from term to term).
    pub token: i64,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

/// Runs the election; returns the terms in order.
pub fn run(args: &[String]) -> AnyResult<Vec<Term>> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("leader_election on {}", options.describe());
    let candidates = (0..CANDIDATES)
        .map(|_| backend.try_connect())
        .collect::<zk_locks::Result<Vec<TestClient>>>()?;
    let (elected, terms_rx) = mpsc::channel::<Term>();

    let terms = thread::scope(|scope| -> AnyResult<Vec<Term>> {
        let handles: Vec<_> = candidates
            .iter()
            .enumerate()
            .map(|(id, conn)| {
                let elected = elected.clone();
                scope.spawn(move || campaign(id, conn, elected))
            })
            .collect();
        drop(elected);
        let mut terms = Vec::new();
        for _ in 0..CANDIDATES {
            let term = terms_rx
                .recv_timeout(cookbook::SESSION_TIMEOUT * 3)
                .map_err(|_| "no leader was elected in time")?;
            terms.push(term);
            info!(
                "conductor: candidate {} leads; killing its session",
                term.leader
            );
            candidates[term.leader].kill();
        }
        for h in handles {
            h.join().map_err(|_| "a candidate panicked")??;
        }
        Ok(terms)
    })?;

    let leaders: Vec<usize> = terms.iter().map(|t| t.leader).collect();
    info!("terms: {terms:?}");
    let mut distinct = leaders.clone();
    distinct.sort_unstable();
    distinct.dedup();
    ensure(
        distinct.len() == CANDIDATES,
        format!("leaders {leaders:?}: someone led twice"),
    )?;
    ensure(
        terms.windows(2).all(|w| w[0].token < w[1].token),
        "fencing tokens did not grow from term to term",
    )?;
    for c in &candidates {
        c.client.close();
    }
    Ok(terms)
}

/// A candidate: wait to be elected, lead until the lock is lost, then step down for good (a
/// crashed process does not come back here; a real service would start a new candidate).
fn campaign(id: usize, conn: &TestClient, elected: mpsc::Sender<Term>) -> AnyResult<()> {
    let lock =
        InterProcessMutex::new(conn.client.clone(), LOCK)?.with_data(format!("candidate-{id}"));
    info!("candidate {id} joins the election");
    let guard = lock.lock()?;
    let token = guard.fencing_token()?;
    info!("candidate {id} is LEADER (term token {token})");
    let _ = elected.send(Term { leader: id, token });
    // Lead: block until the lock may be gone. A real leader would also pause on Suspect and
    // resume on Held; this one only ends on Lost.
    loop {
        match guard.wait_while_held(None) {
            LockState::Lost => break,
            LockState::Held => {}
            // Suspect (and any state a later version adds): not sure of the lock, pause.
            _ => {
                warn!("candidate {id}: leadership suspect (connection suspended); pausing");
                // Epoch first, then the state: a transition in between is not missed.
                let epoch = conn.client.session().epoch();
                if guard.state() == LockState::Suspect {
                    conn.client.session().wait_for_change(epoch, None);
                }
            }
        }
    }
    warn!("candidate {id}: session gone — no longer leader");
    // A lost hold releases with `Ok` (its node went with the session): an error here is
    // a real failure to clean up, which the operator should see.
    if let Err(e) = guard.unlock() {
        warn!("candidate {id}: releasing the lost leadership failed: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_election_fails_over_to_every_candidate() {
        let terms = run(&cookbook::memory_args()).unwrap();
        assert_eq!(terms.len(), 3);
        assert!(terms.windows(2).all(|w| w[0].token < w[1].token));
        assert!(terms.windows(2).all(|w| w[0].leader != w[1].leader));
    }

    #[test]
    fn leader_election_fails_over_on_a_real_server() {
        let Some(args) = cookbook::shared_server_args() else {
            return;
        };
        let terms = run(&args).unwrap();
        assert_eq!(terms.len(), 3);
        assert!(terms.windows(2).all(|w| w[0].token < w[1].token));
    }
}
