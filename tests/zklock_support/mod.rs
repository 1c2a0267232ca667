//! What the `zklock` tests share: the binary with a clean environment, a client to look at
//! the server, bounded waits for child processes, scratch directories. Each zklock test
//! binary uses only some of it.
#![allow(dead_code)]

use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::zookeeper::ZookeeperClient;

use crate::common::eventually;

pub mod processes;

/// How long a test waits for anything another process does.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// zklock with a clean environment (no inherited `ZK_CONNECT`).
pub fn zklock() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zklock"));
    cmd.env_remove("ZK_CONNECT")
        .env_remove("ZK_AUTH")
        .stdin(Stdio::null());
    cmd
}

/// Runs zklock to its end.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run zklock")
}

/// A library client of the test's own, to look at the server or contend with zklock.
pub fn client(connect: &str) -> Arc<ZookeeperClient> {
    ZookeeperClient::connect(connect, Duration::from_secs(6)).expect("connect")
}

/// Waits (bounded) for a child process to exit.
pub fn wait_exit(child: &mut Child, what: &str) -> ExitStatus {
    let mut status = None;
    eventually(PATIENCE, what, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status.unwrap()
}

/// A fresh scratch directory for one test.
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("zklock-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
