//! zklock stops its command before its session can expire (issue 32), so another holder never
//! runs beside it: when its member is cut off from the ensemble (a [`CutOffMember`]: pings
//! answered alone, the real server expiring the session), when its link is frozen past the
//! session (a frozen `FaultProxy`), and when zklock itself is frozen (SIGSTOP) while its
//! command runs on (issue 39: its guardian stops the group). In each the server grants the
//! lock to a contender once it expired zklock's session; the command (and its whole group)
//! must be gone by then. Needs a real ZooKeeper (skipped otherwise, unless
//! `ZK_LOCKS_REQUIRE_SERVER=1`).

mod common;
mod zklock_support;

use std::process::Stdio;
use std::time::Duration;

use common::unique_root;
use zk_locks::locks::{InterProcessLock, InterProcessMutex};
use zk_locks::testing::{shared_server, CutOffMember, FaultProxy};
use zk_locks::SharedClient;
use zklock_support::processes::{alive, read_pid, stderr_of, KillOnDrop};
use zklock_support::{client, temp_dir, wait_exit, zklock, PATIENCE};

/// zklock holds `root` through `connect` with session timeout `timeout`, running a command
/// that notes SIGTERM and runs on, with a worker in its group that ignores it (only SIGKILL
/// stops them: by `--grace 1s` after a loss, or earlier when zklock must stop them before the
/// session can expire); `cut` (given zklock's pid) then cuts it off; a contender straight on
/// the server waits for the lock. When the contender gets it, the command and its worker must
/// already be dead, and the command must have had SIGTERM first. zklock is sent SIGCONT
/// afterwards (for `cut`s that stop it) and must exit 76.
fn contender_never_runs_beside_the_command(
    connect: &str,
    timeout: &str,
    tag: &str,
    cut: impl FnOnce(libc::pid_t),
) {
    let server = shared_server().expect("checked by the caller");
    let root = unique_root(tag);
    let dir = temp_dir(tag);
    let script = format!(
        "(trap '' TERM; while :; do sleep 0.05; done) & echo $! > {d}/worker; \
         trap ': > {d}/termed' TERM; echo $$ > {d}/pid; while :; do sleep 0.05; done",
        d = dir.display()
    );
    let mut holder = zklock()
        .args(["--connect", connect, "--session-timeout", timeout])
        .args(["--grace", "1s", &root, "--", "sh", "-c", &script])
        .env("RUST_LOG", "zklock=info,zk_locks=info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let command = read_pid(&dir.join("pid"));
    let worker = read_pid(&dir.join("worker"));
    let zklock_pid = holder.id() as libc::pid_t;
    let _cleanup = KillOnDrop(vec![command, worker, zklock_pid]);
    cut(zklock_pid);
    let c: SharedClient = client(&server.connect_string());
    let contender = InterProcessMutex::new(c, &root).unwrap();
    assert!(
        contender.acquire_timeout(PATIENCE).unwrap(),
        "the server never expired zklock's session"
    );
    let command_alive = alive(command);
    let worker_alive = alive(worker);
    // Written by the shell itself (no process to start) when the SIGTERM came.
    let termed = dir.join("termed").exists();
    contender.release().unwrap();
    // SAFETY: kill(2) on our own child process (a no-op unless `cut` stopped it).
    unsafe { libc::kill(zklock_pid, libc::SIGCONT) };
    let status = wait_exit(&mut holder, "zklock gives up the lock");
    let stderr = stderr_of(&mut holder);
    assert!(
        !command_alive,
        "two holders: the command still ran when another process got the lock\n{stderr}"
    );
    assert!(
        !worker_alive,
        "two holders: the command's worker still ran when another process got the lock\n{stderr}"
    );
    assert!(
        termed,
        "the command got SIGKILL without SIGTERM first\n{stderr}"
    );
    assert_eq!(status.code(), Some(76), "{status:?}: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The member answers zklock's pings alone: without a proof from the quorum zklock would run
/// its command for as long as the member keeps the connection.
#[test]
fn a_command_on_a_cut_off_member_stops_before_the_session_expires() {
    let Some(server) = shared_server() else {
        return;
    };
    let member = CutOffMember::start(server.addr()).unwrap();
    contender_never_runs_beside_the_command(&member.connect_string(), "4s", "zklock-cut", |_| {
        member.cut_off()
    });
}

/// A link frozen past the session: zklock used to act only at `Lost` (`4T/3` after the last
/// byte), while the server expires the session between `T` and `T` plus a tick after it last
/// heard from us.
#[test]
fn a_command_on_a_frozen_link_stops_before_the_session_expires() {
    let Some(server) = shared_server() else {
        return;
    };
    let proxy = FaultProxy::start(server.addr()).unwrap();
    contender_never_runs_beside_the_command(&proxy.connect_string(), "6s", "zklock-frozen", |_| {
        std::thread::sleep(Duration::from_millis(fastrand::u64(0..2000)));
        proxy.freeze()
    });
}

/// zklock itself stopped (SIGSTOP; a debugger, a cgroup freezer, a swap storm alike) while its
/// command runs on: zklock's own threads cannot stop the command by `safe_until`, so its
/// guardian, which zklock no longer extends, must kill the group by then.
#[test]
fn a_command_of_a_frozen_zklock_stops_before_the_session_expires() {
    let Some(server) = shared_server() else {
        return;
    };
    contender_never_runs_beside_the_command(
        &server.connect_string(),
        "4s",
        "zklock-stopped",
        |zklock| {
            // SAFETY: kill(2) on the zklock process this test started.
            unsafe { libc::kill(zklock, libc::SIGSTOP) };
        },
    );
}
