//! zklock stops its command before its session can expire (issue 32), so another holder never
//! runs beside it: when its member is cut off from the ensemble (a [`CutOffMember`]: pings
//! answered alone, the real server expiring the session), and when its link is frozen past the
//! session (a frozen `FaultProxy`). In both the server grants the lock to a contender once it
//! expired zklock's session; the command (and its whole group) must be gone by then. Needs a
//! real ZooKeeper (skipped otherwise, unless `ZK_LOCKS_REQUIRE_SERVER=1`).

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
/// that ignores SIGTERM (only SIGKILL stops it: by `--grace 1s` after a loss, or earlier when
/// zklock must stop it before the session can expire); `cut` then cuts it
/// off; a contender straight on the server waits for the lock. When the contender gets it,
/// the command must already be dead.
fn contender_never_runs_beside_the_command(
    connect: &str,
    timeout: &str,
    tag: &str,
    cut: impl FnOnce(),
) {
    let server = shared_server().expect("checked by the caller");
    let root = unique_root(tag);
    let dir = temp_dir(tag);
    let script = format!(
        "trap '' TERM; echo $$ > {d}/pid; while :; do sleep 0.05; done",
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
    let _cleanup = KillOnDrop(vec![command, holder.id() as i32]);
    cut();
    let c: SharedClient = client(&server.connect_string());
    let contender = InterProcessMutex::new(c, &root).unwrap();
    assert!(
        contender.acquire_timeout(PATIENCE).unwrap(),
        "the server never expired zklock's session"
    );
    let command_alive = alive(command);
    contender.release().unwrap();
    let status = wait_exit(&mut holder, "zklock gives up the lock");
    let stderr = stderr_of(&mut holder);
    assert!(
        !command_alive,
        "two holders: the command still ran when another process got the lock\n{stderr}"
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
    contender_never_runs_beside_the_command(&member.connect_string(), "4s", "zklock-cut", || {
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
    contender_never_runs_beside_the_command(&proxy.connect_string(), "6s", "zklock-frozen", || {
        std::thread::sleep(Duration::from_millis(fastrand::u64(0..2000)));
        proxy.freeze()
    });
}
