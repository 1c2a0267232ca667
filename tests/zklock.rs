//! The `zklock` binary, driven as a user would: exit statuses, exclusion between processes,
//! the exported environment, `holders`, interruption while waiting and a lock lost under a
//! running command (through a `FaultProxy`). Needs a real ZooKeeper (skipped otherwise, unless
//! `ZK_LOCKS_REQUIRE_SERVER=1`); the usage tests need nothing.

mod common;

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, unique_root};
use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::locks::{InterProcessLock, InterProcessMutex, InterProcessReadWriteLock};
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{SharedClient, ZkClient};

const PATIENCE: Duration = Duration::from_secs(30);

/// zklock with a clean environment (no inherited `ZK_CONNECT`).
fn zklock() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zklock"));
    cmd.env_remove("ZK_CONNECT")
        .env_remove("ZK_AUTH")
        .stdin(Stdio::null());
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run zklock")
}

fn client(connect: &str) -> Arc<ZookeeperClient> {
    ZookeeperClient::connect(connect, Duration::from_secs(6)).expect("connect")
}

fn children(c: &dyn ZkClient, path: &str) -> Vec<String> {
    c.get_children(path, None).unwrap_or_default()
}

/// Waits (bounded) for a child process to exit.
fn wait_exit(child: &mut Child, what: &str) -> ExitStatus {
    let mut status = None;
    eventually(PATIENCE, what, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status.unwrap()
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("zklock-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

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
    ];
    for args in cases {
        let out = run(zklock().args(*args));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("zklock: "), "{args:?}: {stderr}");
    }
}

#[test]
fn help_lists_exit_codes_and_examples() {
    let out = run(zklock().arg("--help"));
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["EXIT STATUS", "EXAMPLES", "ZKLOCK_FENCING_TOKEN", "holders"] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
}

#[test]
fn unreachable_server_exits_69() {
    // A port nothing listens on: the connect fails after the (short) session timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let out = run(zklock().args([
        "--connect",
        &addr.to_string(),
        "--session-timeout",
        "1s",
        "/lock",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(69), "{out:?}");
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

    // An empty or missing lock lists nothing.
    let out = run(zklock().args(["holders", "--connect", &connect, &root]));
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
}

#[test]
fn interrupt_while_waiting_withdraws_from_the_queue() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-sigint");
    let c = client(&connect);
    let shared: SharedClient = c.clone();
    let mutex = InterProcessMutex::new(shared, &root).unwrap();
    let guard = mutex.lock().unwrap();
    let mut waiter = zklock()
        .args(["--connect", &connect, &root, "--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(PATIENCE, "zklock queues", || {
        children(c.as_ref(), &root).len() == 2
    });
    // SAFETY: kill(2) on our own child process.
    unsafe { libc::kill(waiter.id() as libc::pid_t, libc::SIGINT) };
    let status = wait_exit(&mut waiter, "zklock exits on SIGINT");
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{status:?}");
    // Its node goes with its session at once (not after a session timeout).
    eventually(PATIENCE, "zklock's node is deleted", || {
        children(c.as_ref(), &root).len() == 1
    });
    assert!(guard.is_valid());
}

#[test]
fn lost_lock_terminates_the_command() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let root = unique_root("zklock-lost");
    let dir = temp_dir("lost");
    let script = format!(
        "trap 'echo term > {d}/termed; exit 0' TERM; touch {d}/started; while :; do sleep 0.1; done",
        d = dir.display()
    );
    let mut holder = zklock()
        .args([
            "--connect",
            &proxy.connect_string(),
            "--session-timeout",
            "2s",
            "--grace",
            "10s",
            &root,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(PATIENCE, "the command starts", || {
        Path::new(&dir.join("started")).exists()
    });
    proxy.freeze();
    let status = wait_exit(&mut holder, "zklock gives up the lost lock");
    assert_eq!(status.code(), Some(76), "{status:?}");
    assert!(dir.join("termed").exists(), "the command got SIGTERM");
    let mut stderr = String::new();
    std::io::Read::read_to_string(holder.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("lost the lock"), "{stderr}");
    // The server expires the frozen session: another process can take the lock.
    let c: SharedClient = client(&server.connect_string());
    let other = InterProcessMutex::new(c, &root).unwrap();
    assert!(other.acquire_timeout(PATIENCE).unwrap());
    other.release().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The issue that made us write our own client: a holder older than its session timeout lost
/// its lock (and its command) on a one-off connection cut. Now the session survives the cut.
#[test]
fn a_cut_under_an_aged_holder_keeps_the_lock_and_the_command() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let root = unique_root("zklock-aged");
    let dir = temp_dir("aged");
    let script = format!(
        "trap 'echo term > {d}/termed; exit 1' TERM; touch {d}/started; \
         while [ ! -e {d}/go ]; do sleep 0.1; done",
        d = dir.display()
    );
    let mut holder = zklock()
        .args([
            "--connect",
            &proxy.connect_string(),
            "--session-timeout",
            "2s",
            &root,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(PATIENCE, "the command starts", || {
        Path::new(&dir.join("started")).exists()
    });
    let session = proxy.session_id().expect("a session through the proxy");
    // The holder ages past several session timeouts (time is the subject here).
    std::thread::sleep(Duration::from_secs(6));
    let connections = proxy.connection_count();
    assert_eq!(connections, 1);
    proxy.cut();
    eventually(PATIENCE, "the holder resumes its session", || {
        proxy.session_ids() == vec![session]
    });
    let c = client(&server.connect_string());
    assert_eq!(
        children(c.as_ref(), &root).len(),
        1,
        "the lock node survived"
    );
    std::fs::write(dir.join("go"), b"").unwrap();
    let status = wait_exit(&mut holder, "the command finishes");
    let mut stderr = String::new();
    std::io::Read::read_to_string(holder.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}: {stderr}");
    assert!(
        !dir.join("termed").exists(),
        "the command was not terminated"
    );
    assert!(!stderr.contains("lost"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `creator_all` lock held by the library with `app:secret`.
fn secured_holder(connect: &str, root: &str) -> (SharedClient, InterProcessMutex) {
    use zk_locks::client::acl::AclProvider;
    use zk_locks::client::native::{NativeClient, NativeOptions};
    let options = NativeOptions::new(connect)
        .digest_auth("app", "secret")
        .acl_provider(AclProvider::creator_all());
    let shared: SharedClient = NativeClient::connect_with(options).unwrap();
    let mutex = InterProcessMutex::new(shared.clone(), root).unwrap();
    mutex.acquire().unwrap();
    (shared, mutex)
}

#[test]
fn credentials_come_from_a_file_or_the_environment_and_strangers_exit_69() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-secured");
    let (owner, mutex) = secured_holder(&connect, &root);

    // Without credentials `holders` may not look: a clear error, exit 69.
    let out = run(zklock().args(["holders", "--connect", &connect, &root]));
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not allowed to look"), "{stderr}");

    // With them (environment) it lists the holder.
    let out =
        run(zklock()
            .env("ZK_AUTH", "app:secret")
            .args(["holders", "--connect", &connect, &root]));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("holder"));

    // A wrong password cannot queue: exit 69, the password never printed, nothing left.
    let out = run(zklock().env("ZK_AUTH", "app:guessed-pw").args([
        "--connect",
        &connect,
        "--acl",
        "creator-all",
        "--timeout",
        "5s",
        &root,
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wrong password"), "{stderr}");
    assert!(!stderr.contains("guessed-pw"), "{stderr}");
    assert_eq!(children(owner.as_ref(), &root).len(), 1);

    // The right credentials from a file: queues behind the holder (it can list) and times out.
    let dir = temp_dir("auth-file");
    let file = dir.join("zk-auth");
    std::fs::write(&file, "app:secret\n").unwrap();
    let out = run(zklock().args([
        "--connect",
        &connect,
        "--auth-file",
        file.to_str().unwrap(),
        "--acl",
        "creator-all",
        "--timeout",
        "300ms",
        &root,
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    mutex.release().unwrap();
    // Then takes it (credentials from the environment, which the command does not inherit).
    let out = run(zklock().env("ZK_AUTH", "app:secret").args([
        "--connect",
        &connect,
        "--acl",
        "creator-all",
        &root,
        "--",
        "sh",
        "-c",
        "test -z \"$ZK_AUTH\"",
    ]));
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // An ACL mode that needs credentials without any is a usage error.
    let out = run(zklock().args([
        "--connect",
        &connect,
        "--acl",
        "creator-all",
        &root,
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(64), "{out:?}");
}
