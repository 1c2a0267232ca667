//! Runs the async waiters' engine of `measurements/async_waiters.rs`
//! (`zk_locks_measurements::async_waiters`) small against the shared server (200 waiters over
//! 10 locks and 4 sessions), so the program cannot rot, and holds our side to what it
//! promises: every waiter drains, a cancelled acquire leaves no node behind whether it is
//! given up while queued or mid-create, and no kept waiter stalls. The async client's counts
//! are reported, not asserted (they are what the measurement is for). About 10 s.

use zk_locks::testing::shared_server;
use zk_locks_measurements::async_waiters::{self, Plan};

#[test]
fn async_waiters_table_is_produced_and_our_cancels_leave_nothing_behind() {
    let Some(server) = shared_server() else {
        return;
    };
    let plan = Plan::tiny();
    let report = async_waiters::run(&server.connect_string(), &plan)
        .unwrap_or_else(|e| panic!("async waiters run failed: {e}"));
    let table = async_waiters::report::render(&report);
    eprintln!("{table}");
    assert_eq!(report.sides.len(), 2, "{table}");
    for side in &report.sides {
        assert_eq!(side.queue.acquired, plan.waiters, "{table}");
        assert!(side.queue.queued.threads > 0, "{table}");
        assert!(
            table.contains(&format!("| {} |", side.library)),
            "no row for {} in\n{table}",
            side.library
        );
    }
    let ours = report
        .sides
        .iter()
        .find(|s| s.library.starts_with("zk-locks"))
        .expect("our side is measured");
    // One blocking thread per waiter while they wait.
    assert!(
        ours.queue.queued.threads >= ours.queue.before.threads + plan.waiters as u64,
        "{table}"
    );
    for (what, c) in [("queued", &ours.queued), ("mid-create", &ours.mid_create)] {
        assert_eq!(
            c.orphans, 0,
            "our {what} cancels left nodes behind\n{table}"
        );
        assert_eq!(
            c.stalled, 0,
            "our kept waiters stalled after {what} cancels\n{table}"
        );
        assert_eq!(c.errors, 0, "{what}: {:?}\n{table}", c.first_error);
        assert_eq!(c.cancelled + c.granted, c.cancels, "{what}\n{table}");
    }
    assert!(
        table.contains("| library / API | threads at 200 waiters (before) |"),
        "{table}"
    );
}
