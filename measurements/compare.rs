//! zk-locks against Curator 5.4, side by side, in one run against one ZooKeeper server:
//! uncontended acquire+release latency per recipe, contended throughput and hand-off latency
//! (mutex with 2/4/8 sessions, semaphore mutex and write lock with 4), and the server's
//! requests and the clients' round trips per operation. Prints a markdown table (ratios are
//! zk-locks / Curator) and the machine facts. The engine is `zk_locks_measurements::compare`.
//!
//! ```text
//! cargo run --release --features testing --example compare [-- --quick]
//! ZK_CONNECT=host:2181 cargo run --release --features testing --example compare
//! ```
//!
//! Without `ZK_CONNECT` it starts its own `TestingServer` (Debian's ZooKeeper 3.8, fsync off).
//! Needs Java 17 and Debian's Curator jars (`scripts/test.sh` installs them).

use std::process::ExitCode;

use zk_locks::testing::TestingServer;
use zk_locks_measurements::compare as bench;

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
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
    let result = bench::run(&connect, &plan, &class_dir);
    let _ = std::fs::remove_dir_all(&class_dir);
    drop(server);
    match result {
        Ok(report) => {
            println!("{}", bench::render(&report));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("compare: {e}");
            ExitCode::FAILURE
        }
    }
}
