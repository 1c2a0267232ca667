//! Queueing, participants and sort order: each side waits behind the other, and both list
//! and sort the same directory identically.

use std::sync::Arc;

use zk_locks::locks::{
    standard_sort_key, InterProcessLock, InterProcessMutex, InterProcessReadWriteLock,
    READ_LOCK_NAME, WRITE_LOCK_NAME,
};
use zk_locks::testing::harness::{eventually, unique_root};
use zk_locks::testing::shared_server;
use zk_locks::SharedClient;

use crate::harness::*;

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

/// Curator's read/write sort key (its `SortingLockInternalsDriver`), built from the public
/// piece the library sorts with.
fn read_write_key(child: &str) -> &str {
    standard_sort_key(standard_sort_key(child, READ_LOCK_NAME), WRITE_LOCK_NAME)
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
    rust_sorted.sort_by(|a, b| read_write_key(a).cmp(read_write_key(b))); // stable
    assert_eq!(curator_sorted.len(), 5);
    let keys =
        |v: &[String]| -> Vec<String> { v.iter().map(|n| read_write_key(n).to_string()).collect() };
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
    let shares_sequence = read_write_key(downgrade_read) == read_write_key(&write_node);
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

/// Our write→read downgrade with Curator 5.4 contenders queued behind the write lock, one
/// process each, in this order: a reader, a writer, a reader, a writer. The read node keeps
/// the write node's sequence, so the first Curator reader reads beside us, the first Curator
/// writer waits for our read lock (it watches our read node: had the read node a later
/// sequence, as Curator 5.4's own downgrade makes it, that writer would be ahead of it and
/// enter while we read), and every section stays exclusive against writers.
#[test]
fn rust_downgrade_is_exclusive_against_queued_curator_readers_and_writers() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let server = shared_server().unwrap();
    let root = unique_root("interop-downgrade-queue");
    let client: SharedClient = rust_client(&connect);
    let rw = InterProcessReadWriteLock::new(client.clone(), &root).unwrap();
    let write = rw.write_lock().lock().unwrap();
    let mut records = vec![Record::now(true, 'w', "rust-write")];
    let jvms: Vec<Jvm> = [
        "read-section",
        "write-section",
        "read-section",
        "write-section",
    ]
    .iter()
    .enumerate()
    .map(|(i, kind)| {
        let jvm = Jvm::spawn(classes, &["hold", &connect, kind, &root]);
        eventually(PATIENCE, "the Curator contender queues", || {
            children(client.as_ref(), &root).len() == i + 2
        });
        jvm
    })
    .collect();
    let read = rw.read_lock().lock().unwrap();
    // The downgrade hands the hold from our write to our read section.
    records.push(Record::now(false, 'w', "rust-write"));
    records.push(Record::now(true, 'r', "rust-read"));
    let read_node = read.node_path().unwrap().to_string();
    drop(write);
    let first_reader = jvms[0].expect("SECTION ");
    let mut writer_in = None;
    let why = "the first Curator writer waits on our read node (or gets in)";
    eventually(PATIENCE, why, || {
        writer_in = writer_in.take().or_else(|| jvms[1].lines.try_recv().ok());
        writer_in.is_some()
            || server
                .four_letter("wchp")
                .unwrap_or_default()
                .lines()
                .any(|l| l == read_node)
    });
    assert_eq!(
        writer_in, None,
        "the first Curator writer got in while we hold the read lock"
    );
    records.push(Record::now(false, 'r', "rust-read"));
    drop(read);
    let mut sections = vec![first_reader];
    sections.extend(jvms[1..].iter().map(|jvm| jvm.expect("SECTION ")));
    for (i, line) in sections.iter().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        let kind = f[1].chars().next().unwrap();
        let who = format!("jvm{i}");
        for (at, enter) in [(f[2], true), (f[3], false)] {
            records.push(Record {
                at: at.parse().unwrap(),
                enter,
                kind,
                who: who.clone(),
            });
        }
    }
    check(records.clone(), usize::MAX).unwrap_or_else(|e| panic!("{e}"));
    let at = |who: &str, enter: bool| {
        records
            .iter()
            .find(|r| r.who == who && r.enter == enter)
            .unwrap()
            .at
    };
    let our_read_ends = at("rust-read", false);
    assert!(
        at("jvm0", true) < our_read_ends,
        "the first reader reads beside us"
    );
    assert!(
        at("jvm1", true) > our_read_ends,
        "the first writer waits for our read"
    );
    for jvm in jvms {
        jvm.finish();
    }
}
