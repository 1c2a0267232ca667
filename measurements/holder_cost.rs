//! What proving holders' sessions to the quorum costs: 20 sessions on a 3-member
//! `TestingCluster` (loopback), idle, then holding one lock each, then 1,000 locks among them,
//! then idle again; per window the requests the members received (`mntr`), above idle and per
//! session (the design: `24/T` per session, whatever the number of locks), and the CPU of the
//! leader's JVM and of every member (`/proc`). Prints a markdown table and the load average.
//! The engine is `zk_locks_measurements::holder_cost`.
//!
//! ```text
//! cargo run --release --features testing --example holder_cost \
//!     [-- --sessions 20] [--locks 1000] [--seconds 60] [--timeout-ms 10000]
//! ```
//!
//! About `4 × seconds` plus a minute. Needs Java 17 and Debian's ZooKeeper 3.8
//! (`scripts/test.sh` installs them).

use std::process::ExitCode;
use std::time::Duration;

use zk_locks::testing::TestingCluster;
use zk_locks_measurements::holder_cost::{self, Plan, Servers};

fn parse(plan: &mut Plan) -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = || -> Result<u64, String> {
            args.next()
                .and_then(|n| n.parse().ok())
                .filter(|&n| n > 0)
                .ok_or(format!("{arg} needs a number > 0"))
        };
        match arg.as_str() {
            "--sessions" => plan.sessions = number()? as usize,
            "--locks" => plan.locks = number()? as usize,
            "--seconds" => plan.window = Duration::from_secs(number()?),
            "--timeout-ms" => plan.session_timeout = Duration::from_millis(number()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut plan = Plan::default();
    if let Err(e) = parse(&mut plan) {
        eprintln!("holder_cost: {e}");
        return ExitCode::FAILURE;
    }
    // The members grant the session the plan asks for, up to any length (ZooKeeper's own
    // longest, twenty ticks of 500 ms, is 10 s; its least, 1 s, stays).
    let cluster = match TestingCluster::builder(3)
        .max_session_timeout(plan.session_timeout.max(Duration::from_secs(10)))
        .start()
    {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("holder_cost: cannot start a ZooKeeper cluster: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(leader) = cluster.leader() else {
        eprintln!("holder_cost: no leader");
        return ExitCode::FAILURE;
    };
    let servers = Servers {
        connect: cluster.connect_string(),
        members: (0..cluster.len()).map(|i| cluster.address(i)).collect(),
        leader,
    };
    match holder_cost::run(&servers, &plan, "/holder-cost") {
        Ok(report) => {
            println!("{}", holder_cost::render(&report));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("holder_cost: {e}");
            ExitCode::FAILURE
        }
    }
}
