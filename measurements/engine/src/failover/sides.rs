//! The two libraries under test, each as three clients looping on one mutex: zk-locks in
//! this process (native client), Curator 5.4 in a JVM (`FailoverBench.java`, driven line by
//! line). Both record every hold with the same clock (`CLOCK_MONOTONIC`, which Java's
//! `System.nanoTime` reads on Linux), so the times compare with the fault's.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

use super::SESSION_TIMEOUT;
use crate::java_driver::JavaDriver;

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// One hold: client, acquired, released (ns, [`mono_ns`]).
pub type Hold = (usize, u64, u64);

/// What a side reports when its loops stop.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Every hold, in the order recorded.
    pub holds: Vec<Hold>,
    /// Acquire or release calls that failed.
    pub errors: u64,
    /// Sessions lost (Curator: LOST events).
    pub lost: u64,
    /// Connect attempts per client since `start`.
    pub attempts: Vec<u64>,
}

/// A library's clients, driven the same way on both sides.
pub trait Side {
    /// The library's name in the report.
    fn name(&self) -> &'static str;
    /// Opens client `i` again (closing the old one); its session id.
    fn open(&mut self, i: usize) -> Result<i64, String>;
    /// Every client loops acquire / hold / release on `path`.
    fn start(&mut self, path: &str, hold: Duration) -> Result<(), String>;
    /// The client holding the lock now.
    fn holder(&mut self) -> Result<Option<usize>, String>;
    /// Stops the loops (each finishes its hold) and reports.
    fn stop(&mut self) -> Result<Outcome, String>;
    /// Closes every client.
    fn close(&mut self) -> Result<(), String>;
}

/// zk-locks on its own client, in this process.
pub struct Ours {
    connect: String,
    clients: Vec<Option<Arc<NativeClient>>>,
    running: Arc<AtomicBool>,
    holder: Arc<AtomicI64>,
    errors: Arc<AtomicU64>,
    holds: Arc<Mutex<Vec<Hold>>>,
    loops: Vec<JoinHandle<()>>,
    base: Vec<(u64, u64)>,
}

impl Ours {
    /// `n` clients (not open yet) for `connect`.
    pub fn new(connect: &str, n: usize) -> Ours {
        Ours {
            connect: connect.into(),
            clients: vec![None; n],
            running: Arc::default(),
            holder: Arc::new(AtomicI64::new(-1)),
            errors: Arc::default(),
            holds: Arc::default(),
            loops: Vec::new(),
            base: Vec::new(),
        }
    }
}

impl Side for Ours {
    fn name(&self) -> &'static str {
        "zk-locks"
    }

    fn open(&mut self, i: usize) -> Result<i64, String> {
        if let Some(old) = self.clients[i].take() {
            old.close();
        }
        let client = NativeClient::connect_with(
            NativeOptions::new(self.connect.as_str()).session_timeout(SESSION_TIMEOUT),
        )
        .map_err(|e| e.to_string())?;
        let id = client.session().snapshot().session_id.unwrap_or(0);
        self.clients[i] = Some(client);
        Ok(id)
    }

    fn start(&mut self, path: &str, hold: Duration) -> Result<(), String> {
        self.holds.lock().clear();
        self.errors.store(0, Ordering::SeqCst);
        self.running.store(true, Ordering::SeqCst);
        self.base.clear();
        for (i, client) in self.clients.iter().enumerate() {
            let client = client.clone().ok_or("client not open")?;
            self.base.push((
                client.connect_attempts(),
                client.session().snapshot().losses,
            ));
            let lock =
                InterProcessMutex::new(client as SharedClient, path).map_err(|e| e.to_string())?;
            let (running, holder, errors, holds) = (
                self.running.clone(),
                self.holder.clone(),
                self.errors.clone(),
                self.holds.clone(),
            );
            self.loops.push(std::thread::spawn(move || {
                while running.load(Ordering::SeqCst) {
                    match lock.acquire_timeout(Duration::from_millis(500)) {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(_) => {
                            errors.fetch_add(1, Ordering::SeqCst);
                            continue;
                        }
                    }
                    let acquired = mono_ns();
                    holder.store(i as i64, Ordering::SeqCst);
                    std::thread::sleep(hold);
                    holder.store(-1, Ordering::SeqCst);
                    let released = mono_ns();
                    if lock.release().is_err() {
                        errors.fetch_add(1, Ordering::SeqCst);
                    }
                    holds.lock().push((i, acquired, released));
                }
            }));
        }
        Ok(())
    }

    fn holder(&mut self) -> Result<Option<usize>, String> {
        Ok(usize::try_from(self.holder.load(Ordering::SeqCst)).ok())
    }

    fn stop(&mut self) -> Result<Outcome, String> {
        self.running.store(false, Ordering::SeqCst);
        for handle in self.loops.drain(..) {
            let _ = handle.join();
        }
        let mut outcome = Outcome {
            holds: std::mem::take(&mut *self.holds.lock()),
            errors: self.errors.load(Ordering::SeqCst),
            ..Outcome::default()
        };
        let journal = std::env::var_os("FAILOVER_JOURNAL").is_some();
        let now = std::time::Instant::now();
        let now_ns = mono_ns();
        for (i, (client, (attempts, losses))) in self.clients.iter().zip(&self.base).enumerate() {
            let client = client.as_ref().ok_or("client not open")?;
            if journal {
                // Diagnostics: each client's recent link events, on the holds' clock.
                for (at, event) in client.link_journal() {
                    let ns =
                        now_ns.saturating_sub(now.saturating_duration_since(at).as_nanos() as u64);
                    eprintln!("journal {i} {ns} {event}");
                }
            }
            outcome.attempts.push(client.connect_attempts() - attempts);
            outcome.lost += client.session().snapshot().losses - losses;
        }
        Ok(outcome)
    }

    fn close(&mut self) -> Result<(), String> {
        for client in self.clients.iter_mut() {
            if let Some(c) = client.take() {
                c.close();
            }
        }
        Ok(())
    }
}

/// Curator 5.4 in a JVM.
pub struct Curator {
    driver: JavaDriver,
}

impl Curator {
    /// Compiles `FailoverBench.java` into `class_dir` and starts it for `n` clients.
    pub fn start(connect: &str, n: usize, class_dir: &Path) -> Result<Curator, String> {
        let source =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/failover/FailoverBench.java");
        let args = [connect.to_string(), n.to_string()];
        let driver = JavaDriver::start(&[source], "FailoverBench", &args, class_dir)?;
        Ok(Curator { driver })
    }

    fn read_line(&mut self) -> Result<String, String> {
        self.driver.read_line()
    }

    fn command(&mut self, command: &str) -> Result<String, String> {
        self.driver.send_line(command)?;
        let line = self.read_line()?;
        if line.starts_with("ERROR") {
            return Err(format!("{}, on {command:?}: {line}", self.driver.class()));
        }
        Ok(line)
    }

    /// Closes its clients and waits for the JVM to exit.
    pub fn quit(self) {
        self.driver.quit();
    }
}

impl Side for Curator {
    fn name(&self) -> &'static str {
        "Curator"
    }

    fn open(&mut self, i: usize) -> Result<i64, String> {
        let line = self.command(&format!("open {i}"))?;
        line.split_whitespace()
            .nth(2)
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .map(|id| id as i64)
            .ok_or_else(|| format!("FailoverBench: {line}"))
    }

    fn start(&mut self, path: &str, hold: Duration) -> Result<(), String> {
        self.command(&format!("start {path} {}", hold.as_millis()))
            .map(drop)
    }

    fn holder(&mut self) -> Result<Option<usize>, String> {
        let line = self.command("holder")?;
        let h: i64 = line
            .strip_prefix("HOLDER ")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("FailoverBench: {line}"))?;
        Ok(usize::try_from(h).ok())
    }

    fn stop(&mut self) -> Result<Outcome, String> {
        let mut line = self.command("stop")?;
        let mut outcome = Outcome::default();
        while let Some(rest) = line.strip_prefix("ACQ ") {
            let v: Vec<u64> = rest.split(' ').filter_map(|x| x.parse().ok()).collect();
            if let [i, a, r] = v[..] {
                outcome.holds.push((i as usize, a, r));
            }
            line = self.read_line()?;
        }
        let rest = line
            .strip_prefix("END ")
            .ok_or_else(|| format!("FailoverBench: {line}"))?;
        for field in rest.split(' ') {
            match field.split_once('=') {
                Some(("errors", v)) => outcome.errors = v.parse().unwrap_or(0),
                Some(("lost", v)) => outcome.lost = v.parse().unwrap_or(0),
                Some(("attempts", v)) => {
                    outcome.attempts = v.split(',').filter_map(|x| x.parse().ok()).collect()
                }
                _ => {}
            }
        }
        Ok(outcome)
    }

    fn close(&mut self) -> Result<(), String> {
        self.command("close").map(drop)
    }
}
