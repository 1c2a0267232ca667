//! Two holders at once? zk-locks against Curator 5.4 when the leader expires a holder's
//! session that still hears from its member (issue 32): the holder's follower cut off from a
//! namespaced 3-member ensemble (tickTime 2 s, syncLimit 5; sessions 4 s and 12 s), and the
//! holder's link frozen past its session (4 s and 10 s); a waiter takes the mutex as soon as
//! the server lets it. Prints a markdown table of the overlap (the waiter's acquisition until
//! the holder stopped: zk-locks when its guard leaves `Held`, Curator on `LOST` or on
//! `SUSPENDED`) and the load average. The engine is `zk_locks_measurements::overlap`.
//!
//! ```text
//! cargo run --release --features testing --example overlap [-- --trials N] [--no-curator]
//!     [--partition-only | --frozen-only]
//! ```
//!
//! `--trials N` per fault, session and library (default 3: about 10 minutes). The partition
//! needs root and `ip` (skipped with a note elsewhere); everything needs Java 17, Debian's
//! ZooKeeper 3.8 and Curator jars (`scripts/test.sh`).

use std::process::ExitCode;

use zk_locks_measurements::overlap;

fn main() -> ExitCode {
    let mut plan = overlap::Plan::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--trials" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => plan.trials = n,
                _ => {
                    eprintln!("overlap: --trials needs a number > 0");
                    return ExitCode::FAILURE;
                }
            },
            "--no-curator" => plan.curator = false,
            "--partition-only" => plan.frozen_sessions.clear(),
            "--frozen-only" => plan.partition_sessions.clear(),
            other => {
                eprintln!("overlap: unknown argument {other}");
                return ExitCode::FAILURE;
            }
        }
    }
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load_before = load();
    match overlap::run(&plan) {
        Ok(trials) => {
            println!("{}", overlap::render(&trials));
            println!(
                "load average: {} before, {} after",
                load_before.trim(),
                load().trim()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("overlap: {e}");
            ExitCode::FAILURE
        }
    }
}
