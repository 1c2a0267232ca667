//! What is read while the phases run: this process's threads and resident memory
//! (`/proc/self/status`), and the server's view (children of the lock directories, through a
//! session of our own client; watches, through `wchs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::NativeClient;
use zk_locks::client::{Request, Response};
use zk_locks::ZkClient;

/// This process at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Process {
    /// OS threads (`Threads:`).
    pub threads: u64,
    /// Resident memory, bytes (`VmRSS:`).
    pub rss: u64,
}

impl Process {
    /// Reads `/proc/self/status` (zeros where it cannot: not Linux).
    pub fn now() -> Process {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| {
                    l.strip_prefix(name)?
                        .split_whitespace()
                        .next()?
                        .parse()
                        .ok()
                })
                .unwrap_or(0)
        };
        Process {
            threads: field("Threads:"),
            rss: field("VmRSS:") * 1024,
        }
    }
}

/// Returns freed heap to the OS before a baseline is read, so that memory one phase freed
/// (and the next would reuse) is not hidden from the next phase's growth.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(super) fn trim_heap() {
    // SAFETY: malloc_trim only returns free heap pages to the OS.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(super) fn trim_heap() {}

/// `/proc/loadavg`'s first three fields.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The server, as the measurement sees it: a session of its own and the four-letter words.
pub(super) struct Server {
    probe: Arc<NativeClient>,
    addr: SocketAddr,
}

/// Lock directories counted per request: a pipeline of this many `exists`.
const CHUNK: usize = 100;

impl Server {
    pub(super) fn connect(connect: &str, session_timeout: Duration) -> Result<Server, String> {
        let probe = NativeClient::connect(connect, session_timeout)
            .map_err(|e| format!("connecting to {connect}: {e}"))?;
        let first = connect.split(['/', ',']).next().unwrap_or(connect);
        let addr = std::net::ToSocketAddrs::to_socket_addrs(first)
            .map_err(|e| format!("resolving {first}: {e}"))?
            .next()
            .ok_or_else(|| format!("{first} resolves to nothing"))?;
        Ok(Server { probe, addr })
    }

    /// The server's client address.
    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The children of every directory in `dirs`, summed (a missing directory has none).
    pub(super) fn children(&self, dirs: &[String]) -> Result<usize, String> {
        let mut total = 0;
        for chunk in dirs.chunks(CHUNK) {
            let requests: Vec<Request> = chunk
                .iter()
                .map(|path| Request::Exists { path: path.clone() })
                .collect();
            for (path, reply) in chunk.iter().zip(self.probe.pipeline(&requests)) {
                match reply {
                    Ok(Response::Exists(Some(stat))) => total += stat.num_children.max(0) as usize,
                    Ok(Response::Exists(None)) => {}
                    Ok(other) => return Err(format!("exists {path}: answered {other:?}")),
                    Err(e) => return Err(format!("exists {path}: {e}")),
                }
            }
        }
        Ok(total)
    }

    /// Watches the server holds for every session (`wchs`'s total).
    pub(super) fn watches(&self) -> Result<u64, String> {
        let reply = zk_locks::testing::harness::four_letter(self.addr, "wchs")
            .map_err(|e| format!("wchs: {e}"))?;
        reply
            .lines()
            .find_map(|l| l.strip_prefix("Total watches:")?.trim().parse().ok())
            .ok_or_else(|| format!("no total in wchs: {reply}"))
    }

    /// Waits until `dirs` hold `nodes` children and the server holds `watches` watches: every
    /// waiter queued and watching the node ahead of it. The nodes must all be there within
    /// `bound`; the watches are waited for a further 10 s at most (a watch of an earlier
    /// phase that fires meanwhile would lower the total: not worth failing the run for).
    pub(super) async fn wait_queued(
        &self,
        dirs: &[String],
        nodes: usize,
        watches: u64,
        bound: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + bound;
        loop {
            let have = self.children(dirs)?;
            if have >= nodes {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "only {have} of {nodes} nodes queued within {bound:?}"
                ));
            }
            // Polling what the server builds from many sessions: nothing to be woken by.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.watches()? < watches && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Waits until the children of `dirs` stop changing (the same count for `quiet`, or none
    /// left) and returns that count; within `bound`, else the last count read.
    pub(super) async fn settle(
        &self,
        dirs: &[String],
        quiet: Duration,
        bound: Duration,
    ) -> Result<usize, String> {
        let deadline = Instant::now() + bound;
        let mut last = self.children(dirs)?;
        let mut since = Instant::now();
        while last > 0 && since.elapsed() < quiet && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.children(dirs)?;
            if now != last {
                (last, since) = (now, Instant::now());
            }
        }
        Ok(last)
    }

    /// Waits until `dirs` have no children left, polling every 10 ms (on the driver's thread,
    /// not a runtime worker), within `bound`; the count left then.
    pub(super) async fn drained(&self, dirs: &[String], bound: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + bound;
        loop {
            let left = self.children(dirs)?;
            if left == 0 || Instant::now() > deadline {
                return Ok(left);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(super) fn close(&self) {
        self.probe.close();
    }
}
