//! Runs the async waiters' engine of `measurements/async_waiters.rs`
//! (`zk_locks_measurements::async_waiters`) small against the shared server (200 waiters over
//! 10 locks and 4 sessions, a queue of 40 first, 20 cancels with the link suspended, 100
//! guards dropped), so the program cannot rot, and holds both our sides (the async acquire
//! and the blocking API) to what they promise: every waiter drains, a cancelled acquire leaves
//! no node behind whether it is given up while queued, mid-create or with its link down, no
//! kept waiter stalls, every dropped guard's node goes; and our async side waits without a
//! thread per waiter. Counts only, no timings. The async client's counts are reported, not
//! asserted (they are what the measurement is for). About 15 s.

use zk_locks::testing::shared_server;
use zk_locks_measurements::async_waiters::{self, Plan, SideReport};

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
    assert_eq!(report.sides.len(), 3, "{table}");
    for side in &report.sides {
        assert_eq!(side.small_queue.acquired, plan.small().waiters, "{table}");
        assert_eq!(side.queue.acquired, plan.waiters, "{table}");
        assert!(side.queue.queued.threads > 0, "{table}");
        assert_eq!(side.lag.dropped, plan.drops, "{table}");
        assert_eq!(
            table.matches(&format!("| {} |", side.library)).count(),
            2,
            "no rows for {} in\n{table}",
            side.library
        );
    }
    let ours = |prefix: &str| -> &SideReport {
        report
            .sides
            .iter()
            .find(|s| s.library.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} is measured\n{table}"))
    };
    let (blocking, asynchronous) = (ours("zk-locks blocking"), ours("zk-locks async"));
    // The blocking API: one blocking thread per waiter while they wait (some of them left
    // idle by the smaller queue before, so counted in its baseline).
    assert!(
        blocking.queue.queued.threads >= plan.waiters as u64,
        "{table}"
    );
    // The async acquire: no thread per waiter, at either size (a few threads of slack for
    // the runtime's own).
    for q in [&asynchronous.small_queue, &asynchronous.queue] {
        assert!(
            q.queued.threads < q.before.threads + 8,
            "async waiters grew the threads\n{table}"
        );
    }
    for side in [blocking, asynchronous] {
        for (what, c) in [
            ("queued", &side.queued),
            ("mid-create", &side.mid_create),
            ("link-suspended", &side.suspended),
        ] {
            let who = side.library;
            assert_eq!(c.orphans, 0, "{who}: {what} cancels left nodes\n{table}");
            assert_eq!(c.stalled, 0, "{who}: kept waiters stalled, {what}\n{table}");
            assert_eq!(c.errors, 0, "{who}, {what}: {:?}\n{table}", c.first_error);
            assert_eq!(c.cancelled + c.granted, c.cancels, "{who}, {what}\n{table}");
        }
    }
    assert!(
        table.contains("| library / API | threads at 40 waiters (before) | threads at 200 waiters"),
        "{table}"
    );
}
