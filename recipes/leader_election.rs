//! Leader election with `LeaderSelector` (Curator's recipe): every candidate queues in one
//! election; the leader's callback runs on the selector's own thread and leads until its
//! leadership ends — its session suspended or lost, or the leadership interrupted — then
//! returns, and the next candidate in the queue leads. No polling, no herd: each candidate
//! watches only the one ahead of it. The terms (each leader's fencing token) only grow.
//!
//! Here three candidates run; the conductor kills each leader's session in turn (a crashed
//! process: it does not come back, as a selector without auto requeue does not queue again).
//!
//! ```sh
//! cargo run --example leader_election
//! cargo run --example leader_election -- --connect 127.0.0.1:2181
//! ```

use std::sync::mpsc;

use log::{info, warn};
use zk_locks::locks::LeaderSelector;
use zk_locks::LockState;

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};
use zk_locks::testing::harness::TestClient;

const ELECTION: &str = "/zk-locks/leader_election/leader";
const CANDIDATES: usize = 3;

/// One term of office.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// Which candidate led.
    pub leader: usize,
    /// Its term (the fencing token of its election node; grows from term to term).
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
    let selectors = candidates
        .iter()
        .enumerate()
        .map(|(id, conn)| candidate(id, conn, elected.clone()))
        .collect::<zk_locks::Result<Vec<LeaderSelector>>>()?;
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
    for selector in &selectors {
        selector.close()?;
    }
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
        "terms did not grow from leader to leader",
    )?;
    for c in &candidates {
        c.client.close();
    }
    Ok(terms)
}

/// A candidate: a selector whose callback leads until its leadership ends. The callback runs
/// on the selector's thread; returning gives the leadership up.
fn candidate(
    id: usize,
    conn: &TestClient,
    elected: mpsc::Sender<Term>,
) -> zk_locks::Result<LeaderSelector> {
    let selector = LeaderSelector::new(conn.client.clone(), ELECTION, move |leadership| {
        info!("candidate {id} is LEADER (term {})", leadership.term());
        let _ = elected.send(Term {
            leader: id,
            token: leadership.term(),
        });
        // Lead: the work loop would check `leadership.ended()` between steps and pass the
        // term to what it writes. Here: block until the leadership ends.
        match leadership.wait_while_leading(None) {
            LockState::Lost => warn!("candidate {id}: session gone — no longer leader"),
            state => warn!("candidate {id}: leadership {state:?}; stepping down"),
        }
    })?
    .with_id(format!("candidate-{id}"));
    info!("candidate {id} joins the election");
    selector.start()?;
    Ok(selector)
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
