//! Our side: the recipes in this process, one client (one session) per contender, on our own
//! client (its round trips counted by `CountingClient`) or on the `zookeeper`-crate backend.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

use super::{summary, Run, Scenario, Side, SESSION_TIMEOUT};
use zk_locks::client::native::NativeClient;
use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::client::CountingClient;
use zk_locks::locks::{InterProcessReadWriteLock, InterProcessSemaphoreMutex};
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient, ZkClient};

/// Which client our recipes run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Backend {
    /// `client::native`.
    Native,
    /// `client::zookeeper` (the `zookeeper` crate).
    Crate,
}

/// zk-locks, in this process: one client (one session) per contender.
pub(super) struct OurSide {
    clients: Vec<SharedClient>,
    /// The same clients, for their round-trip counts (native client only: the crate backend
    /// waits for every request, so its round trips are its requests).
    counting: Vec<Arc<CountingClient<SharedClient>>>,
}

impl OurSide {
    pub(super) fn connect(
        connect: &str,
        sessions: usize,
        backend: Backend,
    ) -> Result<OurSide, String> {
        let clients = (0..sessions)
            .map(|_| {
                let client = match backend {
                    Backend::Native => {
                        NativeClient::connect(connect, SESSION_TIMEOUT).map(|c| c as SharedClient)
                    }
                    Backend::Crate => ZookeeperClient::connect(connect, SESSION_TIMEOUT)
                        .map(|c| c as SharedClient),
                };
                client.map_err(|e| format!("connecting to {connect}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if backend == Backend::Crate {
            return Ok(OurSide {
                clients,
                counting: Vec::new(),
            });
        }
        let counting: Vec<_> = clients
            .into_iter()
            .map(|c| Arc::new(CountingClient::new(c)))
            .collect();
        let clients = counting.iter().map(|c| c.clone() as SharedClient).collect();
        Ok(OurSide { clients, counting })
    }

    /// Round trips counted so far on every client (`None` when not counted).
    fn round_trips(&self) -> Option<u64> {
        (!self.counting.is_empty())
            .then(|| self.counting.iter().map(|c| c.counters().round_trips).sum())
    }

    /// `run` with the round trips made since `before`.
    fn with_round_trips(&self, mut run: Run, before: Option<u64>) -> Run {
        run.round_trips = self
            .round_trips()
            .zip(before)
            .map(|(after, before)| after - before);
        run
    }
}

/// A recipe's lock object (the read/write lock owns the pair its halves borrow from).
enum OurLock {
    Plain(Box<dyn InterProcessLock>),
    Write(InterProcessReadWriteLock),
    Read(InterProcessReadWriteLock),
}

impl OurLock {
    fn new(client: SharedClient, recipe: &str, path: &str) -> Result<OurLock, String> {
        let e = |e: zk_locks::Error| e.to_string();
        Ok(match recipe {
            "mutex" => OurLock::Plain(Box::new(InterProcessMutex::new(client, path).map_err(e)?)),
            "semaphore-mutex" => OurLock::Plain(Box::new(
                InterProcessSemaphoreMutex::new(client, path).map_err(e)?,
            )),
            "write" => OurLock::Write(InterProcessReadWriteLock::new(client, path).map_err(e)?),
            "read" => OurLock::Read(InterProcessReadWriteLock::new(client, path).map_err(e)?),
            other => return Err(format!("unknown recipe {other}")),
        })
    }

    fn get(&self) -> &dyn InterProcessLock {
        match self {
            OurLock::Plain(l) => l.as_ref(),
            OurLock::Write(rw) => rw.write_lock(),
            OurLock::Read(rw) => rw.read_lock(),
        }
    }
}

impl Side for OurSide {
    fn pid(&self) -> u32 {
        std::process::id()
    }

    fn run(&mut self, scenario: &Scenario, path: &str, n: usize) -> Result<Run, String> {
        match scenario {
            Scenario::RoundTrip => {
                let client = self.clients[0].clone();
                self.timed(n, || {
                    client
                        .exists(path)
                        .map(drop)
                        .map_err(|e| format!("exists: {e}"))
                })
            }
            Scenario::Uncontended(recipe) => {
                let lock = OurLock::new(self.clients[0].clone(), recipe, path)?;
                let lock = lock.get();
                self.timed(n, || {
                    lock.acquire()
                        .map_err(|e| format!("acquire {recipe}: {e}"))?;
                    lock.release().map_err(|e| format!("release {recipe}: {e}"))
                })
            }
            Scenario::Contended { recipe, sessions } => self.contended(recipe, path, *sessions, n),
        }
    }
}

impl OurSide {
    /// `n` operations `op` in a row, each one timed.
    fn timed(&self, n: usize, mut op: impl FnMut() -> Result<(), String>) -> Result<Run, String> {
        let mut samples = Vec::with_capacity(n);
        let before = self.round_trips();
        let start = Instant::now();
        for _ in 0..n {
            let t = Instant::now();
            op()?;
            samples.push(t.elapsed().as_nanos() as u64);
        }
        Ok(self.with_round_trips(summary(samples, start.elapsed()), before))
    }

    /// Mirrors `CuratorBench.contended`: the hand-off runs from the moment a holder calls
    /// release to the moment the next holder's acquire returns.
    fn contended(
        &mut self,
        recipe: &str,
        path: &str,
        sessions: usize,
        count: usize,
    ) -> Result<Run, String> {
        let clients = self
            .clients
            .get(..sessions)
            .ok_or_else(|| format!("{sessions} sessions: only {} connected", self.clients.len()))?;
        let base = Instant::now();
        let taken = Arc::new(AtomicU64::new(0));
        let released_at = Arc::new(AtomicU64::new(u64::MAX));
        let go = Arc::new(Barrier::new(sessions + 1));
        let threads: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(i, client)| {
                let recipe = super::mixed::contender_recipe(recipe, i).to_string();
                let (client, path) = (client.clone(), path.to_string());
                let (taken, released_at, go) = (taken.clone(), released_at.clone(), go.clone());
                thread::spawn(move || -> Result<Vec<u64>, String> {
                    // Built before the barrier, so that every contender starts together.
                    let lock = OurLock::new(client, &recipe, &path);
                    go.wait();
                    let lock = lock?;
                    let lock = lock.get();
                    let mut handoffs = Vec::with_capacity(count);
                    loop {
                        lock.acquire().map_err(|e| format!("acquire: {e}"))?;
                        let now = base.elapsed().as_nanos() as u64;
                        let prev = released_at.load(Ordering::SeqCst);
                        if prev != u64::MAX {
                            handoffs.push(now.saturating_sub(prev));
                        }
                        let total = taken.fetch_add(1, Ordering::SeqCst) + 1;
                        released_at.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                        lock.release().map_err(|e| format!("release: {e}"))?;
                        if total >= count as u64 {
                            return Ok(handoffs);
                        }
                    }
                })
            })
            .collect();
        let before = self.round_trips();
        go.wait();
        let start = Instant::now();
        let mut all = Vec::new();
        for t in threads {
            all.extend(t.join().map_err(|_| "a contender panicked".to_string())??);
        }
        let mut run = self.with_round_trips(summary(all, start.elapsed()), before);
        run.n = taken.load(Ordering::SeqCst);
        Ok(run)
    }
}
