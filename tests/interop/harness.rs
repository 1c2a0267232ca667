//! The harness: Curator processes driven line by line, Rust clients, critical-section
//! records on one clock and the exclusion checker.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

use zk_locks::client::native::NativeClient;
use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::locks::{
    InterProcessLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2,
};
use zk_locks::testing::harness::{eventually, unique_root};
use zk_locks::testing::{curator, shared_server};
use zk_locks::{SharedClient, ZkClient};

/// How long any one step may take (a JVM start on a loaded 2-core box included).
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);
/// Critical sections per contender in the contention scenarios.
pub(crate) const ROUNDS: usize = 8;

/// CLOCK_MONOTONIC in nanoseconds: the clock Java's `System.nanoTime()` reads on Linux.
pub(crate) fn mono_nanos() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The compiled Java side, or `None` (skip) without Java/Curator; compiled once per process.
pub(crate) fn classes() -> Option<&'static Path> {
    static CLASSES: OnceLock<Option<PathBuf>> = OnceLock::new();
    CLASSES
        .get_or_init(|| {
            if !curator::require_curator() {
                return None;
            }
            let out = std::env::temp_dir().join(format!("zk-locks-interop-{}", std::process::id()));
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
            let sources = [dir.join("Interop.java"), dir.join("Leader.java")];
            curator::compile(&sources, &out).expect("compile tests/interop/*.java");
            Some(out)
        })
        .as_deref()
}

/// Server connect string and compiled classes, or `None` to skip.
pub(crate) fn setup() -> Option<(String, &'static Path)> {
    let classes = classes()?;
    let server = shared_server()?;
    Some((server.connect_string(), classes))
}

/// A Rust session on our own client (the recommended backend).
pub(crate) fn rust_client(connect: &str) -> Arc<NativeClient> {
    NativeClient::connect(connect, Duration::from_secs(10)).expect("connect")
}

/// The shared TLS test server as both runtimes reach it: its secure connect string, the CA
/// file (Curator's `INTEROP_TLS_CA`), and a maker of Rust sessions over TLS to it.
#[cfg(feature = "tls")]
pub(crate) struct TlsTarget {
    pub(crate) connect: String,
    pub(crate) ca: PathBuf,
}

#[cfg(feature = "tls")]
impl TlsTarget {
    pub(crate) fn shared() -> TlsTarget {
        let server = zk_locks::testing::shared_tls_server().expect("a TLS server");
        TlsTarget {
            connect: server.secure_connect_string().unwrap(),
            ca: server.tls_files().unwrap().ca,
        }
    }

    /// A Rust session over TLS (our own client, session 10 s).
    pub(crate) fn client(&self) -> Arc<NativeClient> {
        use zk_locks::client::native::{NativeOptions, TlsOptions};
        let options = NativeOptions::new(&self.connect)
            .session_timeout(Duration::from_secs(10))
            .tls(TlsOptions::from_ca_file(&self.ca).unwrap());
        NativeClient::connect_with(options).expect("connect over TLS")
    }

    /// Curator's environment for it.
    pub(crate) fn env(&self) -> [(&'static str, &str); 1] {
        [("INTEROP_TLS_CA", self.ca.to_str().unwrap())]
    }
}

/// A Rust session on the `zookeeper`-crate backend.
pub(crate) fn crate_client(connect: &str) -> Arc<ZookeeperClient> {
    ZookeeperClient::connect(connect, Duration::from_secs(10)).expect("connect")
}

/// One Curator process, driven line by line.
pub(crate) struct Jvm {
    child: Child,
    stdin: ChildStdin,
    pub(crate) lines: Receiver<String>,
}

impl Jvm {
    pub(crate) fn spawn(classes: &Path, args: &[&str]) -> Jvm {
        Jvm::spawn_with_env(classes, args, &[])
    }

    /// The leader-election side (`Leader.java`) with `args` and extra environment variables
    /// (`INTEROP_TLS_CA=ca.pem`: TLS, as for [`Jvm::spawn_with_env`]).
    pub(crate) fn spawn_leader(classes: &Path, args: &[&str], env: &[(&str, &str)]) -> Jvm {
        Jvm::spawn_class(classes, "Leader", args, env)
    }

    /// Kills the process now (SIGKILL, as `kill -9`) and reaps it.
    pub(crate) fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// As [`Jvm::spawn`], with extra environment variables (`INTEROP_DIGEST=user:password`
    /// turns on digest credentials and `CREATOR_ALL_ACL`; `INTEROP_TLS_CA=ca.pem` TLS, which
    /// also puts the Netty jars on the class path).
    pub(crate) fn spawn_with_env(classes: &Path, args: &[&str], env: &[(&str, &str)]) -> Jvm {
        Jvm::spawn_class(classes, "Interop", args, env)
    }

    /// Class `main` of `classes` with `args` and extra environment variables `env`.
    fn spawn_class(classes: &Path, main: &str, args: &[&str], env: &[(&str, &str)]) -> Jvm {
        let tls = env.iter().any(|(k, _)| *k == "INTEROP_TLS_CA");
        let command = if tls {
            curator::java_tls(classes, main)
        } else {
            curator::java(classes, main)
        };
        let mut command = command.expect("java command");
        command.envs(env.iter().copied());
        Jvm::spawn_command(command, args)
    }

    /// Starts `command` with `args`, its stdout read line by line.
    fn spawn_command(mut command: std::process::Command, args: &[&str]) -> Jvm {
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start java");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Jvm {
            child,
            stdin,
            lines,
        }
    }

    /// The next line, which must start with `prefix`.
    pub(crate) fn expect(&self, prefix: &str) -> String {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) if line.starts_with(prefix) => line,
            Ok(line) => panic!("expected {prefix:?} from Curator, got {line:?}"),
            Err(e) => panic!("no {prefix:?} from Curator ({e}); see its stderr above"),
        }
    }

    /// Every line up to (not including) `end`.
    pub(crate) fn until(&self, end: &str) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) if line == end => return out,
                Ok(line) => out.push(line),
                Err(e) => panic!("no {end:?} from Curator ({e}) after {out:?}"),
            }
        }
    }

    pub(crate) fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to java");
        self.stdin.flush().unwrap();
    }

    pub(crate) fn finish(mut self) {
        let mut status = None;
        eventually(PATIENCE, "the Curator process exits", || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        assert!(
            status.unwrap().success(),
            "Curator process failed: {status:?}"
        );
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One enter or exit of a critical section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) at: i64,
    pub(crate) enter: bool,
    /// `x` exclusive/lease, `r` read, `w` write.
    pub(crate) kind: char,
    pub(crate) who: String,
}

impl Record {
    pub(crate) fn now(enter: bool, kind: char, who: &str) -> Record {
        Record {
            at: mono_nanos(),
            enter,
            kind,
            who: who.to_string(),
        }
    }

    /// `<enter|exit> <kind> <who> <nanos>` as Interop.java prints it.
    pub(crate) fn parse(line: &str) -> Record {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 4, "bad record {line:?}");
        Record {
            enter: f[0] == "enter",
            kind: f[1].chars().next().unwrap(),
            who: f[2].to_string(),
            at: f[3].parse().expect("nanos"),
        }
    }
}

/// Checks the merged records: at most `max` holders at once, and a writer alone. Returns the
/// peak number of holders and how often the holder changed between JVM and Rust, or the first
/// violation with the records around it.
pub(crate) fn check(mut records: Vec<Record>, max: usize) -> Result<(usize, usize), String> {
    // At equal times, exits first: a section that ends when the next begins is no overlap.
    records.sort_by_key(|r| (r.at, r.enter));
    let (mut holders, mut writers, mut peak, mut switches) = (0usize, 0usize, 0usize, 0usize);
    let mut last_side = None;
    for (i, r) in records.iter().enumerate() {
        if !r.enter {
            holders -= 1;
            writers -= usize::from(r.kind == 'w');
            continue;
        }
        holders += 1;
        writers += usize::from(r.kind == 'w');
        let violation = if holders > max {
            Some(format!("{holders} holders (max {max})"))
        } else if writers > 0 && holders > 1 {
            Some("a writer overlaps another holder".to_string())
        } else {
            None
        };
        if let Some(what) = violation {
            let context = &records[i.saturating_sub(6)..(i + 1).min(records.len())];
            return Err(format!("{what}:\n{context:#?}"));
        }
        peak = peak.max(holders);
        let side = r.who.starts_with("jvm");
        if last_side.is_some_and(|s| s != side) {
            switches += 1;
        }
        last_side = Some(side);
    }
    Ok((peak, switches))
}

/// The recipe a contention scenario runs on both sides.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Recipe {
    Mutex,
    ReadWrite,
    Semaphore(usize),
}

/// Two Curator processes and two Rust sessions (one per Rust backend) with two threads each
/// run `ROUNDS` critical sections on one path, started together; returns every record.
pub(crate) fn contend(connect: &str, classes: &Path, recipe: Recipe) -> Vec<Record> {
    let sessions: Vec<SharedClient> = vec![rust_client(connect), crate_client(connect)];
    contend_with(connect, classes, recipe, &[], sessions)
}

/// As [`contend`], with the Curator processes' environment (see [`Jvm::spawn_with_env`]) and
/// the Rust sessions given: four Rust threads take turns on them.
pub(crate) fn contend_with(
    connect: &str,
    classes: &Path,
    recipe: Recipe,
    jvm_env: &[(&str, &str)],
    sessions: Vec<SharedClient>,
) -> Vec<Record> {
    contend_as(connect, classes, recipe, jvm_env, sessions, false)
}

/// As [`contend`], the Rust side taking the locks through the async API (each of its four
/// contenders a task on a runtime of its own thread).
pub(crate) fn contend_async(connect: &str, classes: &Path, recipe: Recipe) -> Vec<Record> {
    let sessions: Vec<SharedClient> = vec![rust_client(connect), rust_client(connect)];
    contend_as(connect, classes, recipe, &[], sessions, true)
}

fn contend_as(
    connect: &str,
    classes: &Path,
    recipe: Recipe,
    jvm_env: &[(&str, &str)],
    sessions: Vec<SharedClient>,
    asynchronous: bool,
) -> Vec<Record> {
    let root = unique_root("interop");
    let (name, max) = match recipe {
        Recipe::Mutex => ("mutex", 1),
        Recipe::ReadWrite => ("rw", 1),
        Recipe::Semaphore(n) => ("sem", n),
    };
    let before = mono_nanos();
    let rounds = ROUNDS.to_string();
    let max_arg = max.to_string();
    let mut jvms: Vec<Jvm> = (0..2)
        .map(|i| {
            let id = format!("jvm{i}");
            Jvm::spawn_with_env(
                classes,
                &["loop", connect, name, &root, &rounds, &id, &max_arg],
                jvm_env,
            )
        })
        .collect();
    for jvm in &jvms {
        let clock: i64 = jvm.expect("CLOCK ")[6..].parse().unwrap();
        let after = mono_nanos();
        assert!(
            before <= clock && clock <= after,
            "System.nanoTime() ({clock}) is not CLOCK_MONOTONIC ({before}..{after})"
        );
        jvm.expect("READY");
    }
    let start = Arc::new(Barrier::new(5));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let client = sessions[t % sessions.len()].clone();
            let root = root.clone();
            let start = start.clone();
            std::thread::spawn(move || match asynchronous {
                false => rust_contender(client, &root, recipe, t, &start),
                true => async_contender(client, &root, recipe, t, &start),
            })
        })
        .collect();
    start.wait();
    for jvm in &mut jvms {
        jvm.send("GO");
    }
    let mut records: Vec<Record> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("rust contender"))
        .collect();
    for jvm in jvms {
        records.extend(jvm.until("DONE").iter().map(|l| Record::parse(l)));
        jvm.finish();
    }
    assert_eq!(records.len(), 6 * ROUNDS * 2, "every section recorded");
    records
}

pub(crate) fn rust_contender(
    client: SharedClient,
    root: &str,
    recipe: Recipe,
    thread: usize,
    start: &Barrier,
) -> Vec<Record> {
    let who = format!("rust{thread}");
    let mut records = Vec::with_capacity(2 * ROUNDS);
    let hold_briefly = || std::thread::sleep(Duration::from_millis(1));
    match recipe {
        Recipe::Mutex => {
            let mutex = InterProcessMutex::new(client, root).unwrap();
            start.wait();
            for _ in 0..ROUNDS {
                let guard = mutex.lock().unwrap();
                records.push(Record::now(true, 'x', &who));
                hold_briefly();
                records.push(Record::now(false, 'x', &who));
                drop(guard);
            }
        }
        Recipe::ReadWrite => {
            let rw = InterProcessReadWriteLock::new(client, root).unwrap();
            start.wait();
            for i in 0..ROUNDS {
                let write = (i + thread) % 3 == 0;
                let kind = if write { 'w' } else { 'r' };
                if write {
                    let g = rw.write_lock().lock().unwrap();
                    records.push(Record::now(true, kind, &who));
                    hold_briefly();
                    records.push(Record::now(false, kind, &who));
                    drop(g);
                } else {
                    let g = rw.read_lock().lock().unwrap();
                    records.push(Record::now(true, kind, &who));
                    hold_briefly();
                    records.push(Record::now(false, kind, &who));
                    drop(g);
                }
            }
        }
        Recipe::Semaphore(max) => {
            let semaphore = InterProcessSemaphoreV2::new(client, root, max).unwrap();
            start.wait();
            for _ in 0..ROUNDS {
                let lease = semaphore.acquire().unwrap();
                records.push(Record::now(true, 'x', &who));
                hold_briefly();
                records.push(Record::now(false, 'x', &who));
                lease.close().unwrap();
            }
        }
    }
    records
}

/// [`rust_contender`] through the async API: `lock_owned_async` and `acquire_async`, polled
/// by a tokio runtime of this thread.
pub(crate) fn async_contender(
    client: SharedClient,
    root: &str,
    recipe: Recipe,
    thread: usize,
    start: &Barrier,
) -> Vec<Record> {
    let who = format!("rust{thread}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut records = Vec::with_capacity(2 * ROUNDS);
    let section = |records: &mut Vec<Record>, kind| {
        records.push(Record::now(true, kind, &who));
        std::thread::sleep(Duration::from_millis(1));
        records.push(Record::now(false, kind, &who));
    };
    match recipe {
        Recipe::Mutex => {
            let mutex = Arc::new(InterProcessMutex::new(client, root).unwrap());
            start.wait();
            for _ in 0..ROUNDS {
                let guard = runtime.block_on(mutex.lock_owned_async()).unwrap();
                section(&mut records, 'x');
                runtime.block_on(guard.unlock_async()).unwrap();
            }
        }
        Recipe::ReadWrite => {
            let rw = InterProcessReadWriteLock::new(client, root).unwrap();
            let (reads, writes) = (rw.read_lock_arc(), rw.write_lock_arc());
            start.wait();
            for i in 0..ROUNDS {
                if (i + thread) % 3 == 0 {
                    let guard = runtime.block_on(writes.lock_owned_async()).unwrap();
                    section(&mut records, 'w');
                    runtime.block_on(guard.unlock_async()).unwrap();
                } else {
                    let guard = runtime.block_on(reads.lock_owned_async()).unwrap();
                    section(&mut records, 'r');
                    runtime.block_on(guard.unlock_async()).unwrap();
                }
            }
        }
        Recipe::Semaphore(max) => {
            let semaphore = Arc::new(InterProcessSemaphoreV2::new(client, root, max).unwrap());
            start.wait();
            for _ in 0..ROUNDS {
                let lease = runtime.block_on(semaphore.acquire_async()).unwrap();
                section(&mut records, 'x');
                runtime.block_on(lease.close_async()).unwrap();
            }
        }
    }
    records
}

/// Children of `path` (empty when missing or not allowed).
pub(crate) fn children(c: &dyn ZkClient, path: &str) -> Vec<String> {
    c.get_children(path, None).unwrap_or_default()
}

/// True for Curator's protected name `_c_<uuid>-<lock name><10-digit sequence>`.
pub(crate) fn paths_look_like_curator(path: &str, lock_name: &str) -> bool {
    let name = zk_locks::paths::node_name(path);
    name.len() == 40 + lock_name.len() + 10
        && name.starts_with("_c_")
        && uuid::Uuid::parse_str(&name[3..39]).is_ok()
        && name[39..].starts_with(&format!("-{lock_name}"))
}
