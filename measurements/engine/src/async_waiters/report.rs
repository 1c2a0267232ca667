//! The run as a markdown table (one row per library) with its notes, and as SVG bar charts
//! (`async_waiters --svg DIR`).

use std::fmt::Write;

use super::{CancelResult, Report, SideReport};
use crate::chart::{Bar, Bars, Group};

/// `12345` as `12,345`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The table and, under it, what each cancellation ended as.
pub fn render(report: &Report) -> String {
    let p = &report.plan;
    let cancels = thousands(p.cancelled());
    let mut out = format!(
        "{} waiters over {} locks and {} sessions per side (and a holder session), in one tokio \
         process ({} worker threads); session timeout {:?}, stall bound {:?}; load average {} \
         at the start, {} at the end.\n\n",
        thousands(p.waiters),
        thousands(p.locks),
        p.sessions,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        p.session_timeout,
        p.stall_bound,
        report.load_before,
        report.load_after,
    );
    let _ = writeln!(
        out,
        "| library / API | threads at {} waiters (before) | KiB per waiter | drain | orphans \
         after {cancels} queued cancels | orphans after {cancels} mid-create cancels | stalled \
         kept waiters (queued / mid-create) |",
        thousands(p.waiters)
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    for side in &report.sides {
        let q = &side.queue;
        let secs = q.drain.as_secs_f64();
        let _ = writeln!(
            out,
            "| {} | {} ({}) | {:.1} | {:.2} s ({:.0}/s) | {} | {} | {} / {} of {} |",
            side.library,
            thousands(q.queued.threads as usize),
            q.before.threads,
            q.kib_per_waiter(p.waiters),
            secs,
            q.acquired as f64 / secs.max(1e-9),
            thousands(side.queued.orphans),
            thousands(side.mid_create.orphans),
            thousands(side.queued.stalled),
            thousands(side.mid_create.stalled),
            thousands(side.mid_create.kept),
        );
    }
    out.push('\n');
    for side in &report.sides {
        for (what, c) in [("queued", &side.queued), ("mid-create", &side.mid_create)] {
            let _ = writeln!(out, "- {}, {what} cancels: {}", side.library, outcome(c));
        }
    }
    out
}

fn outcome(c: &CancelResult) -> String {
    let mut s = format!(
        "{} of {} ended without the lock, {} acquired before the cancel took; {} of {} kept \
         waiters acquired; {} nodes left",
        thousands(c.cancelled),
        thousands(c.cancels),
        thousands(c.granted),
        thousands(c.kept - c.stalled),
        thousands(c.kept),
        thousands(c.orphans),
    );
    if let Some(e) = &c.first_error {
        let _ = write!(s, "; {} errors, the first: {e}", c.errors);
    }
    s
}

/// The series name of a side in the charts (ours in the blue of every chart).
fn series(side: &SideReport) -> &'static str {
    match side.library.starts_with("zk-locks") {
        true => "zk-locks",
        false => "zookeeper-client 0.11",
    }
}

/// The charts: (file name, chart).
pub fn charts(report: &Report) -> Vec<(&'static str, Bars)> {
    let p = &report.plan;
    let note = |what: &str| {
        format!(
            "{what}; {} waiters over {} locks and {} sessions, one tokio process; load average \
             {} → {}; cargo run --release --features testing --example async_waiters -- --svg DIR",
            p.waiters, p.locks, p.sessions, report.load_before, report.load_after
        )
    };
    let bars = |f: &dyn Fn(&SideReport) -> f64| -> Vec<Bar> {
        report
            .sides
            .iter()
            .map(|s| Bar {
                series: series(s),
                value: f(s),
                high: None,
            })
            .collect()
    };
    let cost = Bars {
        title: "What a waiting acquire costs".into(),
        unit: "KiB".into(),
        note: note("resident memory growth per queued waiter"),
        groups: vec![Group {
            label: "resident memory per waiter".into(),
            bars: bars(&|s| s.queue.kib_per_waiter(p.waiters)),
        }],
    };
    let drain = Bars {
        title: "The queue drained".into(),
        unit: "s".into(),
        note: note("from the holders' release to the last waiter's acquisition"),
        groups: vec![Group {
            label: format!("{} waiters", p.waiters),
            bars: bars(&|s| s.queue.drain.as_secs_f64()),
        }],
    };
    let orphans = Bars {
        title: "Nodes left behind by cancelled acquires".into(),
        unit: "nodes".into(),
        note: note("nodes left once the kept waiters are done"),
        groups: vec![
            Group {
                label: format!("{} cancelled while queued", p.cancelled()),
                bars: bars(&|s| s.queued.orphans as f64),
            },
            Group {
                label: format!("{} cancelled mid-create", p.cancelled()),
                bars: bars(&|s| s.mid_create.orphans as f64),
            },
        ],
    };
    vec![
        ("async-waiters-memory.svg", cost),
        ("async-waiters-drain.svg", drain),
        ("async-waiters-orphans.svg", orphans),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_are_separated() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(10_067), "10,067");
        assert_eq!(super::thousands(1_234_567), "1,234,567");
    }
}
