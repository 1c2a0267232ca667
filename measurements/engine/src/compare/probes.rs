//! What is read from the server (`mntr`, `srvr`, through the four-letter words) and from the
//! machine (CPU, load average).

use std::net::{SocketAddr, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use super::Machine;

/// The first server of a connect string (for the four-letter words).
pub(super) fn first_address(connect: &str) -> Result<SocketAddr, String> {
    let hosts = connect.split('/').next().unwrap_or(connect);
    let first = hosts.split(',').next().unwrap_or(hosts);
    let first = if first.contains(':') {
        first.to_string()
    } else {
        format!("{first}:2181")
    };
    first
        .to_socket_addrs()
        .map_err(|e| format!("resolving {first}: {e}"))?
        .next()
        .ok_or_else(|| format!("{first} resolves to nothing"))
}

fn four_letter(addr: SocketAddr, cmd: &str) -> Result<String, String> {
    zk_locks::testing::harness::four_letter(addr, cmd).map_err(|e| e.to_string())
}

/// The server's `zk_packets_received`: every request any client sent (pings included).
pub(super) fn packets_received(addr: SocketAddr) -> Result<u64, String> {
    let reply = four_letter(addr, "mntr")?;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("zk_packets_received")?.trim().parse().ok())
        .ok_or_else(|| format!("no zk_packets_received in mntr (is mntr whitelisted?): {reply}"))
}

/// Packets per second while nothing runs: sessions' pings and heartbeats.
pub(super) fn idle_rate(addr: SocketAddr) -> Result<f64, String> {
    let window = Duration::from_millis(1500);
    let before = packets_received(addr)?;
    let start = Instant::now();
    thread::sleep(window); // measuring a rate over wall time, not synchronising
    let after = packets_received(addr)?;
    Ok(after.saturating_sub(before) as f64 / start.elapsed().as_secs_f64())
}

pub(super) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

pub(super) fn machine(addr: SocketAddr) -> Result<Machine, String> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let srvr = four_letter(addr, "srvr")?;
    let zookeeper = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version:"))
        .map(|v| v.split(',').next().unwrap_or(v).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    Ok(Machine {
        nproc: thread::available_parallelism().map_or(1, |n| n.get()),
        cpu,
        zookeeper,
        ..Machine::default()
    })
}
