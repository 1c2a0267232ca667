//! Runs the holder-cost engine of `measurements/holder_cost.rs`
//! (`zk_locks_measurements::holder_cost`) small against the shared server, so that the program
//! cannot rot, and checks the design's count on the server's own counters: sessions that hold
//! locks send about `30/T` more requests per second each (`6/T` of them writes, counted by the
//! zxid), the same for one lock as for five, and stop once `T` has passed since the last
//! release.

use std::time::Duration;

use zk_locks::testing::shared_server;
use zk_locks_measurements::holder_cost::{self, Plan, Servers};

#[test]
fn holders_pay_per_session_not_per_lock_and_idle_sessions_do_not() {
    let Some(server) = shared_server() else {
        return;
    };
    let servers = Servers {
        connect: server.connect_string(),
        members: vec![server.addr()],
        leader: 0,
    };
    let plan = Plan {
        sessions: 2,
        locks: 10,
        session_timeout: Duration::from_secs(2),
        window: Duration::from_secs(2),
        settle: Duration::from_millis(500),
    };
    let report = holder_cost::run(&servers, &plan, "/holder-cost-smoke")
        .unwrap_or_else(|e| panic!("holder cost run failed: {e}"));
    let table = holder_cost::render(&report);
    assert_eq!(report.windows.len(), 4, "{table}");
    let expected = report.expected_syncs_per_second();
    let [_, one_each, many, idle_again] = &report.windows[..] else {
        unreachable!()
    };
    // The syncs replace some pings, and a loaded machine delays some: generous bounds, but a
    // cost per lock (5 locks per session here) or none at all falls outside them.
    for held in [one_each, many] {
        let extra = report.extra_per_second(held);
        assert!(
            extra > 0.4 * expected && extra < 1.6 * expected,
            "{}: {extra:.1} requests/s above idle, the design sends {expected:.1}\n{table}",
            held.label
        );
    }
    // The writes that bind the proof to a quorum: `6/T` a session while it holds, none idle.
    let writes = report.expected_writes_per_second();
    for held in [one_each, many] {
        let committed = held.writes_per_second();
        assert!(
            committed > 0.4 * writes && committed < 1.6 * writes,
            "{}: {committed:.1} writes/s, the design sends {writes:.1}\n{table}",
            held.label
        );
    }
    assert!(
        idle_again.writes_per_second() < 0.25 * writes,
        "idle sessions went on writing\n{table}"
    );
    let after = report.extra_per_second(idle_again);
    assert!(
        after < 0.25 * expected,
        "idle sessions went on proving: {after:.1} requests/s above idle\n{table}"
    );
    // The server runs on this machine: its CPU time is read.
    assert!(
        report.windows.iter().all(|w| w.leader_cpu_ns.is_some()),
        "{table}"
    );
}
