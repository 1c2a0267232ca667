//! The `zklock` binary, driven as a user would: usage and exit statuses, exclusion between
//! processes, the exported environment, the read/write and semaphore modes, and `holders`.
//! Needs a real ZooKeeper (skipped otherwise, unless `ZK_LOCKS_REQUIRE_SERVER=1`); the usage
//! tests need nothing. Signals, lost sessions and credentials are in `zklock_sessions.rs`.

mod common;
mod zklock_support;

use common::{children, eventually, unique_root};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, InterProcessReadWriteLock};
use zk_locks::testing::shared_server;
use zk_locks::SharedClient;
use zklock_support::{client, run, temp_dir, wait_exit, zklock, PATIENCE};

#[test]
fn usage_errors_exit_64_with_a_message() {
    let cases: &[&[&str]] = &[
        &[],
        &["--connect", "127.0.0.1:1", "/lock"],
        &["--connect", "127.0.0.1:1", "--", "true"],
        &[
            "--connect",
            "127.0.0.1:1",
            "--timeout",
            "5 parsecs",
            "/lock",
            "--",
            "true",
        ],
        &[
            "--connect",
            "127.0.0.1:1",
            "--read",
            "--write",
            "/lock",
            "--",
            "true",
        ],
        &[
            "--connect",
            "127.0.0.1:1",
            "--semaphore",
            "0",
            "/lock",
            "--",
            "true",
        ],
        &["--connect", "127.0.0.1:1", "--bogus", "/lock", "--", "true"],
        &["--connect", "127.0.0.1:1", "not/absolute", "--", "true"],
        &["--connect", "127.0.0.1:1", "/", "--", "true"],
        &["/lock", "--", "true"], // no --connect and no ZK_CONNECT
        &["holders", "--connect", "127.0.0.1:1", "/lock", "--", "true"],
        // `--` still starts the command after global options: holders takes none.
        &["--connect", "127.0.0.1:1", "holders", "/lock", "--", "true"],
        // A subcommand only where the first non-option stands (PATH is absolute anyway).
        &["--connect", "127.0.0.1:1", "/lock", "holders", "--", "true"],
    ];
    for args in cases {
        let out = run(zklock().args(*args));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("zklock: "), "{args:?}: {stderr}");
    }
}

/// A duration zklock cannot use for what it is for is refused before anything runs, naming
/// the option: a grace or timeout past any deadline (it once overflowed after the SIGTERM and
/// panicked, leaving a command that ignores SIGTERM running without the lock), a session
/// timeout outside ZooKeeper's `int` milliseconds or under one millisecond, a bad unit.
#[test]
fn durations_zklock_cannot_use_are_usage_errors() {
    let cases: &[(&str, &str)] = &[
        ("--grace", "9999999999999999999"),
        ("--grace", "18446744073709551615s"),
        ("--timeout", "9999999999999999999"),
        ("--timeout", "-5s"),
        ("--session-timeout", "1000h"),
        ("--session-timeout", "0.5ms"),
        ("--session-timeout", "0"),
        ("--grace", "5 parsecs"),
        ("--grace", ""),
        ("--connect-timeout", "0"),
        ("--connect-timeout", "366days"),
        ("--connect-timeout", "5 parsecs"),
    ];
    for (option, value) in cases {
        let out = run(zklock().args([
            "--connect",
            "127.0.0.1:1",
            option,
            value,
            "/lock",
            "--",
            "true",
        ]));
        assert_eq!(out.status.code(), Some(64), "{option} {value:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("zklock: ") && stderr.contains(option),
            "{option} {value:?}: {stderr}"
        );
    }
    // `holders` too (it once failed later, with 69).
    let out = run(zklock().args([
        "holders",
        "--connect",
        "127.0.0.1:1",
        "--session-timeout",
        "1000h",
        "/lock",
    ]));
    assert_eq!(out.status.code(), Some(64), "{out:?}");
}

/// flock(1)/etcdctl spellings: `-t30s`, `-t=30s`, `--timeout=30s`, compound `1m30s`, and a
/// bare number of seconds.
#[test]
fn accepts_attached_values_and_compound_durations() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-parity");
    let spellings: &[&[&str]] = &[
        &["-t30s"],
        &["-t=30s"],
        &["--timeout=1m30s"],
        &["-t", "1.5"],
        &["--grace=1m30s", "--session-timeout=8s"],
        &["-c", &connect, "--timeout", "2m 5s"],
    ];
    for options in spellings {
        let mut args = vec!["--connect", &connect];
        args.extend_from_slice(options);
        args.extend_from_slice(&[&root, "--", "true"]);
        let out = run(zklock().args(&args));
        assert_eq!(out.status.code(), Some(0), "{options:?}: {out:?}");
    }
}

/// The command leads a process group of its own (what zklock signals as one); with
/// `--foreground` it stays in zklock's group, the terminal's job, as `timeout --foreground`.
#[cfg(target_os = "linux")]
#[test]
fn the_command_leads_its_own_process_group_unless_foreground() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-pgrp");
    // `pid (comm) state ppid pgrp ...`: the fifth field is the process group.
    let script = "echo $$ $(cut -d' ' -f5 /proc/$$/stat) $(cut -d' ' -f5 /proc/$PPID/stat)";
    let groups = |options: &[&str]| -> Vec<i64> {
        let mut args = vec!["--connect", &connect];
        args.extend_from_slice(options);
        args.extend_from_slice(&[&root, "--", "sh", "-c", script]);
        let out = run(zklock().args(&args));
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect()
    };
    let [pid, group, zklocks_group] = groups(&[])[..] else {
        panic!("three numbers")
    };
    assert_eq!(group, pid, "the command leads its group");
    assert_ne!(group, zklocks_group);
    let [pid, group, zklocks_group] = groups(&["--foreground"])[..] else {
        panic!("three numbers")
    };
    assert_eq!(group, zklocks_group, "--foreground: zklock's own group");
    assert_ne!(group, pid);
}

#[test]
fn help_lists_exit_codes_and_examples() {
    let out = run(zklock().arg("--help"));
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "EXIT STATUS",
        "EXAMPLES",
        "ZKLOCK_FENCING_TOKEN",
        "holders",
        "--connect-timeout",
        "(holders) the lock has no participants",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
}

/// A port nothing listens on: zklock gives up after `--connect-timeout`, not after the
/// session timeout (30 s here; it once waited out the whole session-derived budget), for the
/// command and for `holders` alike.
#[test]
fn unreachable_server_exits_69_after_the_connect_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let run_modes: &[&[&str]] = &[&["/lock", "--", "true"], &["holders", "/lock"]];
    for mode in run_modes {
        let started = std::time::Instant::now();
        let out = run(zklock()
            .args(["--connect", &addr, "--session-timeout", "30s"])
            .args(["--connect-timeout", "300ms"])
            .args(*mode));
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(69), "{mode:?}: {out:?}");
        assert!(
            took < std::time::Duration::from_secs(15),
            "{mode:?}: {took:?}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("could not connect"), "{mode:?}: {stderr}");
    }
}

/// Options on either side of the subcommand and of PATH, as git and kubectl take them.
#[test]
fn global_options_go_before_or_after_the_subcommand() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-global-options");
    let holder: SharedClient = client(&connect);
    let mutex = InterProcessMutex::new(holder, &root)
        .unwrap()
        .with_data("holding");
    let guard = mutex.lock().unwrap();
    let spellings: &[&[&str]] = &[
        &["--connect", &connect, "holders", &root],
        &["-v", "--connect", &connect, "holders", "--json", &root],
        &["holders", &root, "--connect", &connect],
        &[
            "--connect",
            &connect,
            "--session-timeout",
            "8s",
            "holders",
            &root,
        ],
    ];
    for args in spellings {
        let out = run(zklock().args(*args));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("holding"),
            "{args:?}: {out:?}"
        );
    }
    drop(guard);
    // The run mode: options after PATH too; `--` still starts the command.
    let out = run(zklock().args([&root, "--connect", &connect, "-t", "30s", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn propagates_the_exit_status_and_exports_the_lock() {
    let Some(server) = shared_server() else {
        return;
    };
    let root = unique_root("zklock-status");
    let out = run(zklock()
        .env("ZK_CONNECT", server.connect_string())
        .args([&root, "--", "sh", "-c", "exit 7"]));
    assert_eq!(out.status.code(), Some(7), "{out:?}");

    let out = run(zklock().args([
        "--connect",
        &server.connect_string(),
        &root,
        "--",
        "sh",
        "-c",
        "echo \"$ZKLOCK_PATH|$ZKLOCK_NODE|$ZKLOCK_FENCING_TOKEN\"",
    ]));
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = stdout.trim().split('|').collect();
    assert_eq!(fields[0], root);
    assert!(
        fields[1].starts_with(&format!("{root}/_c_")) && fields[1].contains("-lock-"),
        "{stdout}"
    );
    let token: i64 = fields[2].parse().expect("a numeric fencing token");
    assert!(token > 0);

    // Released afterwards: no node is left behind.
    let c = client(&server.connect_string());
    assert!(children(c.as_ref(), &root).is_empty());

    // A command that does not exist.
    let out = run(zklock().args([
        "--connect",
        &server.connect_string(),
        &root,
        "--",
        "/nonexistent/zklock-test-command",
    ]));
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    assert!(children(c.as_ref(), &root).is_empty());
}

#[test]
fn times_out_with_75_and_leaves_no_node() {
    let Some(server) = shared_server() else {
        return;
    };
    let root = unique_root("zklock-timeout");
    let c = client(&server.connect_string());
    let shared: SharedClient = c.clone();
    let mutex = InterProcessMutex::new(shared, &root).unwrap();
    let guard = mutex.lock().unwrap();
    let out = run(zklock().args([
        "--connect",
        &server.connect_string(),
        "--timeout",
        "300ms",
        &root,
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out"));
    assert_eq!(
        children(c.as_ref(), &root).len(),
        1,
        "only our holder's node"
    );
    drop(guard);
}

#[test]
fn two_processes_never_overlap() {
    let Some(server) = shared_server() else {
        return;
    };
    let root = unique_root("zklock-exclusion");
    let dir = temp_dir("exclusion");
    let log = dir.join("log");
    let connect = server.connect_string();
    let runners: Vec<_> = (0..2)
        .map(|id| {
            let connect = connect.clone();
            let root = root.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                for _ in 0..3 {
                    let script = format!(
                        "echo enter {id} >> '{l}'; sleep 0.05; echo exit {id} >> '{l}'",
                        l = log.display()
                    );
                    let out = run(zklock().args([
                        "--connect",
                        &connect,
                        &root,
                        "--",
                        "sh",
                        "-c",
                        &script,
                    ]));
                    assert!(out.status.success(), "{out:?}");
                }
            })
        })
        .collect();
    for r in runners {
        r.join().unwrap();
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 12, "{text}");
    for pair in lines.chunks(2) {
        let (enter, exit) = (pair[0], pair[1]);
        assert!(enter.starts_with("enter "), "overlap in:\n{text}");
        assert_eq!(exit, enter.replace("enter", "exit"), "overlap in:\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn read_write_and_semaphore_modes_share_locks_with_the_library() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-rw");
    let shared: SharedClient = client(&connect);
    let rw = InterProcessReadWriteLock::new(shared.clone(), &root).unwrap();
    let read = rw.read_lock().lock().unwrap();
    let out = run(zklock().args([
        "--connect",
        &connect,
        "--read",
        "--timeout",
        "20s",
        &root,
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(0), "readers share: {out:?}");
    let out = run(zklock().args([
        "--connect",
        &connect,
        "--write",
        "--timeout",
        "200ms",
        &root,
        "--",
        "true",
    ]));
    assert_eq!(
        out.status.code(),
        Some(75),
        "a writer waits for the reader: {out:?}"
    );
    drop(read);

    let root = unique_root("zklock-sem");
    let sem = zk_locks::locks::InterProcessSemaphoreV2::new(shared.clone(), &root, 2).unwrap();
    let lease = sem.acquire().unwrap();
    let out = run(zklock().args([
        "--connect",
        &connect,
        "--semaphore",
        "2",
        "--timeout",
        "20s",
        &root,
        "--",
        "sh",
        "-c",
        "echo $ZKLOCK_NODE",
    ]));
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{root}/leases/_c_")));
    let out = run(zklock().args(["holders", "--connect", &connect, "--semaphore", "2", &root]));
    let listing = String::from_utf8_lossy(&out.stdout);
    assert_eq!(listing.lines().count(), 1, "{listing}");
    assert!(
        listing.starts_with("holder") && listing.contains(lease.node_name()),
        "{listing}"
    );
    drop(lease);
}

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
