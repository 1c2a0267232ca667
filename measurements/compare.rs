//! zk-locks against Curator 5.4, side by side, in one run against one ZooKeeper server:
//! uncontended acquire+release latency per recipe, contended throughput and hand-off latency
//! (mutex with 2/4/8 sessions, semaphore mutex and write lock with 4), and the server's
//! requests and the clients' round trips per operation. Prints a markdown table (ratios are
//! zk-locks / Curator) and the machine facts. The engine is `zk_locks_measurements::compare`.
//! With `--queue`, then the long queues (1,000 waiters over 20 sessions, 200 over 200: drain
//! rate, hand-off, requests and notifications, memory per waiter; about 2 minutes more);
//! `--queue-only` runs only those; `--queues=W/S,W/S` runs those queues instead (W waiters over S
//! sessions), to find where the machine stops. `--svg DIR` also draws the tables as SVG bar
//! charts in DIR (`compare-latency.svg`, `compare-handoff.svg`, `compare-contended.svg`, and
//! with the queues `queue-drain.svg`, `queue-memory.svg`; docs/img/ holds the published ones).
//!
//! ```text
//! cargo run --release --features testing --example compare [-- --quick] [--queue | --queue-only] [--svg DIR]
//! ZK_CONNECT=host:2181 cargo run --release --features testing --example compare
//! ```
//!
//! Without `ZK_CONNECT` it starts its own `TestingServer` (Debian's ZooKeeper 3.8, fsync off).
//! Needs Java 17 and Debian's Curator jars (`scripts/test.sh` installs them).

use std::path::PathBuf;
use std::process::ExitCode;

use zk_locks::testing::TestingServer;
use zk_locks_measurements::compare as bench;

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let queue_only = std::env::args().any(|a| a == "--queue-only");
    let queue =
        queue_only || std::env::args().any(|a| a == "--queue" || a.starts_with("--queues="));
    let svg: Option<PathBuf> = match std::env::args().position(|a| a == "--svg") {
        None => None,
        Some(i) => match std::env::args().nth(i + 1) {
            Some(dir) => Some(dir.into()),
            None => {
                eprintln!("compare: --svg needs a directory");
                return ExitCode::FAILURE;
            }
        },
    };
    let draw = |charts: Vec<(&str, zk_locks_measurements::chart::Bars)>| -> Result<(), String> {
        match &svg {
            None => Ok(()),
            Some(dir) => charts.iter().try_for_each(|(name, chart)| {
                zk_locks_measurements::chart::write(dir, name, chart)
            }),
        }
    };
    let plan = if quick {
        bench::Plan::quick()
    } else {
        bench::Plan::full()
    };
    // Keep the server alive for the whole run when we start it.
    let (server, connect) = match std::env::var("ZK_CONNECT") {
        Ok(connect) => (None, connect),
        Err(_) => match TestingServer::start() {
            Ok(server) => {
                let connect = server.connect_string();
                (Some(server), connect)
            }
            Err(e) => {
                eprintln!("compare: cannot start a ZooKeeper server: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let class_dir = std::env::temp_dir().join(format!("zk-locks-compare-{}", std::process::id()));
    let result = match queue_only {
        true => Ok(String::new()),
        false => bench::run(&connect, &plan, &class_dir).and_then(|r| {
            draw(bench::charts::charts(&r))?;
            Ok(bench::render(&r))
        }),
    };
    let result = result.and_then(|table| {
        let mut queues = match (queue, quick) {
            (false, _) => return Ok(table),
            (true, true) => bench::queue::QueuePlan::quick(),
            (true, false) => bench::queue::QueuePlan::full(),
        };
        if let Some(sizes) =
            std::env::args().find_map(|a| a.strip_prefix("--queues=").map(String::from))
        {
            queues.queues = parse_queues(&sizes)?;
        }
        let report = bench::queue::run_queues(&connect, &queues, &class_dir)?;
        draw(bench::charts::queue_charts(&report))?;
        Ok(format!("{table}\n{}", bench::queue::render_queues(&report)))
    });
    let _ = std::fs::remove_dir_all(&class_dir);
    drop(server);
    match result {
        Ok(table) => {
            println!("{table}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("compare: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `W/S,W/S`: waiters over sessions.
fn parse_queues(sizes: &str) -> Result<Vec<bench::queue::Queue>, String> {
    sizes
        .split(',')
        .map(|q| {
            let (w, s) = q.split_once('/').ok_or(format!("{q}: not W/S"))?;
            let parse = |n: &str| n.trim().parse::<usize>().map_err(|e| format!("{q}: {e}"));
            Ok(bench::queue::Queue {
                waiters: parse(w)?,
                sessions: parse(s)?.max(1),
            })
        })
        .collect()
}
