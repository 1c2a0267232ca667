//! Interoperability with Apache Curator 5.4 (Debian's jars): Rust and JVM processes contend on
//! the same paths and must exclude each other, queue behind each other, revoke each other, and
//! list and sort each other's nodes identically.
//!
//! The JVM side is `tests/interop/Interop.java`, compiled once per test process with `javac`.
//! Critical sections are recorded on both sides with CLOCK_MONOTONIC nanoseconds
//! (`clock_gettime` here, `System.nanoTime()` in OpenJDK on Linux, checked below) and merged;
//! the checker then counts holders over time.
//!
//! Needs Java, javac, ZooKeeper and Curator: skipped when missing, a failure when
//! `ZK_LOCKS_REQUIRE_SERVER=1` (CI).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

use common::{eventually, unique_root};
use zk_locks::client::acl::AclProvider;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::locks::{
    sort_children, standard_sort_key, Decision, InterProcessLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreV2, LockDriver, Revoker, READ_LOCK_NAME,
    WRITE_LOCK_NAME,
};
use zk_locks::testing::{curator, shared_server};
use zk_locks::{SharedClient, ZkClient, ZkError};

const PATIENCE: Duration = Duration::from_secs(60);
/// Critical sections per contender in the contention scenarios.
const ROUNDS: usize = 8;

// ---------------------------------------------------------------------------------------------
// Harness

/// CLOCK_MONOTONIC in nanoseconds: the clock Java's `System.nanoTime()` reads on Linux.
fn mono_nanos() -> i64 {
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
fn classes() -> Option<&'static Path> {
    static CLASSES: OnceLock<Option<PathBuf>> = OnceLock::new();
    CLASSES
        .get_or_init(|| {
            if !curator::require_curator() {
                return None;
            }
            let out = std::env::temp_dir().join(format!("zk-locks-interop-{}", std::process::id()));
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/Interop.java");
            curator::compile(&[source], &out).expect("compile tests/interop/Interop.java");
            Some(out)
        })
        .as_deref()
}

/// Server connect string and compiled classes, or `None` to skip.
fn setup() -> Option<(String, &'static Path)> {
    let classes = classes()?;
    let server = shared_server()?;
    Some((server.connect_string(), classes))
}

/// A Rust session on our own client (the recommended backend).
fn rust_client(connect: &str) -> Arc<NativeClient> {
    NativeClient::connect(connect, Duration::from_secs(10)).expect("connect")
}

/// A Rust session on the `zookeeper`-crate backend.
fn crate_client(connect: &str) -> Arc<ZookeeperClient> {
    ZookeeperClient::connect(connect, Duration::from_secs(10)).expect("connect")
}

/// One Curator process, driven line by line.
struct Jvm {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Jvm {
    fn spawn(classes: &Path, args: &[&str]) -> Jvm {
        Jvm::spawn_with_env(classes, args, &[])
    }

    /// As [`Jvm::spawn`], with extra environment variables (`INTEROP_DIGEST=user:password`
    /// turns on digest credentials and `CREATOR_ALL_ACL`).
    fn spawn_with_env(classes: &Path, args: &[&str], env: &[(&str, &str)]) -> Jvm {
        let mut child = curator::java(classes, "Interop")
            .expect("java command")
            .args(args)
            .envs(env.iter().copied())
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
    fn expect(&self, prefix: &str) -> String {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) if line.starts_with(prefix) => line,
            Ok(line) => panic!("expected {prefix:?} from Curator, got {line:?}"),
            Err(e) => panic!("no {prefix:?} from Curator ({e}); see its stderr above"),
        }
    }

    /// Every line up to (not including) `end`.
    fn until(&self, end: &str) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) if line == end => return out,
                Ok(line) => out.push(line),
                Err(e) => panic!("no {end:?} from Curator ({e}) after {out:?}"),
            }
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to java");
        self.stdin.flush().unwrap();
    }

    fn finish(mut self) {
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
struct Record {
    at: i64,
    enter: bool,
    /// `x` exclusive/lease, `r` read, `w` write.
    kind: char,
    who: String,
}

impl Record {
    fn now(enter: bool, kind: char, who: &str) -> Record {
        Record {
            at: mono_nanos(),
            enter,
            kind,
            who: who.to_string(),
        }
    }

    /// `<enter|exit> <kind> <who> <nanos>` as Interop.java prints it.
    fn parse(line: &str) -> Record {
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
fn check(mut records: Vec<Record>, max: usize) -> Result<(usize, usize), String> {
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
enum Recipe {
    Mutex,
    ReadWrite,
    Semaphore(usize),
}

/// Two Curator processes and two Rust sessions with two threads each run `ROUNDS` critical
/// sections on one path, started together; returns every record.
fn contend(connect: &str, classes: &Path, recipe: Recipe) -> Vec<Record> {
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
            Jvm::spawn(
                classes,
                &["loop", connect, name, &root, &rounds, &id, &max_arg],
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
    // One session per Rust backend: both contend with Curator and with each other.
    let sessions: Vec<SharedClient> = vec![rust_client(connect), crate_client(connect)];
    let start = Arc::new(Barrier::new(5));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let client = sessions[t % 2].clone();
            let root = root.clone();
            let start = start.clone();
            std::thread::spawn(move || rust_contender(client, &root, recipe, t, &start))
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

fn rust_contender(
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

// ---------------------------------------------------------------------------------------------
// Mutual exclusion across Rust and Curator

#[test]
fn mutex_excludes_across_rust_and_curator() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let records = contend(&connect, classes, Recipe::Mutex);
    let (peak, switches) = check(records, 1).unwrap();
    assert_eq!(peak, 1);
    eprintln!("mutex: holder changed side {switches} times");
}

#[test]
fn read_write_lock_excludes_writers_across_rust_and_curator() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let records = contend(&connect, classes, Recipe::ReadWrite);
    for (side, kind) in [("jvm", 'w'), ("jvm", 'r'), ("rust", 'w'), ("rust", 'r')] {
        assert!(
            records
                .iter()
                .any(|r| r.who.starts_with(side) && r.kind == kind),
            "no {kind} section from {side}"
        );
    }
    let (peak, switches) = check(records, usize::MAX).unwrap();
    eprintln!("read/write: peak {peak} holders, holder changed side {switches} times");
}

#[test]
fn semaphore_v2_grants_at_most_3_across_rust_and_curator() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let records = contend(&connect, classes, Recipe::Semaphore(3));
    let (peak, switches) = check(records, 3).unwrap();
    eprintln!("semaphore(3): peak {peak} holders, holder changed side {switches} times");
}

#[test]
fn the_checker_catches_overlaps() {
    let r = |at, enter, kind: char, who: &str| Record {
        at,
        enter,
        kind,
        who: who.into(),
    };
    let ok = vec![
        r(1, true, 'x', "a"),
        r(2, false, 'x', "a"),
        r(2, true, 'x', "b"),
        r(3, false, 'x', "b"),
    ];
    assert_eq!(check(ok, 1).unwrap().0, 1);
    let overlap = vec![
        r(1, true, 'x', "a"),
        r(2, true, 'x', "b"),
        r(3, false, 'x', "a"),
        r(4, false, 'x', "b"),
    ];
    assert!(check(overlap.clone(), 1).is_err());
    assert_eq!(check(overlap, 2).unwrap().0, 2);
    let writer_with_reader = vec![
        r(1, true, 'r', "a"),
        r(2, true, 'w', "b"),
        r(3, false, 'r', "a"),
        r(4, false, 'w', "b"),
    ];
    assert!(check(writer_with_reader, usize::MAX)
        .unwrap_err()
        .contains("writer"));
}

// ---------------------------------------------------------------------------------------------
// Queueing, participants and sort order

fn children(c: &dyn ZkClient, path: &str) -> Vec<String> {
    c.get_children(path, None).unwrap_or_default()
}

/// Each side waits behind the other's node, wakes on its deletion, and lists the same queue.
#[test]
fn mutex_queues_across_sides_and_both_list_the_same_participants() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let root = unique_root("interop-queue");
    let holder_client: SharedClient = rust_client(&connect);
    let holder = InterProcessMutex::new(holder_client.clone(), &root).unwrap();
    let guard = holder.lock().unwrap();

    // Curator queues behind Rust's holder ...
    let mut jvm = Jvm::spawn(classes, &["hold", &connect, "mutex", &root]);
    eventually(PATIENCE, "Curator's node queues", || {
        children(holder_client.as_ref(), &root).len() == 2
    });
    // ... and a Rust waiter behind Curator's node.
    let waiter_client: SharedClient = rust_client(&connect);
    let waiter = Arc::new(InterProcessMutex::new(waiter_client, &root).unwrap());
    let waiting = {
        let waiter = waiter.clone();
        std::thread::spawn(move || {
            let got = waiter.acquire_timeout(PATIENCE).unwrap();
            if got {
                waiter.release().unwrap();
            }
            got
        })
    };
    eventually(PATIENCE, "the Rust waiter queues", || {
        children(holder_client.as_ref(), &root).len() == 3
    });
    let rust_view = holder.participant_nodes().unwrap();
    assert_eq!(rust_view[0], guard.node_path().unwrap());
    drop(guard);

    // Curator wakes on the Rust holder's deletion.
    let held = jvm.expect("HELD ");
    let curator_node = held["HELD ".len()..].to_string();
    assert_eq!(
        curator_node, rust_view[1],
        "Curator got the lock in queue order"
    );
    assert!(
        paths_look_like_curator(&curator_node, "lock-"),
        "{curator_node}"
    );

    jvm.send("LIST");
    let curator_view: Vec<String> = jvm
        .until("END")
        .iter()
        .map(|l| l.strip_prefix("P ").expect("P line").to_string())
        .collect();
    let rust_view = waiter.participant_nodes().unwrap();
    assert_eq!(curator_view, rust_view, "both sides list the same queue");
    assert_eq!(rust_view.len(), 2);

    // The Rust waiter wakes on Curator's release.
    jvm.send("RELEASE");
    jvm.expect("RELEASED");
    assert!(waiting.join().unwrap(), "the Rust waiter got the lock");
    jvm.finish();
}

fn paths_look_like_curator(path: &str, lock_name: &str) -> bool {
    let name = zk_locks::paths::node_name(path);
    name.len() == 40 + lock_name.len() + 10
        && name.starts_with("_c_")
        && uuid::Uuid::parse_str(&name[3..39]).is_ok()
        && name[39..].starts_with(&format!("-{lock_name}"))
}

/// Curator's read/write sort (its `SortingLockInternalsDriver`), built from the public
/// pieces the library sorts with.
#[derive(Debug)]
struct ReadWriteOrder;

impl LockDriver for ReadWriteOrder {
    fn lock_name(&self) -> &str {
        READ_LOCK_NAME
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        standard_sort_key(standard_sort_key(child, READ_LOCK_NAME), WRITE_LOCK_NAME)
    }

    fn decide(&self, _sorted: &[String], _our_index: usize) -> Decision {
        Decision::Acquired
    }
}

/// Curator holds write + a downgrade read node (same sequence); Rust and Curator queue
/// writers and readers behind; both sides must list and sort the directory identically.
#[test]
fn read_write_nodes_sort_identically_on_both_sides() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let root = unique_root("interop-rw-order");
    let observer: SharedClient = rust_client(&connect);
    let mut jvm = Jvm::spawn(classes, &["hold", &connect, "downgrade", &root]);
    let write_node = jvm.expect("HELD ")["HELD ".len()..].to_string();
    assert!(paths_look_like_curator(&write_node, WRITE_LOCK_NAME));
    assert_eq!(children(observer.as_ref(), &root).len(), 2);

    let rust_client_rw: SharedClient = rust_client(&connect);
    let rw = Arc::new(InterProcessReadWriteLock::new(rust_client_rw, &root).unwrap());
    let queue = |write: bool| {
        let rw = rw.clone();
        std::thread::spawn(move || {
            let lock: &dyn InterProcessLock = if write {
                rw.write_lock()
            } else {
                rw.read_lock()
            };
            let got = lock.acquire_timeout(PATIENCE).unwrap();
            if got {
                lock.release().unwrap();
            }
            got
        })
    };
    // Queue: [jvm W0, jvm R0 (downgrade)], rust W, jvm R, rust R.
    let rust_writer = queue(true);
    eventually(PATIENCE, "the Rust writer queues", || {
        children(observer.as_ref(), &root).len() == 3
    });
    jvm.send("QUEUE-READ");
    eventually(PATIENCE, "the Curator reader queues", || {
        children(observer.as_ref(), &root).len() == 4
    });
    let rust_reader = queue(false);
    eventually(PATIENCE, "the Rust reader queues", || {
        children(observer.as_ref(), &root).len() == 5
    });

    jvm.send("LIST");
    let listing = jvm.until("END");
    let side = |tag: &str| -> Vec<String> {
        listing
            .iter()
            .filter_map(|l| l.strip_prefix(tag))
            .map(str::to_string)
            .collect()
    };
    let (curator_reads, curator_writes, curator_sorted) = (side("R "), side("W "), side("S "));
    assert_eq!(curator_reads, rw.read_lock().participant_nodes().unwrap());
    assert_eq!(curator_writes, rw.write_lock().participant_nodes().unwrap());
    assert_eq!(curator_reads.len(), 3);
    assert_eq!(curator_writes.len(), 2);

    let mut rust_sorted = children(observer.as_ref(), &root);
    sort_children(&ReadWriteOrder, &mut rust_sorted);
    assert_eq!(curator_sorted.len(), 5);
    let keys = |v: &[String]| -> Vec<String> {
        v.iter()
            .map(|n| ReadWriteOrder.sort_key(n).to_string())
            .collect()
    };
    assert_eq!(keys(&curator_sorted), keys(&rust_sorted));
    // The downgrade read node shares the write node's sequence, so the two tie; each side's
    // stable sort keeps the order its own listing returned.
    let mut a = curator_sorted.clone();
    let mut b = rust_sorted.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let ws = WRITE_LOCK_NAME;
    let head: Vec<&String> = curator_sorted[..2].iter().collect();
    assert!(
        head.iter().any(|n| n.contains(ws)) && head.iter().any(|n| n.contains(READ_LOCK_NAME)),
        "Curator's write and downgrade read nodes lead: {curator_sorted:?}"
    );
    assert!(curator_sorted[2].contains(ws), "then the Rust writer");

    // Curator 5.4 gives the downgrade read node a fresh sequence (the write node's own
    // sequence only came with CURATOR-621 in 5.5); zk-locks uses the write node's. Either way
    // Curator's two nodes lead the queue.
    let downgrade_read = curator_sorted[..2]
        .iter()
        .find(|n| n.contains(READ_LOCK_NAME))
        .unwrap();
    let shares_sequence =
        ReadWriteOrder.sort_key(downgrade_read) == ReadWriteOrder.sort_key(&write_node);
    eprintln!("Curator's downgrade read node shares the write node's sequence: {shares_sequence}");

    // `zklock holders` reads the same queue.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zklock"))
        .args(["holders", "--connect", &connect, &root])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listing = String::from_utf8_lossy(&out.stdout);
    let states: Vec<(&str, &str, &str)> = listing
        .lines()
        .map(|l| {
            let mut f = l.split_whitespace();
            (f.next().unwrap(), f.next().unwrap(), f.next().unwrap())
        })
        .collect();
    let names: Vec<&str> = states.iter().map(|s| s.2).collect();
    assert_eq!(names, curator_sorted, "{listing}");
    assert_eq!(states[0].0, "holder", "{listing}");
    // From outside, a 5.4 downgrade read node behind its own writer looks queued: only the
    // owning thread knows it holds the read lock through its write lock.
    let downgrade_state = if shares_sequence { "holder" } else { "waiting" };
    assert_eq!(states[1].0, downgrade_state, "{listing}");
    let tail: Vec<(&str, &str)> = states[2..].iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(
        tail,
        [
            ("waiting", "write"),
            ("waiting", "read"),
            ("waiting", "read")
        ],
        "{listing}"
    );

    jvm.send("RELEASE");
    jvm.expect("RELEASED");
    assert!(rust_writer.join().unwrap());
    assert!(rust_reader.join().unwrap());
    jvm.finish();
}

/// A Rust write holder downgrades while a Curator 5.4 writer waits: the read node takes the
/// write node's sequence, so the Curator writer stays queued until the read lock goes too
/// (Curator 5.4's own downgrade would let it in: CURATOR-621, fixed in 5.5).
#[test]
fn rust_downgrade_keeps_a_queued_curator_writer_out() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let server = shared_server().unwrap();
    let root = unique_root("interop-downgrade");
    let client: SharedClient = rust_client(&connect);
    let rw = InterProcessReadWriteLock::new(client.clone(), &root).unwrap();
    let write = rw.write_lock().lock().unwrap();
    let jvm = Jvm::spawn(classes, &["hold", &connect, "write", &root]);
    eventually(PATIENCE, "the Curator writer queues", || {
        children(client.as_ref(), &root).len() == 2
    });
    let read = rw.read_lock().lock().unwrap();
    let read_node = read.node_path().unwrap().to_string();
    drop(write);
    // The Curator writer re-checks and then waits on our read node (its watch shows on the
    // server); had it taken the lock instead, HELD would be waiting in its output.
    eventually(PATIENCE, "the Curator writer watches our read node", || {
        server
            .four_letter("wchp")
            .unwrap_or_default()
            .lines()
            .any(|l| l == read_node)
    });
    assert!(
        jvm.lines.try_recv().is_err(),
        "the Curator writer got in while we hold the read lock"
    );
    let released_at = mono_nanos();
    drop(read);
    jvm.expect("HELD ");
    let held_at: i64 = jvm.expect("AT ")[3..].parse().unwrap();
    assert!(
        held_at > released_at,
        "Curator wrote before our read lock went"
    );
    jvm.finish();
}

// ---------------------------------------------------------------------------------------------
// Revocation in both directions

#[test]
fn rust_revokes_a_curator_holder() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let root = unique_root("interop-revoke-curator");
    let jvm = Jvm::spawn(classes, &["hold", &connect, "revocable", &root]);
    let curator_node = jvm.expect("HELD ")["HELD ".len()..].to_string();
    let client: SharedClient = rust_client(&connect);
    let mutex = InterProcessMutex::new(client.clone(), &root).unwrap();
    assert_eq!(
        mutex.participant_nodes().unwrap(),
        vec![curator_node.clone()]
    );
    // A revocable Curator node starts empty, so that only `__REVOKE__` means revoke.
    assert!(client.get_data(&curator_node, None).unwrap().0.is_empty());
    Revoker::attempt_revoke(&client, &curator_node).unwrap();
    jvm.expect("REVOKED");
    assert!(mutex.acquire_timeout(PATIENCE).unwrap());
    mutex.release().unwrap();
    jvm.finish();
}

#[test]
fn curator_revokes_a_rust_holder() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let root = unique_root("interop-revoke-rust");
    let client: SharedClient = rust_client(&connect);
    let mutex = InterProcessMutex::new(client.clone(), &root).unwrap();
    let (revoked_tx, revoked) = mpsc::channel();
    let revoked_tx = parking_lot::Mutex::new(revoked_tx);
    mutex.make_revocable(move || {
        let _ = revoked_tx.lock().send(());
    });
    let guard = mutex.lock().unwrap();
    let node = guard.node_path().unwrap().to_string();
    let jvm = Jvm::spawn(classes, &["revoke", &connect, &node]);
    jvm.expect("OK");
    revoked
        .recv_timeout(PATIENCE)
        .expect("Curator's revocation reached the Rust holder");
    drop(guard);
    assert!(children(client.as_ref(), &root).is_empty());
    jvm.finish();
}

// ---------------------------------------------------------------------------------------------
// Secured locks

/// A Rust session with digest credentials and `creator_all` on everything it creates.
fn secured_rust_client(connect: &str, user: Option<(&str, &str)>) -> Arc<NativeClient> {
    let mut options = NativeOptions::new(connect)
        .session_timeout(Duration::from_secs(10))
        .acl_provider(AclProvider::creator_all());
    if let Some((user, password)) = user {
        options = options.digest_auth(user, password);
    }
    NativeClient::connect_with(options).expect("connect")
}

/// Curator 5.4 with the same digest credentials and `CREATOR_ALL_ACL` shares a lock with a
/// Rust process: it creates the directory, the Rust peer queues in it and takes over, and a
/// stranger can neither list the queue nor read Curator's node.
#[test]
fn a_secured_lock_is_shared_with_curator_and_refused_to_strangers() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let root = unique_root("interop-secured");
    let mut jvm = Jvm::spawn_with_env(
        classes,
        &["hold", &connect, "mutex", &root],
        &[("INTEROP_DIGEST", "app:secret")],
    );
    let curator_node = jvm.expect("HELD ")["HELD ".len()..].to_string();

    let stranger = rust_client(&connect);
    assert_eq!(stranger.get_children(&root, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.get_data(&curator_node, None), Err(ZkError::NoAuth));
    assert_eq!(stranger.delete(&curator_node, None), Err(ZkError::NoAuth));

    let peer: SharedClient = secured_rust_client(&connect, Some(("app", "secret")));
    let waiter = Arc::new(InterProcessMutex::new(peer.clone(), &root).unwrap());
    let waiting = {
        let waiter = waiter.clone();
        std::thread::spawn(move || {
            let got = waiter.acquire_timeout(PATIENCE).unwrap();
            let node = waiter.held_node().map(|n| n.path().to_string());
            if got {
                waiter.release().unwrap();
            }
            node
        })
    };
    eventually(
        PATIENCE,
        "the Rust peer queues in Curator's directory",
        || children(peer.as_ref(), &root).len() == 2,
    );
    jvm.send("RELEASE");
    jvm.expect("RELEASED");
    let rust_node = waiting.join().unwrap().expect("the Rust peer got the lock");
    assert_ne!(rust_node, curator_node);
    jvm.finish();
}
