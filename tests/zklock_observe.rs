//! What an operator sees of zklock: `-v` (debug lines of the library's layers, each naming
//! its target) and `holders --json` (one JSON object per participant, in queue order).
//! Needs a real ZooKeeper (skipped otherwise, unless `ZK_LOCKS_REQUIRE_SERVER=1`).

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{children, eventually, unique_root};
use zk_locks::client::native::NativeClient;
use zk_locks::testing::shared_server;
use zk_locks::{InterProcessLock, InterProcessMutex, SharedClient};

const PATIENCE: Duration = Duration::from_secs(30);

/// zklock with a clean environment (no inherited `ZK_CONNECT` or `RUST_LOG`).
fn zklock() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zklock"));
    cmd.env_remove("ZK_CONNECT")
        .env_remove("ZK_AUTH")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run zklock")
}

fn client(connect: &str) -> SharedClient {
    NativeClient::connect(connect, Duration::from_secs(10)).expect("connect")
}

/// The stderr lines of `out` logged under a target starting with `target`.
fn lines_of(out: &Output, target: &str) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(&format!(" {target}")))
        .map(str::to_string)
        .collect()
}

#[test]
fn verbose_prints_the_lock_events_under_their_targets_and_rust_log_still_works() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-verbose");

    let out = run(zklock().args(["-v", "--connect", &connect, &root, "--", "true"]));
    assert!(out.status.success(), "{out:?}");
    let events = lines_of(&out, "zk_locks::locks");
    let acquired = events.iter().find(|l| l.contains("acquired as"));
    let released = events.iter().find(|l| l.contains(": released "));
    // Each names the lock, the node and the session id in hex.
    for line in [acquired, released] {
        let line = line.unwrap_or_else(|| panic!("no such event: {events:#?}\n{out:?}"));
        assert!(line.contains(" DEBUG "), "{line}");
        assert!(line.contains(&format!("mutex {root}: ")), "{line}");
        assert!(line.contains(&format!("{root}/_c_")), "{line}");
        assert!(line.contains("(session 0x"), "{line}");
    }
    // Every line names the session in hex, never in decimal, and a normal close is not
    // reported as a broken read ("failed to fill whole buffer" once was).
    let stderr = String::from_utf8_lossy(&out.stderr);
    let hex = acquired.unwrap().split("(session 0x").nth(1).unwrap();
    let hex = &hex[..hex.find(')').unwrap()];
    let decimal = i64::from_str_radix(hex, 16).unwrap().to_string();
    assert!(!stderr.contains(&decimal), "{decimal} in {stderr}");
    assert!(stderr.contains(&format!("0x{hex}")), "{stderr}");
    assert!(!stderr.contains("failed to fill"), "{stderr}");
    // The client's and the session's layers log under their own targets.
    assert!(
        !lines_of(&out, "zk_locks::session").is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Without -v: no debug line.
    let quiet = run(zklock().args(["--connect", &connect, &root, "--", "true"]));
    assert!(quiet.status.success(), "{quiet:?}");
    assert!(
        !String::from_utf8_lossy(&quiet.stderr).contains(" DEBUG "),
        "{quiet:?}"
    );

    // RUST_LOG alone still selects one layer.
    let one_layer = run(zklock().env("RUST_LOG", "zk_locks::locks=debug").args([
        "--connect",
        &connect,
        &root,
        "--",
        "true",
    ]));
    assert!(one_layer.status.success(), "{one_layer:?}");
    assert!(
        !lines_of(&one_layer, "zk_locks::locks").is_empty(),
        "{one_layer:?}"
    );
    assert!(
        lines_of(&one_layer, "zk_locks::session").is_empty(),
        "{one_layer:?}"
    );
}

#[test]
fn holders_json_lists_the_holder_and_the_waiters_in_order() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let root = unique_root("zklock-holders-json");
    let holder_client = client(&connect);
    let holder = InterProcessMutex::new(holder_client.clone(), &root)
        .unwrap()
        .with_data("host \"a\"\n\\ 17");
    let guard = holder.lock().unwrap();
    // Two waiters: one with data that is not UTF-8, one with text.
    let waiters: Vec<(SharedClient, Arc<InterProcessMutex>)> =
        [vec![0xff, 0x00, 0x7f], b"w2".to_vec()]
            .into_iter()
            .map(|data| {
                let c = client(&connect);
                let m = Arc::new(
                    InterProcessMutex::new(c.clone(), &root)
                        .unwrap()
                        .with_data(data),
                );
                (c, m)
            })
            .collect();
    let mut threads = Vec::new();
    for (i, (_, m)) in waiters.iter().enumerate() {
        let m = m.clone();
        threads.push(std::thread::spawn(move || drop(m.lock().unwrap())));
        eventually(PATIENCE, "the waiter queues", || {
            children(holder_client.as_ref(), &root).len() == i + 2
        });
    }

    let out = run(zklock().args(["holders", "--json", "--connect", &connect, &root]));
    assert!(out.status.success(), "{out:?}");
    let listing = String::from_utf8(out.stdout.clone()).unwrap();
    let objects: Vec<serde_json::Value> = listing
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(objects.len(), 3, "{listing}");
    let hex = |c: &SharedClient| format!("0x{:x}", c.session().session_id().unwrap());
    let nodes = children(holder_client.as_ref(), &root);
    let expected = [
        (true, hex(&holder_client), "host \"a\"\n\\ 17", "utf-8"),
        (false, hex(&waiters[0].0), "ff007f", "hex"),
        (false, hex(&waiters[1].0), "w2", "utf-8"),
    ];
    for (position, (object, (holds, session, data, encoding))) in
        objects.iter().zip(expected).enumerate()
    {
        assert_eq!(object["position"], position, "{listing}");
        assert_eq!(object["is_holder"], holds, "{listing}");
        assert_eq!(object["session_id"], session.as_str(), "{listing}");
        assert_eq!(object["data"], data, "{listing}");
        assert_eq!(object["data_encoding"], encoding, "{listing}");
        assert_eq!(object["kind"], "mutex", "{listing}");
        let node = object["node"].as_str().unwrap();
        assert!(nodes.iter().any(|n| n == node), "{node} not in {nodes:?}");
        assert_eq!(object["path"], format!("{root}/{node}"), "{listing}");
    }
    assert_eq!(
        objects[0]["node"],
        guard.node_path().unwrap().rsplit('/').next().unwrap()
    );
    drop(guard);
    for t in threads {
        t.join().unwrap();
    }
}
