//! `zklock holders`, driven as a user would: the queue with each node's data, readers and
//! writers told apart, each node named by its own kind on a path that holds several (and a
//! lock taken beside another kind refused with exit 69), an empty lock's exit status. Needs a
//! real ZooKeeper (skipped otherwise, unless `ZK_LOCKS_REQUIRE_SERVER=1`).

mod common;
mod zklock_support;

use common::{children, eventually, unique_root};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, InterProcessReadWriteLock};
use zk_locks::testing::shared_server;
use zk_locks::SharedClient;
use zklock_support::{client, run, temp_dir, wait_exit, zklock, PATIENCE};

#[test]
fn holders_lists_the_queue_with_data() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-holders");
    let holder_client: SharedClient = client(&connect);
    let holder = InterProcessMutex::new(holder_client, &root)
        .unwrap()
        .with_data("rust-holder");
    let guard = holder.lock().unwrap();
    // A waiting zklock process.
    let mut waiter = zklock()
        .args([
            "--connect",
            &connect,
            "--timeout",
            "60s",
            &root,
            "--",
            "true",
        ])
        .spawn()
        .unwrap();
    let observer = client(&connect);
    eventually(PATIENCE, "the zklock waiter queues", || {
        children(observer.as_ref(), &root).len() == 2
    });
    let out = run(zklock().args(["holders", "--connect", &connect, &root]));
    assert!(out.status.success(), "{out:?}");
    let listing = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 2, "{listing}");
    assert!(
        lines[0].starts_with("holder") && lines[0].contains("mutex"),
        "{listing}"
    );
    assert!(lines[0].ends_with("rust-holder"), "{listing}");
    assert!(lines[0].contains(guard.node_path().unwrap().rsplit('/').next().unwrap()));
    assert!(lines[1].starts_with("waiting"), "{listing}");
    drop(guard);
    assert!(wait_exit(&mut waiter, "the waiter gets the lock").success());

    // An empty lock lists nothing, says so and exits 1 (as grep does when nothing matches),
    // in JSON too; a missing one likewise, saying there is no node.
    for json in [&[][..], &["--json"]] {
        let out = run(zklock()
            .args(["holders", "--connect", &connect, &root])
            .args(json));
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("no participants in {root}")),
            "{stderr}"
        );
    }
    let missing = format!("{root}/never-made");
    let out = run(zklock().args(["holders", "--connect", &connect, &missing]));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no node at that path"), "{stderr}");
}

/// `holders` on a read/write lock: the readers ahead of a writer hold, the writer waits, and
/// the kinds are told apart (the library's flags, printed as they are).
#[test]
fn holders_tells_readers_and_writers_apart() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-holders-rw");
    let readers: Vec<_> = (0..2)
        .map(|i| {
            InterProcessReadWriteLock::new(client(&connect), &root)
                .map(|rw| rw.with_data(format!("reader-{i}")))
                .unwrap()
        })
        .collect();
    let guards: Vec<_> = readers
        .iter()
        .map(|rw| rw.read_lock().lock().unwrap())
        .collect();
    let writer = InterProcessReadWriteLock::new(client(&connect), &root)
        .unwrap()
        .with_data("writer");
    std::thread::scope(|s| {
        let writer = &writer;
        s.spawn(move || {
            assert!(writer.write_lock().acquire_timeout(PATIENCE).unwrap());
            writer.write_lock().release().unwrap();
        });
        let observer = client(&connect);
        eventually(PATIENCE, "the writer queues", || {
            children(observer.as_ref(), &root).len() == 3
        });
        let out = run(zklock().args(["holders", "--connect", &connect, &root]));
        assert!(out.status.success(), "{out:?}");
        let listing = String::from_utf8_lossy(&out.stdout);
        let rows: Vec<(&str, &str, &str)> = listing
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f[0], f[1], f[f.len() - 1])
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("holder", "read", "reader-0"),
                ("holder", "read", "reader-1"),
                ("waiting", "write", "writer"),
            ],
            "{listing}"
        );
        drop(guards);
    });
}

/// One path is one kind of lock: a `zklock` of another kind than the lock that holds the
/// path exits 69 naming the path and the kind found, and runs nothing (it ran beside it);
/// `holders` names each node of a mixed directory by its own kind.
#[test]
fn another_kind_on_the_path_exits_69_and_holders_names_each_kind() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-kinds");
    let dir = temp_dir("kinds");
    let ran = dir.join("ran");
    let touch = format!("touch {}", ran.display());
    let library: SharedClient = client(&connect);
    let mutex = InterProcessMutex::new(library.clone(), &root)
        .unwrap()
        .with_data("mutex-holder");
    let guard = mutex.lock().unwrap();
    let zklock_as = |kind: &[&str]| {
        let out = run(zklock()
            .args(["--connect", &connect, "--timeout", "20s"])
            .args(kind)
            .args([&root, "--", "sh", "-c", &touch]));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for kind in [&["--write"][..], &["--read"], &["--semaphore", "1"]] {
        let (code, stderr) = zklock_as(kind);
        assert_eq!(code, Some(69), "{kind:?}: {stderr}");
        assert!(
            stderr.contains(&root) && stderr.contains("in use by a mutex"),
            "{kind:?}: {stderr}"
        );
        assert!(!ran.exists(), "{kind:?} ran its command beside the mutex");
    }
    drop(guard);
    let rw = InterProcessReadWriteLock::new(library.clone(), &root).unwrap();
    let read = rw.read_lock().lock().unwrap();
    let (code, stderr) = zklock_as(&[]);
    assert_eq!(code, Some(69), "{stderr}");
    assert!(stderr.contains("in use by a read/write lock"), "{stderr}");
    assert!(!ran.exists());

    // A mutex node that queued beside the reader anyway (by hand, as an older client would).
    let beside = zk_locks::ZkClient::create(
        library.as_ref(),
        &format!("{root}/_c_x-lock-"),
        b"old-mutex",
        zk_locks::CreateMode::EphemeralSequential,
    )
    .unwrap();
    let out = run(zklock().args(["holders", "--connect", &connect, &root]));
    assert!(out.status.success(), "{out:?}");
    let listing = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<(&str, &str)> = listing
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[1], f[2])
        })
        .collect();
    let read_node = read.node_path().unwrap().rsplit('/').next().unwrap();
    let mutex_node = beside.rsplit('/').next().unwrap();
    assert_eq!(
        rows,
        [("mutex", mutex_node), ("read", read_node)],
        "{listing}"
    );
    drop(read);
    let _ = std::fs::remove_dir_all(&dir);
}
