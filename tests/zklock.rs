//! The `zklock` binary, driven as a user would: usage and exit statuses, exclusion between
//! processes, the exported environment, the read/write and semaphore modes. `holders` is in
//! `zklock_holders.rs`.
//! Needs a real ZooKeeper (skipped otherwise, unless `ZK_LOCKS_REQUIRE_SERVER=1`); the usage
//! tests need nothing. Signals, lost sessions and credentials are in `zklock_sessions.rs`.

mod common;
mod zklock_support;

use common::{children, unique_root};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, InterProcessReadWriteLock};
use zk_locks::testing::shared_server;
use zk_locks::SharedClient;
use zklock_support::{client, run, temp_dir, zklock};

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
        ("--tick-time", "0"),
        ("--tick-time", "1000h"),
        ("--tick-time", "two ticks"),
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
        &["--session-timeout=8s", "--tick-time=500ms"],
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
