//! What TLS costs an uncontended mutex: one `TestingServer` with a plain and a TLS port, one
//! client on each, and the same loop of acquire + release on each; prints p50 and p99.
//!
//! ```sh
//! cargo run --release --features tls --example tls_cost [ROUNDS]
//! ```

use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions, TlsOptions};
use zk_locks::testing::TestingServer;
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn measure(client: SharedClient, rounds: usize) -> Result<Vec<Duration>, zk_locks::Error> {
    let path = format!("/tls-cost-{}", uuid::Uuid::new_v4());
    let mutex = InterProcessMutex::new(client, &path)?;
    // Warm-up: creates the lock directory and warms both ends.
    for _ in 0..50 {
        mutex.acquire()?;
        mutex.release()?;
    }
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        mutex.acquire()?;
        mutex.release()?;
        samples.push(start.elapsed());
    }
    samples.sort_unstable();
    Ok(samples)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(1000), |a| a.parse())?;
    let server = TestingServer::start_tls()?;
    let files = server.tls_files().ok_or("no TLS files")?;
    let timeout = Duration::from_secs(10);
    let plain: SharedClient = NativeClient::connect(&server.connect_string(), timeout)?;
    let tls: SharedClient = NativeClient::connect_with(
        NativeOptions::new(server.secure_connect_string().ok_or("no TLS port")?)
            .session_timeout(timeout)
            .tls(TlsOptions::from_ca_file(&files.ca)?),
    )?;
    // Interleaved twice, so that neither side gets a warmer JVM.
    for round in 1..=2 {
        for (name, client) in [("plain", plain.clone()), ("tls", tls.clone())] {
            let samples = measure(client, rounds)?;
            println!(
                "round {round} {name:<5} acquire+release x{rounds}: p50 {:>7.1} µs  p99 {:>7.1} µs",
                percentile(&samples, 0.5).as_secs_f64() * 1e6,
                percentile(&samples, 0.99).as_secs_f64() * 1e6
            );
        }
    }
    Ok(())
}
