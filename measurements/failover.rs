//! Failover: zk-locks against Curator 5.4 on a 3-member `TestingCluster` (a holder and two
//! waiters looping on one mutex, one client per member, session 10 s) while a fault strikes:
//! kill -9 the leader, kill -9 the holder's member, SIGSTOP the holder's member for 2 s. Prints
//! markdown tables: longest gap with no acquisition and the holder's next acquisition (p50 /
//! p90 over the trials, times from the fault, ratios zk-locks / Curator), then errors, lost
//! sessions, overlapping holds and connect attempts per reconnecting session. The engine is
//! `zk_locks_measurements::failover`.
//!
//! ```text
//! cargo run --release --features testing --example failover [-- --trials N] [--no-curator]
//! ```
//!
//! `--trials N` per fault per library (default 3: a few minutes; docs/performance.md's table uses
//! 20-30). Needs Java 17, Debian's ZooKeeper 3.8 and Curator jars (`scripts/test.sh`).

use std::process::ExitCode;

use zk_locks_measurements::failover;

fn main() -> ExitCode {
    let mut plan = failover::Plan::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--trials" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => plan.trials = n,
                _ => {
                    eprintln!("failover: --trials needs a number > 0");
                    return ExitCode::FAILURE;
                }
            },
            "--no-curator" => plan.curator = false,
            other => {
                eprintln!("failover: unknown argument {other}");
                return ExitCode::FAILURE;
            }
        }
    }
    match failover::run(&plan) {
        Ok(results) => {
            failover::print_report(&results);
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            println!("\nload average: {}", load.trim());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("failover: {e}");
            ExitCode::FAILURE
        }
    }
}
