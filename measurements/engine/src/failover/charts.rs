//! The failover tables as pictures (`failover --svg DIR`): per fault, each library's median as
//! a bar and its 90th percentile as the whisker, over the trials.

use super::election::report::quantile;
use super::election::{self, Library};
use super::{Fault, Series};
use crate::chart::{Bar, Bars, Group};

/// A library's bar: the median of `values`, the whisker at their 90th percentile.
fn bar(series: &'static str, values: &[f64]) -> Bar {
    Bar {
        series,
        value: quantile(values, 0.5).unwrap_or(f64::NAN),
        high: quantile(values, 0.9),
    }
}

/// The curator side's name as the charts print it (the same colour either way).
const CURATOR: &str = "Curator 5.4";

fn note(trials: usize, what: &str) -> String {
    format!(
        "bar: median, whisker: 90th percentile of {trials} trials per fault and library; {what}; \
         3-member ZooKeeper 3.8 ensemble on loopback, session 10 s"
    )
}

/// The lock failover charts: the longest time with no acquisition, per fault; and for the
/// freezes, the frozen client's next acquisition.
pub fn charts(results: &[Series]) -> Vec<(&'static str, Bars)> {
    let samples = |fault: Fault, name: &str, f: fn(&super::Sample) -> Option<u64>| -> Vec<f64> {
        results
            .iter()
            .filter(|(fa, n, _)| *fa == fault && *n == name)
            .flat_map(|(_, _, s)| s.iter().filter_map(f).map(|g| g as f64))
            .collect()
    };
    let mut faults: Vec<Fault> = Vec::new();
    for (fault, _, _) in results {
        if !faults.contains(fault) {
            faults.push(*fault);
        }
    }
    let groups = |faults: &[Fault], f: fn(&super::Sample) -> Option<u64>| -> Vec<Group> {
        faults
            .iter()
            .map(|&fault| Group {
                label: fault.label(),
                bars: vec![
                    bar("zk-locks", &samples(fault, "zk-locks", f)),
                    bar(CURATOR, &samples(fault, "Curator", f)),
                ],
            })
            .collect()
    };
    let trials = results.iter().map(|r| r.2.len()).max().unwrap_or(0);
    let command = "cargo run --release --features testing --example failover -- --svg DIR";
    let kills: Vec<Fault> = faults.iter().copied().filter(|f| !f.is_freeze()).collect();
    let mut charts = vec![(
        "failover-gaps.svg",
        Bars {
            title: "Mutex failover: the longest time with no holder (shorter is better)".into(),
            unit: "ms, from the last acquisition before the fault".into(),
            note: note(
                trials,
                &format!("a holder and two waiters on one mutex, one client per member; {command}"),
            ),
            groups: groups(&kills, |s| s.gap_ms),
        },
    )];
    // A run of the freezes alone leaves the kills' chart as it was.
    charts.retain(|_| !kills.is_empty());
    let freezes: Vec<Fault> = faults.iter().copied().filter(|f| f.is_freeze()).collect();
    if !freezes.is_empty() {
        charts.push((
            "failover-freezes.svg",
            Bars {
                title: "A member frozen: the frozen client's next acquisition (shorter is better)"
                    .into(),
                unit: "ms from the freeze".into(),
                note: note(
                    trials,
                    &format!(
                        "SIGSTOP of the holder's or a waiter's member, then SIGCONT; {command} --freezes"
                    ),
                ),
                groups: groups(&freezes, |s| s.holder_ms),
            },
        ));
    }
    charts
}

/// The election charts: a new leader after a clean close and after the leader's member is
/// killed (milliseconds), and after a kill -9 of the leader's process (seconds: both libraries
/// wait out the dead leader's session), from the fault and from the server's last contact.
pub fn election_charts(results: &[election::Series]) -> Vec<(&'static str, Bars)> {
    let samples = |fault: election::Fault,
                   library: Library,
                   f: &dyn Fn(&election::Sample) -> Option<f64>|
     -> Vec<f64> {
        results
            .iter()
            .filter(|(fa, l, _)| *fa == fault && *l == library)
            .flat_map(|(_, _, s)| s.iter().filter_map(f).collect::<Vec<_>>())
            .collect()
    };
    let pair = |fault, f: &dyn Fn(&election::Sample) -> Option<f64>| {
        vec![
            bar("zk-locks", &samples(fault, Library::Ours, f)),
            bar(CURATOR, &samples(fault, Library::Curator, f)),
        ]
    };
    let trials = results.iter().map(|r| r.2.len()).max().unwrap_or(0);
    let command =
        "cargo run --release --features testing --example failover -- --elections --svg DIR";
    let fast = [election::Fault::Close, election::Fault::KillMember]
        .into_iter()
        .map(|fault| Group {
            label: fault.label(),
            bars: pair(fault, &|s| s.next_ms),
        })
        .collect();
    let freezes: Vec<Group> = election::Fault::freezes()
        .into_iter()
        .filter(|f| results.iter().any(|r| r.0 == *f))
        .map(|fault| Group {
            label: fault.label(),
            bars: pair(fault, &|s| s.next_ms),
        })
        .collect();
    let seconds = |v: Option<f64>| v.map(|ms| ms / 1e3);
    let kill = vec![
        Group {
            label: "from the kill".into(),
            bars: pair(election::Fault::KillProcess, &|s| seconds(s.next_ms)),
        },
        Group {
            label: "from the server last hearing it".into(),
            bars: pair(election::Fault::KillProcess, &|s| {
                seconds(Some(s.heard_ms? + s.next_ms?))
            }),
        },
    ];
    let ran = |fault: election::Fault| results.iter().any(|r| r.0 == fault);
    let mut charts = vec![
        (
            "election-failover.svg",
            Bars {
                title: "LeaderLatch: a new leader leads (shorter is better)".into(),
                unit: "ms from the fault".into(),
                note: note(
                    trials,
                    &format!("three participants, one OS process each; {command}"),
                ),
                groups: fast,
            },
        ),
        (
            "election-kill.svg",
            Bars {
                title: "LeaderLatch: a new leader after kill -9 of the leader's process".into(),
                unit:
                    "seconds (the dead leader's session expires T after the server last heard it)"
                        .into(),
                note: note(trials, command),
                groups: kill,
            },
        ),
    ];
    // A run of the freezes alone leaves the other charts as they were.
    if !ran(election::Fault::KillProcess) {
        charts.clear();
    }
    if !freezes.is_empty() {
        charts.push((
            "election-freeze.svg",
            Bars {
                title: "LeaderLatch: the leader's member frozen, the leader served again (shorter is better)".into(),
                unit: "ms from the freeze".into(),
                note: note(trials, &format!("a read through the leader's session sent at the freeze; {command} --freezes")),
                groups: freezes,
            },
        ));
    }
    charts
}
