//! Runs the comparison engine of `measurements/compare.rs` (`zk_locks_measurements::compare`)
//! with tiny counts against the shared server, so the program and its Java driver cannot rot.
//! No timing is asserted: only that every scenario produced a row with every side measured.

use zk_locks::testing::{curator, shared_server};
use zk_locks_measurements::compare as bench;

#[test]
fn comparison_produces_every_row_for_every_client() {
    if !curator::require_curator() {
        return;
    }
    let Some(server) = shared_server() else {
        return;
    };
    let class_dir =
        std::env::temp_dir().join(format!("zk-locks-compare-smoke-{}", std::process::id()));
    let plan = bench::Plan::tiny();
    let report = bench::run(&server.connect_string(), &plan, &class_dir);
    let _ = std::fs::remove_dir_all(&class_dir);
    let report = report.unwrap_or_else(|e| panic!("comparison failed: {e}"));

    let expected = 1 + bench::RECIPES.len() + plan.sessions.len() + bench::CONTENDED_OTHERS.len();
    assert_eq!(plan.scenarios().len(), expected);
    assert_eq!(report.rows.len(), expected, "{report:?}");
    for row in &report.rows {
        for (side, run) in [
            ("zk-locks", &row.ours),
            ("zk-locks on the crate", &row.ours_crate),
            ("Curator", &row.curator),
        ] {
            assert!(run.n > 0, "{side} did nothing in {:?}", row.scenario);
            assert!(
                run.packets > 0,
                "{side} sent no request in {:?}",
                row.scenario
            );
        }
        // Our client counts its own round trips; the others wait for every request.
        let ours = row
            .ours
            .round_trips
            .expect("our client's round trips are counted");
        assert!(ours > 0, "no round trip counted in {:?}", row.scenario);
        assert_eq!(row.ours_crate.round_trips, None);
        assert_eq!(row.curator.round_trips, None);
        // The server runs on this machine: its CPU time and each client process's are read.
        for run in [&row.ours, &row.ours_crate, &row.curator] {
            assert!(run.server_cpu_ns.is_some(), "{:?}: {run:?}", row.scenario);
            assert!(run.client_cpu_ns.is_some(), "{:?}: {run:?}", row.scenario);
        }
    }

    let table = bench::render(&report);
    assert!(table.contains(
        "| scenario | metric | zk-locks | crate backend | Curator 5.4 | zk-locks / Curator |"
    ));
    for needle in [
        "round trips/op",
        "round trips/acquisition",
        "server CPU µs/op",
        "server CPU µs/acquisition",
        "client CPU µs/acquisition",
        "request round trip",
        "uncontended mutex",
        "uncontended semaphore-mutex",
        "uncontended write",
        "uncontended read",
        "contended mutex, 2 sessions",
        "contended mutex, 4 sessions",
        "contended mutex, 8 sessions",
        "contended semaphore-mutex, 4 sessions",
        "contended write, 4 sessions",
        "contended read-write, 2 sessions",
    ] {
        assert!(table.contains(needle), "no {needle:?} row in\n{table}");
    }
    // Every data line has six cells: scenario, metric, ours, ours on the crate, Curator, ratio.
    let data_lines: Vec<_> = table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| scenario"))
        .collect();
    assert_eq!(data_lines.len(), expected * 7, "{table}");
    for line in data_lines {
        let cells: Vec<_> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 6, "{line}");
        assert!(
            cells[2..5].iter().all(|c| c.parse::<f64>().is_ok()),
            "{line}"
        );
    }
}
