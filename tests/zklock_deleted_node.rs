//! `zklock` when someone else deletes its lock node (an operator, a peer with the open ACL):
//! it stops its command (SIGTERM, SIGKILL after `--grace`) and exits 76, before a second
//! zklock, started once the delete was answered, runs its command beside it. Needs a real
//! ZooKeeper (skipped otherwise, unless `ZK_LOCKS_REQUIRE_SERVER=1`).

mod common;
mod zklock_support;

use std::process::Stdio;

use common::{children, eventually, unique_root};
use zk_locks::testing::shared_server;
use zklock_support::{client, run, temp_dir, wait_exit, zklock, PATIENCE};

#[test]
fn a_deleted_node_stops_the_command_and_exits_76() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-deleted");
    let dir = temp_dir("deleted");
    // The command holds an flock(2) on `resource` for as long as it runs (the fd goes with
    // `exec` to `sleep`, which SIGTERM ends): a second command that finds it taken ran beside
    // the first.
    let resource = dir.join("resource");
    let first_cmd = format!(
        "exec 9>{r}; flock -n 9 || exit 3; touch {d}/started; exec sleep 120",
        r = resource.display(),
        d = dir.display()
    );
    let mut first = zklock()
        .args(["--connect", &connect, "--grace", "5s", &root, "--"])
        .args(["sh", "-c", &first_cmd])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(PATIENCE, "the first command starts", || {
        dir.join("started").exists()
    });
    let c = client(&connect);
    let nodes = children(c.as_ref(), &root);
    assert_eq!(nodes.len(), 1, "{nodes:?}");

    // Someone deletes the holder's node; once the server answered, a second zklock comes.
    zk_locks::ZkClient::delete(c.as_ref(), &format!("{root}/{}", nodes[0]), None).unwrap();
    let second_cmd = format!(
        "if flock -n {r} true; then touch {d}/alone; else touch {d}/beside; fi",
        r = resource.display(),
        d = dir.display()
    );
    let second = run(zklock().args(["--connect", &connect, &root, "--", "sh", "-c", &second_cmd]));
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    assert!(
        !dir.join("beside").exists(),
        "the second command ran while the first still held the resource"
    );
    assert!(dir.join("alone").exists());

    let status = wait_exit(&mut first, "the first zklock gives up its deleted lock");
    let mut stderr = String::new();
    std::io::Read::read_to_string(first.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(76), "{status:?}: {stderr}");
    assert!(stderr.contains("lost the lock"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
