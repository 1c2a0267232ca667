//! The two holders: zk-locks in this process (it stops when its guard leaves `Held`), Curator
//! 5.4 in a JVM (`OverlapBench.java`: the first `SUSPENDED` and the first `LOST` are timed,
//! the moments an application that stops on either would stop). Both time with
//! `CLOCK_MONOTONIC`, as the waiter and the fault do.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, OwnedLockGuard};
use zk_locks::{LockState, SharedClient, ZkClient};

use crate::failover::mono_ns;
use crate::java_driver::JavaDriver;

/// When a holder stops believing it holds the lock, by the rule its application follows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ends {
    /// zk-locks: the guard left `Held` (`wait_while_held` returned).
    pub left_held: Option<u64>,
    /// Curator: the first `SUSPENDED`.
    pub suspended: Option<u64>,
    /// Curator: the first `LOST`.
    pub lost: Option<u64>,
}

/// One library's holder of one mutex.
pub trait Holder {
    /// The library's name in the report.
    fn name(&self) -> &'static str;
    /// A new session on `connect` (timeout `session`) takes the mutex at `path`; when.
    fn hold(&mut self, connect: &str, session: Duration, path: &str) -> Result<u64, String>;
    /// Waits at most `within` for the holder to stop (zk-locks: leave `Held`; Curator: `LOST`).
    fn ends(&mut self, within: Duration) -> Result<Ends, String>;
    /// Closes the session.
    fn close(&mut self) -> Result<(), String>;
}

/// A zk-locks holder in this process.
#[derive(Default)]
pub struct Ours {
    client: Option<SharedClient>,
    left_held: Option<mpsc::Receiver<u64>>,
}

impl Holder for Ours {
    fn name(&self) -> &'static str {
        "zk-locks"
    }

    fn hold(&mut self, connect: &str, session: Duration, path: &str) -> Result<u64, String> {
        let client: SharedClient = NativeClient::connect_with(
            NativeOptions::new(connect)
                .session_timeout(session)
                .connect_timeout(Duration::from_secs(30)),
        )
        .map_err(|e| e.to_string())?;
        let mutex =
            Arc::new(InterProcessMutex::new(client.clone(), path).map_err(|e| e.to_string())?);
        let guard: OwnedLockGuard<InterProcessMutex> =
            mutex.lock_owned().map_err(|e| e.to_string())?;
        let acquired = mono_ns();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            if guard.wait_while_held(None) != LockState::Held {
                let _ = tx.send(mono_ns());
            }
            // The guard drops here, after the holder stopped: its release may fail, no matter.
        });
        self.client = Some(client);
        self.left_held = Some(rx);
        Ok(acquired)
    }

    fn ends(&mut self, within: Duration) -> Result<Ends, String> {
        let rx = self.left_held.as_ref().ok_or("nothing held")?;
        Ok(Ends {
            left_held: rx.recv_timeout(within).ok(),
            ..Ends::default()
        })
    }

    fn close(&mut self) -> Result<(), String> {
        if let Some(client) = self.client.take() {
            client.close();
        }
        self.left_held = None;
        Ok(())
    }
}

/// A Curator 5.4 holder in a JVM.
pub struct Curator {
    driver: JavaDriver,
}

impl Curator {
    /// Compiles `OverlapBench.java` into `class_dir` and starts it.
    pub fn start(class_dir: &Path) -> Result<Curator, String> {
        let source =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/overlap/OverlapBench.java");
        let driver = JavaDriver::start(&[source], "OverlapBench", &[], class_dir)?;
        Ok(Curator { driver })
    }

    fn command(&mut self, command: &str, answer: &str) -> Result<String, String> {
        self.driver.send_line(command)?;
        let line = self.driver.read_line()?;
        line.strip_prefix(answer)
            .map(|rest| rest.trim().to_string())
            .ok_or_else(|| format!("{}, on {command:?}: {line}", self.driver.class()))
    }

    /// Closes its client and waits for the JVM to exit.
    pub fn quit(self) {
        self.driver.quit();
    }
}

impl Holder for Curator {
    fn name(&self) -> &'static str {
        "Curator"
    }

    fn hold(&mut self, connect: &str, session: Duration, path: &str) -> Result<u64, String> {
        let ms = session.as_millis();
        let at = self.command(&format!("hold {connect} {ms} {path}"), "HELD")?;
        at.parse().map_err(|_| format!("OverlapBench: HELD {at}"))
    }

    fn ends(&mut self, within: Duration) -> Result<Ends, String> {
        let rest = self.command(&format!("ends {}", within.as_millis()), "ENDS")?;
        let at = |s: Option<&str>| s.and_then(|v| v.parse::<i64>().ok()).filter(|&v| v >= 0);
        let mut fields = rest.split_whitespace();
        let (suspended, lost) = (at(fields.next()), at(fields.next()));
        Ok(Ends {
            suspended: suspended.map(|v| v as u64),
            lost: lost.map(|v| v as u64),
            ..Ends::default()
        })
    }

    fn close(&mut self) -> Result<(), String> {
        self.command("close", "OK").map(drop)
    }
}
