//! Multi-lock: money moves between accounts whose balances live in ZooKeeper nodes. A
//! transfer needs the locks of both accounts, all or nothing (`InterProcessMultiLock`), taken
//! in path order (`ordered_by_path`) so that a transfer alice→bob and one bob→alice cannot
//! deadlock each other. Four tellers, each its own session, move money concurrently; the total
//! never changes. Then a timed multi-lock over an account someone else holds gives up and
//! holds none of its locks.
//!
//! ```sh
//! cargo run --example multi_lock
//! cargo run --example multi_lock -- --connect 127.0.0.1:2181
//! ```

use std::thread;
use std::time::Duration;

use log::info;
use zk_locks::locks::InterProcessMultiLock;
use zk_locks::{CreateMode, InterProcessLock, InterProcessMutex, SharedClient, ZkError};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};
use zk_locks::testing::harness::TestClient;

const ROOT: &str = "/zk-locks/multi_lock";
const ACCOUNTS: [&str; 3] = ["alice", "bob", "carol"];
const OPENING_BALANCE: i64 = 100;
const TELLERS: usize = 4;
const TRANSFERS_PER_TELLER: usize = 5;

/// What happened, for the test that runs this recipe.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Final balances, in `ACCOUNTS` order.
    pub balances: Vec<i64>,
    /// Transfers made.
    pub transfers: usize,
    /// The timed multi-lock over a held account gave up.
    pub timed_out_while_held: bool,
    /// After giving up, it held none of its locks (nodes left under the free account's lock).
    pub leftover_nodes: usize,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

fn lock_path(account: &str) -> String {
    format!("{ROOT}/locks/{account}")
}

fn balance_path(account: &str) -> String {
    format!("{ROOT}/balances/{account}")
}

/// Runs the bank; checks that the total is conserved.
pub fn run(args: &[String]) -> AnyResult<Outcome> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("multi_lock on {}", options.describe());
    let tellers = (0..TELLERS)
        .map(|_| backend.try_connect())
        .collect::<zk_locks::Result<Vec<TestClient>>>()?;
    open_accounts(&tellers[0].client)?;

    thread::scope(|scope| -> AnyResult<()> {
        let handles: Vec<_> = tellers
            .iter()
            .enumerate()
            .map(|(teller, conn)| scope.spawn(move || transfers(teller, &conn.client)))
            .collect();
        for h in handles {
            h.join().map_err(|_| "a teller panicked")??;
        }
        Ok(())
    })?;

    let balances = ACCOUNTS
        .iter()
        .map(|a| read_balance(&tellers[0].client, a))
        .collect::<AnyResult<Vec<i64>>>()?;
    let total: i64 = balances.iter().sum();
    info!("balances {ACCOUNTS:?} = {balances:?}, total {total}");
    ensure(
        total == OPENING_BALANCE * ACCOUNTS.len() as i64,
        format!("money appeared or vanished: total {total}"),
    )?;

    let (timed_out_while_held, leftover_nodes) = all_or_nothing(&tellers[0], &tellers[1])?;
    for t in &tellers {
        t.client.close();
    }
    Ok(Outcome {
        balances,
        transfers: TELLERS * TRANSFERS_PER_TELLER,
        timed_out_while_held,
        leftover_nodes,
    })
}

/// Creates (or resets) every account at the opening balance.
fn open_accounts(client: &SharedClient) -> AnyResult<()> {
    for path in [
        "/zk-locks".to_string(),
        ROOT.to_string(),
        format!("{ROOT}/balances"),
    ] {
        match client.create(&path, b"", CreateMode::Persistent) {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(format!("create {path}: {e}").into()),
        }
    }
    for account in ACCOUNTS {
        let path = balance_path(account);
        let opening = OPENING_BALANCE.to_string();
        match client.create(&path, opening.as_bytes(), CreateMode::Persistent) {
            Ok(_) => {}
            Err(ZkError::NodeExists) => {
                client.set_data(&path, opening.as_bytes(), None)?;
            }
            Err(e) => return Err(format!("create {path}: {e}").into()),
        }
    }
    info!("opened {ACCOUNTS:?} with {OPENING_BALANCE} each");
    Ok(())
}

/// One teller's transfers: alternating directions over the account pairs, so tellers take
/// the same two locks in opposite "business" orders.
fn transfers(teller: usize, client: &SharedClient) -> AnyResult<()> {
    for n in 0..TRANSFERS_PER_TELLER {
        let i = (teller + n) % ACCOUNTS.len();
        let (from, to) = if (teller + n) % 2 == 0 {
            (ACCOUNTS[i], ACCOUNTS[(i + 1) % ACCOUNTS.len()])
        } else {
            (ACCOUNTS[(i + 1) % ACCOUNTS.len()], ACCOUNTS[i])
        };
        let amount = 1 + (teller * 7 + n * 3) as i64 % 10;
        let both =
            InterProcessMultiLock::from_paths(client.clone(), &[&lock_path(from), &lock_path(to)])?
                .ordered_by_path();
        let guard = both.lock()?;
        // Read-modify-write of two nodes with no version check: only the locks make it safe.
        let (a, b) = (read_balance(client, from)?, read_balance(client, to)?);
        client.set_data(
            &balance_path(from),
            (a - amount).to_string().as_bytes(),
            None,
        )?;
        client.set_data(&balance_path(to), (b + amount).to_string().as_bytes(), None)?;
        info!(
            "teller {teller} holds {from}+{to}: moves {amount} ({from} {a}→{}, {to} {b}→{})",
            a - amount,
            b + amount
        );
        guard.unlock()?;
    }
    Ok(())
}

fn read_balance(client: &SharedClient, account: &str) -> AnyResult<i64> {
    let (data, _) = client.get_data(&balance_path(account), None)?;
    Ok(std::str::from_utf8(&data)?.trim().parse()?)
}

/// One teller holds alice; another asks for alice+bob with a timeout, gives up, and holds
/// neither. Returns (gave up, nodes left under bob's lock).
fn all_or_nothing(holder: &TestClient, asker: &TestClient) -> AnyResult<(bool, usize)> {
    let alice = InterProcessMutex::new(holder.client.clone(), &lock_path("alice"))?;
    let held = alice.lock()?;
    info!("teller 0 holds alice (an audit)");
    let both = InterProcessMultiLock::from_paths(
        asker.client.clone(),
        &[&lock_path("bob"), &lock_path("alice")],
    )?;
    let got = both.try_lock_for(Duration::from_millis(200))?;
    let gave_up = got.is_none();
    drop(got);
    let bob = InterProcessMutex::new(asker.client.clone(), &lock_path("bob"))?;
    let leftover = bob.participant_nodes()?.len();
    info!(
        "teller 1 asked for bob+alice for 200 ms: {}; nodes left under bob's lock: {leftover}",
        if gave_up {
            "gave up, holding neither"
        } else {
            "got both?!"
        }
    );
    held.unlock()?;
    ensure(
        gave_up && leftover == 0,
        "the timed multi-lock did not give up cleanly",
    )?;
    Ok((gave_up, leftover))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_lock_conserves_money_and_gives_up_cleanly() {
        let outcome = run(&cookbook::memory_args()).unwrap();
        assert_eq!(outcome.balances.iter().sum::<i64>(), 300);
        assert!(outcome.transfers > 0);
        assert!(outcome.timed_out_while_held);
        assert_eq!(outcome.leftover_nodes, 0);
    }
}
