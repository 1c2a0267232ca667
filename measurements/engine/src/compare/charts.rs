//! The comparison as pictures (`compare --svg DIR`): latency beside Curator's (the median's bar,
//! the 99th percentile's whisker), contended throughput, and the long queues' drain and memory.

use super::queue::{median, QueueReport, QueueRun};
use super::{Report, Scenario};
use crate::chart::{Bar, Bars, Group};

const OURS: &str = "zk-locks";
const CURATOR: &str = "Curator 5.4";

fn machine_note(load_before: f64, load_after: f64, what: &str) -> String {
    format!(
        "{what}; load average {load_before:.1} → {load_after:.1}; \
         cargo run --release --features testing --example compare -- --queue --svg DIR"
    )
}

/// The charts of the main comparison: (file name, chart).
pub fn charts(report: &Report) -> Vec<(&'static str, Bars)> {
    let us = |ns: u64| ns as f64 / 1e3;
    let m = &report.machine;
    let mut latency = Vec::new();
    let mut handoff = Vec::new();
    let mut rate = Vec::new();
    for row in &report.rows {
        let (o, c) = (&row.ours, &row.curator);
        let pair = |f: &dyn Fn(&super::Run) -> (f64, Option<f64>)| {
            let (ov, oh) = f(o);
            let (cv, ch) = f(c);
            vec![
                Bar {
                    series: OURS,
                    value: ov,
                    high: oh,
                },
                Bar {
                    series: CURATOR,
                    value: cv,
                    high: ch,
                },
            ]
        };
        let label = row.scenario.title();
        let percentiles = |r: &super::Run| (us(r.p50_ns), Some(us(r.p99_ns)));
        match row.scenario {
            Scenario::RoundTrip | Scenario::Uncontended(_) => latency.push(Group {
                label,
                bars: pair(&percentiles),
            }),
            Scenario::Contended { .. } => {
                handoff.push(Group {
                    label: label.clone(),
                    bars: pair(&percentiles),
                });
                rate.push(Group {
                    label,
                    bars: pair(&|r| (r.per_second(), None)),
                });
            }
        }
    }
    let note = |what: &str| machine_note(m.load_before, m.load_after, what);
    vec![
        (
            "compare-latency.svg",
            Bars {
                title: "Acquire + release, one session (shorter is better)".into(),
                unit: "µs".into(),
                note: note(&format!(
                    "bar: median, whisker: 99th percentile, medians of {} rounds",
                    report.rounds
                )),
                groups: latency,
            },
        ),
        (
            "compare-handoff.svg",
            Bars {
                title: "Contended hand-off: a release to the next holder's return".into(),
                unit: "µs".into(),
                note: note("bar: median, whisker: 99th percentile"),
                groups: handoff,
            },
        ),
        (
            "compare-contended.svg",
            Bars {
                title: "Contended throughput, zero hold time (longer is better)".into(),
                unit: "acquisitions/s".into(),
                note: note("median of the rounds"),
                groups: rate,
            },
        ),
    ]
}

/// The charts of the long queues: (file name, chart).
pub fn queue_charts(report: &QueueReport) -> Vec<(&'static str, Bars)> {
    let groups = |f: &dyn Fn(&QueueRun, f64) -> f64| {
        report
            .rows
            .iter()
            .map(|row| {
                let waiters = row.queue.waiters as f64;
                Group {
                    label: row.queue.title(),
                    bars: vec![
                        Bar {
                            series: OURS,
                            value: median(&row.ours, |q| f(q, waiters)),
                            high: None,
                        },
                        Bar {
                            series: CURATOR,
                            value: median(&row.curator, |q| f(q, waiters)),
                            high: None,
                        },
                    ],
                }
            })
            .collect()
    };
    let m = &report.machine;
    vec![
        (
            "queue-drain.svg",
            Bars {
                title: "A long queue drained: the holder's release to the last waiter's".into(),
                unit: "seconds (shorter is better)".into(),
                note: machine_note(m.load_before, m.load_after, "median of the rounds"),
                groups: groups(&|q, _| q.drain.elapsed_ns as f64 / 1e9),
            },
        ),
        (
            "queue-memory.svg",
            Bars {
                title: "Resident memory per queued waiter".into(),
                unit: "KiB per waiter (shorter is better)".into(),
                note: machine_note(
                    m.load_before,
                    m.load_after,
                    "growth from before the sessions to every waiter queued",
                ),
                groups: groups(&|q, waiters| q.rss_growth as f64 / 1024.0 / waiters),
            },
        ),
    ]
}
