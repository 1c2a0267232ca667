//! Runs every program of the cookbook (`recipes/`) so none of them can rot: each recipe's
//! `run` is called in-process on the embedded in-memory ensemble (`--memory`, whatever
//! `ZK_CONNECT` says), and `processes` against the shared real server, re-entering this test
//! binary for its children. Each recipe checks its own promises and returns what happened;
//! the tests check that story.

// Each recipe is a stand-alone program that includes `recipes/support.rs` itself; here all
// seven are modules of one crate, so that file is compiled seven times, on purpose.
#![allow(clippy::duplicate_mod)]

#[path = "../recipes/fencing.rs"]
mod fencing;
#[path = "../recipes/leader_election.rs"]
mod leader_election;
#[path = "../recipes/lock_lost.rs"]
mod lock_lost;
#[path = "../recipes/multi_lock.rs"]
mod multi_lock;
#[path = "../recipes/processes.rs"]
mod processes;
#[path = "../recipes/quickstart.rs"]
mod quickstart;
#[path = "../recipes/stolen_lock.rs"]
mod stolen_lock;

use std::process::Command;

use zk_locks::LockState;

fn memory() -> Vec<String> {
    let _ = env_logger::builder().is_test(true).try_init();
    vec!["--memory".to_string()]
}

#[test]
fn quickstart_runs_the_three_acts() {
    let story = quickstart::run(&memory()).unwrap();
    assert_eq!(story.mutex_turns.len(), quickstart::WORKERS);
    let mut workers: Vec<usize> = story.mutex_turns.iter().map(|t| t.0).collect();
    workers.sort_unstable();
    assert_eq!(workers, (0..quickstart::WORKERS).collect::<Vec<_>>());
    assert!(story.mutex_turns.windows(2).all(|w| w[0].1 < w[1].1));
    assert!((1..=quickstart::WORKERS - 2).contains(&story.max_readers));
    assert!((1..=quickstart::LEASES).contains(&story.max_leases));
}

#[test]
fn lock_lost_goes_suspect_then_lost() {
    let outcome = lock_lost::run(&memory()).unwrap();
    assert_eq!(
        outcome.states,
        [LockState::Held, LockState::Suspect, LockState::Lost]
    );
    assert!(outcome.steps_while_held > 0);
    assert!(outcome.rival_won_while_holder_suspect);
}

/// The real-ensemble path: the holder's link is frozen by a `FaultProxy` (one session
/// timeout, 4 s, until the client declares the session lost).
#[test]
fn lock_lost_on_a_real_server_goes_suspect_then_lost() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let outcome = lock_lost::run(&["--connect".into(), server.connect_string()]).unwrap();
    assert_eq!(
        outcome.states,
        [LockState::Held, LockState::Suspect, LockState::Lost]
    );
    assert!(outcome.steps_while_held > 0);
}

#[test]
fn fencing_rejects_the_stale_writer() {
    let store = fencing::run(&memory()).unwrap();
    let log = store.log();
    let verdicts: Vec<(&str, bool)> = log.iter().map(|(w, _, ok)| (w.as_str(), *ok)).collect();
    assert_eq!(verdicts, [("A", true), ("B", true), ("A", false)]);
    assert!(log[1].1 > log[0].1, "B's token is newer: {log:?}");
    assert_eq!(store.value(), "written by B");
}

#[test]
fn multi_lock_conserves_money_and_gives_up_cleanly() {
    let outcome = multi_lock::run(&memory()).unwrap();
    assert_eq!(outcome.balances.iter().sum::<i64>(), 300);
    assert!(outcome.transfers > 0);
    assert!(outcome.timed_out_while_held);
    assert_eq!(outcome.leftover_nodes, 0);
}

#[test]
fn leader_election_fails_over_to_every_candidate() {
    let terms = leader_election::run(&memory()).unwrap();
    assert_eq!(terms.len(), 3);
    assert!(terms.windows(2).all(|w| w[0].token < w[1].token));
    assert!(terms.windows(2).all(|w| w[0].leader != w[1].leader));
}

/// Where `processes_child` finds its arguments (one per line).
/// ACLs need a real server: every way in is refused to strangers, the peer takes over.
#[test]
fn stolen_lock_attempts_are_refused() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let outcome = stolen_lock::run(&["--connect".into(), server.connect_string()]).unwrap();
    assert_eq!(outcome.refusals.len(), 6, "{:?}", outcome.refusals);
    assert!(outcome.peer_took_over);
}

const CHILD_ARGS_ENV: &str = "ZK_LOCKS_RECIPE_CHILD_ARGS";

#[test]
fn processes_share_a_lock_and_survive_a_killed_holder() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let args = ["--connect".to_string(), server.connect_string()];
    // Each child re-runs this test binary, filtered down to `processes_child`.
    let outcome = processes::run_with(&args, &|child_args| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "processes_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ARGS_ENV, child_args.join("\n"));
        cmd
    })
    .unwrap();
    assert_eq!(outcome.counter, outcome.expected);
    assert!(outcome.expected > 0);
    // The workers went ahead only after the holder was killed (once its session expired).
    assert!(outcome.waited_for_expiry > std::time::Duration::ZERO);
}

/// Not a test: the child process of `processes_share_a_lock_and_survive_a_killed_holder`.
#[test]
#[ignore = "entry point for child processes of the processes recipe"]
fn processes_child() {
    let Ok(args) = std::env::var(CHILD_ARGS_ENV) else {
        return;
    };
    let args: Vec<String> = args.lines().map(String::from).collect();
    let outcome = processes::run_with(&args, &|_| unreachable!("children do not spawn"));
    assert!(outcome.is_ok(), "child failed: {:?}", outcome.err());
}
