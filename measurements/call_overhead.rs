//! Measures the per-call cost of each client on one server: `exists` through our own client
//! (`NativeClient`: the caller writes, the reader thread hands the reply back), through
//! `ZookeeperClient` (worker-pool hand-off + deadline over the `zookeeper` crate), and through
//! the bare `zookeeper` crate. Calls alternate between the clients so that load changes hit
//! all alike; p50 and p99 per round.
//!
//! `cargo run --release --features testing --example call_overhead [iterations]`

use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::testing::TestingServer;
use zk_locks::ZkClient;

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: usize| v[(v.len() * q / 100).min(v.len() - 1)].as_secs_f64() * 1e6;
    (at(50), at(99))
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5000);
    let server = TestingServer::start().expect("server");
    let connect = server.connect_string();
    let native = NativeClient::connect(&connect, Duration::from_secs(10)).unwrap();
    let pooled = ZookeeperClient::connect(&connect, Duration::from_secs(10)).unwrap();
    let bare = zookeeper::ZooKeeper::connect(&connect, Duration::from_secs(10), |_| {}).unwrap();
    // Wait for the bare client's session.
    while bare.exists("/", false).is_err() {}
    for round in 0..3 {
        let (mut b, mut p, mut o) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for _ in 0..n {
            let t = Instant::now();
            bare.exists("/zookeeper", false).unwrap();
            b.push(t.elapsed());
            let t = Instant::now();
            pooled.exists("/zookeeper").unwrap();
            p.push(t.elapsed());
            let t = Instant::now();
            native.exists("/zookeeper").unwrap();
            o.push(t.elapsed());
        }
        let ((b50, b99), (p50, p99), (o50, o99)) = (percentiles(b), percentiles(p), percentiles(o));
        println!(
            "round {round}: exists p50/p99 µs: NativeClient {o50:.1}/{o99:.1}, \
             ZookeeperClient {p50:.1}/{p99:.1}, bare crate {b50:.1}/{b99:.1}"
        );
    }
}
