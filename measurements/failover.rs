//! Failover: zk-locks against Curator 5.4 on a 3-member `TestingCluster` (a holder and two
//! waiters looping on one mutex, one client per member, session 10 s) while a fault strikes:
//! kill -9 the leader, kill -9 the holder's member, SIGSTOP the holder's member or a waiter's
//! for 0.5, 2 or 5 s. Prints markdown tables: longest gap with no acquisition and the struck
//! client's next acquisition (p50 / p90 over the trials, times from the fault, ratios
//! zk-locks / Curator), then errors, lost sessions, overlapping holds and connect attempts per
//! reconnecting session. The engine is `zk_locks_measurements::failover`.
//!
//! With `--elections`, leader election instead: three `LeaderLatch` participants per library,
//! each an OS process of its own (ours: this program again, in participant mode; Curator's: a
//! JVM each), while the leader's process is killed, the leader closes, or its member is
//! killed: how long until a participant leads again, two leaders at once, requests per
//! election, and while the leader's member is frozen: how long until the leader is served
//! again (`zk_locks_measurements::failover::election`).
//!
//! With `--freezes`, only the freezes (in either mode); with `--kills`, only the kills (the
//! mutex mode); with `--only TEXT`, only the faults whose label contains TEXT (the mutex mode).
//!
//! ```text
//! cargo run --release --features testing --example failover [-- --trials N] [--no-curator] [--elections] [--freezes | --kills] [--only TEXT] [--svg DIR]
//! ```
//!
//! `--trials N` per fault per library (default 3: a few minutes; docs/performance.md's table uses
//! 20-30). `--svg DIR` also draws the medians and 90th percentiles as an SVG bar chart in DIR
//! (`failover-gaps.svg`, `failover-freezes.svg`; with `--elections`, `election-failover.svg` and `election-kill.svg`). Needs Java 17, Debian's ZooKeeper 3.8 and Curator jars (`scripts/test.sh`).

use std::process::ExitCode;

use zk_locks::testing::TestingCluster;
use zk_locks_measurements::chart;
use zk_locks_measurements::failover::{self, election};

fn main() -> ExitCode {
    // Re-executed as one election participant (`--elections` spawns them).
    if let Some(status) = election::participant_main() {
        return ExitCode::from(status as u8);
    }
    let mut plan = failover::Plan::default();
    let mut elections = false;
    let mut freezes = false;
    let mut kills = false;
    let mut only: Option<String> = None;
    let mut svg: Option<std::path::PathBuf> = None;
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
            "--freezes" => freezes = true,
            "--kills" => kills = true,
            "--only" => match args.next() {
                Some(text) => only = Some(text),
                None => {
                    eprintln!("failover: --only needs the text of a fault's label");
                    return ExitCode::FAILURE;
                }
            },
            "--elections" => elections = true,
            "--svg" => match args.next() {
                Some(dir) => svg = Some(dir.into()),
                None => {
                    eprintln!("failover: --svg needs a directory");
                    return ExitCode::FAILURE;
                }
            },
            other => {
                eprintln!("failover: unknown argument {other}");
                return ExitCode::FAILURE;
            }
        }
    }
    match (freezes, kills) {
        (true, true) => {
            eprintln!("failover: --freezes and --kills exclude each other (neither: both)");
            return ExitCode::FAILURE;
        }
        (true, false) => plan.faults = failover::Fault::freezes(),
        (false, true) => plan.faults = failover::Fault::KILLS.to_vec(),
        (false, false) => {}
    }
    if let Some(text) = &only {
        plan.faults.retain(|f| f.label().contains(text.as_str()));
        if plan.faults.is_empty() {
            eprintln!("failover: no fault's label contains {text:?}");
            return ExitCode::FAILURE;
        }
    }
    let draw = |charts: Vec<(&str, chart::Bars)>| match &svg {
        None => Ok(()),
        Some(dir) => charts
            .iter()
            .try_for_each(|(name, c)| chart::write(dir, name, c)),
    };
    let done = if elections {
        run_elections(&plan, freezes)
            .and_then(|results| draw(failover::charts::election_charts(&results)))
    } else {
        failover::run(&plan).and_then(|results| {
            failover::print_report(&results);
            draw(failover::charts::charts(&results))
        })
    };
    match done {
        Ok(()) => {
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

/// The `--elections` mode, on a cluster of its own.
fn run_elections(plan: &failover::Plan, freezes: bool) -> Result<Vec<election::Series>, String> {
    let cluster = TestingCluster::start(3).map_err(|e| e.to_string())?;
    let ours = std::env::current_exe().map_err(|e| e.to_string())?;
    let class_dir = std::env::temp_dir().join(format!("zk-locks-election-{}", std::process::id()));
    let mut election_plan = election::Plan {
        trials: plan.trials,
        ..election::Plan::default()
    };
    if freezes {
        election_plan.faults = election::Fault::freezes();
    }
    let curator_classes = if plan.curator {
        election::Launcher::compile_curator(&class_dir)?;
        Some(class_dir.clone())
    } else {
        election_plan.libraries = vec![election::Library::Ours];
        None
    };
    let launcher = election::Launcher {
        ours,
        curator_classes,
    };
    let target = election::Target {
        connect: cluster.connect_string(),
        members: (0..cluster.len()).map(|m| cluster.address(m)).collect(),
        cluster: Some(&cluster),
    };
    let results = election::run(&target, &election_plan, &launcher);
    let _ = std::fs::remove_dir_all(class_dir);
    let results = results?;
    println!("{}", election::render(&results));
    Ok(results)
}
