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

/// The lock failover chart: the longest time with no acquisition, per fault.
pub fn charts(results: &[Series]) -> Vec<(&'static str, Bars)> {
    let samples = |fault: Fault, name: &str| -> Vec<f64> {
        results
            .iter()
            .filter(|(f, n, _)| *f == fault && *n == name)
            .flat_map(|(_, _, s)| s.iter().filter_map(|x| x.gap_ms).map(|g| g as f64))
            .collect()
    };
    let trials = results.iter().map(|r| r.2.len()).max().unwrap_or(0);
    let groups = Fault::ALL
        .iter()
        .map(|&fault| Group {
            label: fault.label().into(),
            bars: vec![
                bar("zk-locks", &samples(fault, "zk-locks")),
                bar(CURATOR, &samples(fault, "Curator")),
            ],
        })
        .collect();
    vec![(
        "failover-gaps.svg",
        Bars {
            title: "Mutex failover: the longest time with no holder (shorter is better)".into(),
            unit: "ms, from the last acquisition before the fault".into(),
            note: note(
                trials,
                "a holder and two waiters on one mutex, one client per member; \
                 cargo run --release --features testing --example failover -- --svg DIR",
            ),
            groups,
        },
    )]
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
            label: fault.label().into(),
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
    vec![
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
    ]
}
