//! Runs the long-queue scenario of `measurements/compare.rs` (`compare::queue`) with a tiny
//! queue against the shared server, so the program and its Java driver cannot rot. No timing
//! is asserted: only that both sides drained the whole queue, that the server counted their
//! requests, and that each release notified exactly one waiter (counted by the server).

use zk_locks::testing::{curator, shared_server};
use zk_locks_measurements::compare::queue;

#[test]
fn the_long_queue_drains_on_both_sides_with_one_notification_per_release() {
    if !curator::require_curator() {
        return;
    }
    let Some(server) = shared_server() else {
        return;
    };
    let class_dir =
        std::env::temp_dir().join(format!("zk-locks-queue-smoke-{}", std::process::id()));
    let plan = queue::QueuePlan::tiny();
    let report = queue::run_queues(&server.connect_string(), &plan, &class_dir);
    let _ = std::fs::remove_dir_all(&class_dir);
    let report = report.unwrap_or_else(|e| panic!("long queue failed: {e}"));

    assert_eq!(report.rows.len(), plan.queues.len());
    for row in &report.rows {
        let waiters = row.queue.waiters as u64;
        for (side, runs) in [("zk-locks", &row.ours), ("Curator", &row.curator)] {
            assert_eq!(runs.len(), plan.rounds, "{side}");
            for run in runs {
                assert_eq!(run.drain.n, waiters, "{side} did not drain: {run:?}");
                // The holder's delete and each waiter's own: at least two requests each.
                assert!(run.drain.packets >= 2 * waiters, "{side}: {run:?}");
                assert!(run.rss_growth > 0, "{side}: {run:?}");
                // One watch notification per release: the waiter right behind, nobody else.
                // (The shared server may carry other tests' sessions: at least one each.)
                if let Some(n) = run.notifications {
                    assert!(n >= waiters, "{side}: {run:?}");
                }
            }
        }
    }
    let table = queue::render_queues(&report);
    for needle in [
        "| queue of 20 waiters over 4 sessions | drain acquisitions/s |",
        "| queue of 20 waiters over 4 sessions | notifications/release |",
        "| queue of 20 waiters over 4 sessions | resident KiB/waiter |",
    ] {
        assert!(table.contains(needle), "no {needle:?} in\n{table}");
    }
}
