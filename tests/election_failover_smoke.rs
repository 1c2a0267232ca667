//! Runs the election mode of `measurements/failover.rs`
//! (`zk_locks_measurements::failover::election`) for one trial of the clean close against the
//! shared server, so that the mode, its participant processes and Curator's cannot rot: each
//! library elects again well inside a session timeout (a close that left the next leader
//! waiting for the session to expire would take 10 s), with never two leaders at once.
//!
//! No test harness (`harness = false`): the participants of our library are this very program
//! run again in participant mode, as the failover program re-executes itself.

use zk_locks::testing::{curator, shared_server};
use zk_locks_measurements::failover::election::{
    self, participant_main, Fault, Launcher, Library, Plan, Target,
};

fn main() {
    if let Some(status) = participant_main() {
        std::process::exit(status);
    }
    // `cargo test -- --list` (and runners that list first) must not run the trial.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !curator::require_curator() {
        return;
    }
    let Some(server) = shared_server() else {
        return;
    };
    let class_dir =
        std::env::temp_dir().join(format!("zk-locks-election-smoke-{}", std::process::id()));
    Launcher::compile_curator(&class_dir).unwrap_or_else(|e| panic!("compiling: {e}"));
    let launcher = Launcher {
        ours: std::env::current_exe().expect("this program's path"),
        curator_classes: Some(class_dir.clone()),
    };
    let target = Target {
        connect: server.connect_string(),
        members: vec![server.addr()],
        cluster: None,
    };
    let plan = Plan {
        trials: 1,
        faults: vec![Fault::Close],
        libraries: vec![Library::Ours, Library::Curator],
    };
    let results = election::run(&target, &plan, &launcher);
    let _ = std::fs::remove_dir_all(&class_dir);
    let results = results.unwrap_or_else(|e| panic!("election run failed: {e}"));
    let table = election::render(&results);
    assert_eq!(results.len(), 2, "{table}");
    for (_, library, samples) in &results {
        let [sample] = &samples[..] else {
            panic!("{}: {} samples\n{table}", library.name(), samples.len())
        };
        let next = sample.next_ms.unwrap_or(f64::MAX);
        assert!(
            next < 5000.0,
            "{}: the next leader led {next} ms after a clean close\n{table}",
            library.name()
        );
        assert_eq!(sample.overlap_ms, 0.0, "{}\n{table}", library.name());
        assert!(!sample.same_leader, "{}\n{table}", library.name());
        assert!(sample.requests.is_some_and(|r| r > 0), "{table}");
    }
    println!("{table}");
}
