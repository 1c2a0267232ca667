//! `zklock --elect`: an active/passive daemon on Curator's LeaderSelector election — it runs
//! the command each time it is elected, queues again after each run until a stop signal —
//! and `zklock holders` naming the leader of a latch or a selector election. Needs a real
//! ZooKeeper (skipped otherwise, unless `ZK_LOCKS_REQUIRE_SERVER=1`); the usage test needs
//! nothing.

mod common;
mod zklock_support;

use std::path::Path;

use common::{children, eventually, unique_root};
use zk_locks::client::native::NativeClient;
use zk_locks::locks::{LeaderLatch, LeaderSelector};
use zk_locks::testing::shared_server;
use zklock_support::{client, run, temp_dir, wait_exit, zklock, PATIENCE};

/// The lines of `file` (none while it does not exist).
fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A daemon killed (SIGKILL) when the test ends, however it ends: a failed test leaves no
/// zklock running.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sigterm(child: &std::process::Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

#[test]
fn elect_options_are_checked() {
    for args in [
        &["--connect", "h:1", "--id", "a", "/p", "--", "true"][..],
        &["--connect", "h:1", "--elect", "--read", "/p", "--", "true"],
        &[
            "--connect",
            "h:1",
            "--elect",
            "--timeout",
            "1s",
            "/p",
            "--",
            "true",
        ],
        &["holders", "--connect", "h:1", "--elect", "/p"],
    ] {
        let out = run(zklock().args(args));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
    }
}

/// Two daemons take turns: the command runs again and again, never in both at once, with a
/// term that grows from run to run; a stop signal ends each, leaving no node.
#[test]
fn elected_daemons_take_turns_until_stopped() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let path = unique_root("zklock-elect");
    let dir = temp_dir("elect");
    let log = dir.join("runs");
    // Each run logs its start and end (with the id and the term) around a short pause.
    let script = format!(
        "echo \"start $0 $ZKLOCK_FENCING_TOKEN\" >> {0}; sleep 0.05; echo \"end $0\" >> {0}",
        log.display()
    );
    let mut daemons: Vec<Daemon> = ["a", "b"]
        .iter()
        .map(|id| {
            Daemon(
                zklock()
                    .args(["--connect", &connect, "--elect", "--id", id, &path])
                    .args(["--", "sh", "-c", &script, id])
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    eventually(PATIENCE, "runs of both daemons", || {
        let runs = lines(&log);
        ["a", "b"].iter().all(|id| {
            runs.iter()
                .filter(|l| l.starts_with(&format!("start {id} ")))
                .count()
                >= 2
        })
    });
    for d in &daemons {
        sigterm(&d.0);
    }
    for d in &mut daemons {
        let status = wait_exit(&mut d.0, "a daemon stops");
        // Stopped while waiting (128+15) or while the command ran (its status then: the
        // shell ends normally once its pause is over, or dies of the forwarded SIGTERM).
        assert!(matches!(status.code(), Some(0) | Some(143)), "{status:?}");
    }
    let runs = lines(&log);
    let mut terms = Vec::new();
    for pair in runs.chunks(2) {
        let [start, end] = pair else {
            break; // a run cut by the stop
        };
        let f: Vec<&str> = start.split(' ').collect();
        assert_eq!(f[0], "start", "{runs:?}");
        assert_eq!(
            *end,
            format!("end {}", f[1]),
            "two runs overlapped: {runs:?}"
        );
        terms.push(f[2].parse::<i64>().unwrap());
    }
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "{terms:?}");
    let observer = client(&connect);
    eventually(PATIENCE, "no node left", || {
        children(observer.as_ref(), &path).is_empty()
    });
}

/// `holders` names the leader: a LeaderLatch's first node (`leader`), and the holder of a
/// LeaderSelector's election, each with its id as data.
#[test]
fn holders_names_the_leader_of_a_latch_or_a_selector() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let latch_path = unique_root("zklock-latch");
    let latch = LeaderLatch::new(
        NativeClient::connect(&connect, PATIENCE).unwrap(),
        &latch_path,
        "x",
    )
    .unwrap();
    latch.start().unwrap();
    latch.await_leadership_for(PATIENCE).unwrap().unwrap();
    let out = run(zklock().args(["holders", "--connect", &connect, &latch_path]));
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        listing.starts_with("leader   latch") && listing.trim_end().ends_with(" x"),
        "{listing}"
    );
    let out = run(zklock().args(["holders", "--json", "--connect", &connect, &latch_path]));
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(
        json.contains("\"kind\":\"latch\"") && json.contains("\"data\":\"x\""),
        "{json}"
    );
    latch.close().unwrap();

    let selector_path = unique_root("zklock-selector");
    let (led_tx, led) = std::sync::mpsc::channel();
    let selector = LeaderSelector::new(
        NativeClient::connect(&connect, PATIENCE).unwrap(),
        &selector_path,
        move |l| {
            let _ = led_tx.send(());
            l.wait_while_leading(None);
        },
    )
    .unwrap()
    .with_id("y");
    selector.start().unwrap();
    led.recv_timeout(PATIENCE).unwrap();
    let out = run(zklock().args(["holders", "--connect", &connect, &selector_path]));
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.starts_with("holder") && listing.trim_end().ends_with(" y"),
        "{listing}"
    );
    selector.interrupt_leadership();
    selector.close().unwrap();
}

/// Leadership lost while the command runs (someone deleted the leader's node): the command
/// is terminated as for a lost lock, and the daemon queues again and runs it again.
#[test]
fn an_elected_daemon_that_loses_leadership_queues_again() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let path = unique_root("zklock-elect-lost");
    let dir = temp_dir("elect-lost");
    let log = dir.join("runs");
    let script = format!(
        "echo \"start $ZKLOCK_NODE\" >> {}; exec sleep 30",
        log.display()
    );
    let mut daemon = Daemon(
        zklock()
            .args(["--connect", &connect, "--elect", "--grace", "1s", &path])
            .args(["--", "sh", "-c", &script])
            .spawn()
            .unwrap(),
    );
    eventually(PATIENCE, "the first run", || lines(&log).len() == 1);
    let first = lines(&log)[0]["start ".len()..].to_string();
    let operator = client(&connect);
    zk_locks::ZkClient::delete(operator.as_ref(), &first, None).unwrap();
    eventually(PATIENCE, "a second run", || lines(&log).len() == 2);
    assert_ne!(lines(&log)[1], lines(&log)[0]);
    sigterm(&daemon.0);
    let status = wait_exit(&mut daemon.0, "the daemon stops");
    assert_eq!(status.code(), Some(143), "{status:?}");
}

/// A daemon whose command ends at once goes round after round: a stop signal ends it
/// whenever it lands — while it waits, while the command runs, or between two rounds (where
/// it used to be dropped with the round's channel, and the daemon ran on).
#[test]
fn a_stop_signal_between_two_rounds_stops_the_daemon() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let dir = temp_dir("elect-stop");
    for attempt in 0..8 {
        let path = unique_root("zklock-elect-stop");
        let log = dir.join(format!("runs-{attempt}"));
        let script = format!("echo run >> {}", log.display());
        let mut daemon = Daemon(
            zklock()
                .args(["--connect", &connect, "--elect", &path])
                .args(["--", "sh", "-c", &script])
                .spawn()
                .unwrap(),
        );
        eventually(PATIENCE, "a few rounds", || lines(&log).len() >= 3);
        sigterm(&daemon.0);
        let status = wait_exit(&mut daemon.0, "the daemon stops on SIGTERM");
        assert!(matches!(status.code(), Some(0) | Some(143)), "{status:?}");
    }
}

/// `--elect --id ""` is no id: the node holds `<host> <pid>` (zklock's pid), as the library's
/// selector stores without one. Before, the node held nothing (`holders` named nobody).
#[test]
fn an_empty_id_is_no_id() {
    let Some(server) = shared_server() else {
        return;
    };
    let connect = server.connect_string();
    let path = unique_root("zklock-elect-empty-id");
    let dir = temp_dir("elect-empty-id");
    let (started, stop) = (dir.join("started"), dir.join("stop"));
    // The command says it runs, then waits for the test to tell it to end.
    let script = format!(
        "touch {0}; while [ ! -e {1} ]; do sleep 0.01; done",
        started.display(),
        stop.display()
    );
    let mut daemon = Daemon(
        zklock()
            .args(["--connect", &connect, "--elect", "--id", "", &path])
            .args(["--", "sh", "-c", &script])
            .spawn()
            .unwrap(),
    );
    eventually(PATIENCE, "the command runs", || started.exists());
    let observer = client(&connect);
    let nodes = children(observer.as_ref(), &path);
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let data =
        zk_locks::ZkClient::get_data(observer.as_ref(), &format!("{path}/{}", nodes[0]), None)
            .unwrap()
            .0;
    let data = String::from_utf8(data).unwrap();
    assert!(
        data.ends_with(&format!(" {}", daemon.0.id())) && data.len() > 2,
        "{data:?}"
    );
    std::fs::write(&stop, b"").unwrap();
    sigterm(&daemon.0);
    wait_exit(&mut daemon.0, "the daemon stops");
}
