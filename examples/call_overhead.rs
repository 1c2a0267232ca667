//! Measures the per-call cost of the deadline mechanism: `exists` through `ZookeeperClient`
//! (worker-pool hand-off + deadline) against the bare `zookeeper` crate, on one server.
//!
//! `cargo run --release --features testing --example call_overhead [iterations]`

use std::time::{Duration, Instant};

use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::testing::TestingServer;
use zk_locks::ZkClient;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5000);
    let server = TestingServer::start().expect("server");
    let ours = ZookeeperClient::connect(&server.connect_string(), Duration::from_secs(10)).unwrap();
    let bare =
        zookeeper::ZooKeeper::connect(&server.connect_string(), Duration::from_secs(10), |_| {})
            .unwrap();
    // Wait for the bare client's session.
    while bare.exists("/", false).is_err() {}
    for round in 0..3 {
        let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let t = Instant::now();
            bare.exists("/zookeeper", false).unwrap();
            a.push(t.elapsed());
            let t = Instant::now();
            ours.exists("/zookeeper").unwrap();
            b.push(t.elapsed());
        }
        let (ma, mb) = (median(a), median(b));
        println!(
            "round {round}: median exists: bare crate {:.1} µs, ZookeeperClient {:.1} µs, overhead {:.1} µs",
            ma.as_secs_f64() * 1e6,
            mb.as_secs_f64() * 1e6,
            (mb.as_secs_f64() - ma.as_secs_f64()) * 1e6
        );
    }
}
