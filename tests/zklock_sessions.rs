//! The `zklock` binary under signals, lost sessions and credentials: interruption while
//! waiting withdraws from the queue, a lock lost under a running command (through a
//! `FaultProxy`) terminates it, a cut under an aged holder does not, and digest credentials
//! come from a file or the environment; the command's whole process group is what zklock
//! signals, and it dies with zklock (`kill -9` included). Needs a real ZooKeeper (skipped otherwise, unless
//! `ZK_LOCKS_REQUIRE_SERVER=1`).

mod common;
mod zklock_support;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{children, eventually, unique_root};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, InterProcessSemaphoreMutex};
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{SharedClient, ZkClient};
use zklock_support::processes::{alive, read_pid, stderr_of, KillOnDrop};
use zklock_support::{client, run, temp_dir, wait_exit, zklock, PATIENCE};

#[test]
fn interrupt_while_waiting_withdraws_from_the_queue() {
    interrupted_while_waiting(libc::SIGINT, &[]);
}

/// SIGTERM withdraws as Ctrl-C does, from a semaphore's queue too.
#[test]
fn sigterm_while_waiting_for_a_lease_withdraws_from_the_queue() {
    interrupted_while_waiting(libc::SIGTERM, &["--semaphore", "1"]);
}

/// zklock waits behind a holder; `signo` makes it cancel its wait (its node deleted, said in
/// its log), exit with 128 + `signo` and its usual message, and the holder keeps the lock.
fn interrupted_while_waiting(signo: i32, kind: &[&str]) {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-interrupted");
    let c = client(&connect);
    let shared: SharedClient = c.clone();
    let holder: Box<dyn InterProcessLock> = match kind {
        [] => Box::new(InterProcessMutex::new(shared, &root).unwrap()),
        _ => Box::new(InterProcessSemaphoreMutex::new(shared, &root).unwrap()),
    };
    holder.acquire().unwrap();
    // Where the waiter's node lives: the mutex's directory, or the semaphore's leases (the
    // waiter is admitted, and its lease waits for room beside the holder's).
    let queue = match kind {
        [] => root.clone(),
        _ => format!("{root}/leases"),
    };
    let queued = children(c.as_ref(), &queue).len() + 1;
    let mut waiter = zklock()
        .env("RUST_LOG", "zklock=info")
        .args(["--connect", &connect])
        .args(kind)
        .args([root.as_str(), "--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(PATIENCE, "zklock queues", || {
        children(c.as_ref(), &queue).len() == queued
    });
    // SAFETY: kill(2) on our own child process.
    unsafe { libc::kill(waiter.id() as libc::pid_t, signo) };
    let status = wait_exit(&mut waiter, "zklock exits on the signal");
    assert_eq!(status.code(), Some(128 + signo), "{status:?}");
    let stderr = stderr_of(&mut waiter);
    assert!(
        stderr.contains(&format!("interrupted by signal {signo} while waiting")),
        "{stderr}"
    );
    // The wait was cancelled (its node deleted by it), not ended by closing the session, and
    // zklock does not call it a timeout.
    assert!(stderr.contains("withdrew from the queue"), "{stderr}");
    assert!(!stderr.contains("timed out"), "{stderr}");
    eventually(PATIENCE, "zklock's node is deleted", || {
        children(c.as_ref(), &queue).len() == queued - 1
    });
    assert!(holder.held_nodes().iter().all(|n| n.is_valid()));
    holder.release().unwrap();
}

#[test]
fn lost_lock_terminates_the_command() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let root = unique_root("zklock-lost");
    let dir = temp_dir("lost");
    let forever = "while :; do sleep 0.1; done";
    let mut holder = start_holding(&proxy, &["--grace", "10s"], &root, &dir, 0, forever);
    proxy.freeze();
    let status = wait_exit(&mut holder, "zklock gives up the lost lock");
    assert_eq!(status.code(), Some(76), "{status:?}");
    assert!(dir.join("termed").exists(), "the command got SIGTERM");
    let stderr = stderr_of(&mut holder);
    assert!(stderr.contains("lost the lock"), "{stderr}");
    // The server expires the frozen session: another process can take the lock.
    let c: SharedClient = client(&server.connect_string());
    let other = InterProcessMutex::new(c, &root).unwrap();
    assert!(other.acquire_timeout(PATIENCE).unwrap());
    other.release().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lost lock stops the command's helpers too: `sh -c 'worker & wait'` leaves no worker
/// running beside the next holder (the whole process group is signalled, not the shell alone),
/// not even one that ignores SIGTERM (the group gets SIGKILL once the shell has exited).
#[test]
fn lost_lock_terminates_the_commands_whole_process_group() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let root = unique_root("zklock-lost-group");
    let dir = temp_dir("lost-group");
    let body = format!(
        "sleep 1000 & echo $! > {d}/worker; (trap '' TERM; exec sleep 1000) & echo $! > {d}/stubborn; wait",
        d = dir.display()
    );
    let mut holder = start_holding(&proxy, &["--grace", "10s"], &root, &dir, 0, &body);
    let worker = read_pid(&dir.join("worker"));
    let stubborn = read_pid(&dir.join("stubborn"));
    let _cleanup = KillOnDrop(vec![worker, stubborn]);
    proxy.freeze();
    let status = wait_exit(&mut holder, "zklock gives up the lost lock");
    assert_eq!(status.code(), Some(76), "{status:?}");
    assert!(
        !alive(stubborn),
        "zklock ends after the whole group is killed"
    );
    eventually(PATIENCE, "the command's worker is terminated too", || {
        !alive(worker)
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM (or Ctrl-C) to zklock while the command runs reaches the command's whole group.
#[test]
fn forwarded_signals_reach_the_commands_whole_process_group() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let root = unique_root("zklock-forward-group");
    let dir = temp_dir("forward-group");
    // The worker writes its own pid, once it has left the shell's fork: a SIGTERM that reached
    // a freshly forked child still holding the script's trap would be swallowed by it.
    let body = format!(
        "sh -c 'echo $$ > {}/worker; exec sleep 1000' & wait",
        dir.display()
    );
    let mut holder = start_holding(&proxy, &[], &root, &dir, 3, &body);
    let worker = read_pid(&dir.join("worker"));
    let _cleanup = KillOnDrop(vec![worker]);
    // SAFETY: kill(2) on our own child process.
    unsafe { libc::kill(holder.id() as libc::pid_t, libc::SIGTERM) };
    let status = wait_exit(&mut holder, "zklock ends with its command");
    assert_eq!(
        status.code(),
        Some(3),
        "the command's own status: {status:?}"
    );
    assert!(dir.join("termed").exists(), "the command got SIGTERM");
    eventually(PATIENCE, "the command's worker got SIGTERM too", || {
        !alive(worker)
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kill -9` of zklock (the OOM killer, a supervisor's hard stop) takes its command and the
/// command's helpers with it: nothing runs on while the session expires and another process
/// takes the lock. (Linux: elsewhere there is no parent-death signal.)
#[cfg(target_os = "linux")]
#[test]
fn the_command_and_its_helpers_die_with_a_killed_zklock() {
    let Some(server) = shared_server() else {
        return;
    };
    let root = unique_root("zklock-kill9");
    let dir = temp_dir("kill9");
    let script = format!(
        "echo $$ > {d}/command; sleep 1000 & echo $! > {d}/worker; wait",
        d = dir.display()
    );
    let mut holder = zklock()
        .args([
            "--connect",
            &server.connect_string(),
            &root,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn()
        .unwrap();
    let command = read_pid(&dir.join("command"));
    let worker = read_pid(&dir.join("worker"));
    let _cleanup = KillOnDrop(vec![command, worker]);
    holder.kill().unwrap(); // SIGKILL
    let status = wait_exit(&mut holder, "zklock dies");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    eventually(PATIENCE, "the command dies with zklock", || !alive(command));
    eventually(PATIENCE, "the command's worker dies with zklock", || {
        !alive(worker)
    });
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
    let until_go = format!("while [ ! -e {}/go ]; do sleep 0.1; done", dir.display());
    let mut holder = start_holding(&proxy, &[], &root, &dir, 1, &until_go);
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
    let stderr = stderr_of(&mut holder);
    assert_eq!(status.code(), Some(0), "{status:?}: {stderr}");
    assert!(
        !dir.join("termed").exists(),
        "the command was not terminated"
    );
    assert!(!stderr.contains("lost"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts zklock through `proxy` with a 2 s session timeout and the `options` given, holding
/// `root` while it runs `body` under `sh -c` (stderr piped). The script first touches
/// `dir/started`, and on SIGTERM writes `dir/termed` and exits with `on_term`. Returns once it
/// has started.
fn start_holding(
    proxy: &FaultProxy,
    options: &[&str],
    root: &str,
    dir: &Path,
    on_term: i32,
    body: &str,
) -> Child {
    let script = format!(
        "trap 'echo term > {d}/termed; exit {on_term}' TERM; touch {d}/started; {body}",
        d = dir.display()
    );
    let connect = proxy.connect_string();
    let mut args = vec!["--connect", &connect, "--session-timeout", "2s"];
    args.extend_from_slice(options);
    args.extend_from_slice(&[root, "--", "sh", "-c", &script]);
    let holder = zklock().args(args).stderr(Stdio::piped()).spawn().unwrap();
    eventually(PATIENCE, "the command starts", || {
        dir.join("started").exists()
    });
    holder
}

/// A `creator_all` lock held by the library with `app:secret`, under a persistent base it
/// made with that ACL (a restricted lock needs a parent nobody else may create or delete in).
fn secured_holder(connect: &str, root: &str) -> (SharedClient, InterProcessMutex) {
    use zk_locks::client::acl::AclProvider;
    use zk_locks::client::native::{NativeClient, NativeOptions};
    let options = NativeOptions::new(connect)
        .digest_auth("app", "secret")
        .acl_provider(AclProvider::creator_all());
    let shared: SharedClient = NativeClient::connect_with(options).unwrap();
    let base = zk_locks::paths::parent(root).unwrap();
    shared
        .create(base, b"", zk_locks::CreateMode::Persistent)
        .unwrap();
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
    let root = format!("{}/lock", unique_root("zklock-secured"));
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

/// Issue 25 item 6: `--acl creator-all` over a lock directory left with the open ACL would
/// hold a lock anyone may break: zklock refuses, exit 69, naming the directory and its ACL,
/// and neither queues nor runs the command.
#[test]
fn creator_all_over_an_open_lock_directory_exits_69_naming_it() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let base = unique_root("zklock-left-open");
    let dir = format!("{base}/lock");
    let stranger = client(&connect);
    for path in [&base, &dir] {
        stranger
            .create(path, b"", zk_locks::CreateMode::Persistent)
            .unwrap();
    }
    let marker = temp_dir("left-open").join("ran");
    let out = run(zklock().env("ZK_AUTH", "app:secret").args([
        "--connect",
        &connect,
        "--acl",
        "creator-all",
        "--timeout",
        "10s",
        &dir,
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]));
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&dir), "{stderr}");
    assert!(stderr.contains("world:anyone:cdrwa"), "{stderr}");
    assert!(!marker.exists(), "the command ran");
    assert!(children(stranger.as_ref(), &dir).is_empty());
}
