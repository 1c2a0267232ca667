//! The run as markdown tables (one row per library each) with their notes, and as SVG bar charts
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

/// Milliseconds, to a tenth.
fn ms(d: std::time::Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Microseconds below a millisecond, else milliseconds to a tenth.
fn fine(d: std::time::Duration) -> String {
    match d.as_micros() {
        us @ 0..1_000 => format!("{us} µs"),
        _ => ms(d),
    }
}

/// The tables and, under them, what each cancellation ended as.
pub fn render(report: &Report) -> String {
    let p = &report.plan;
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
    let small = p.small();
    let _ = writeln!(
        out,
        "| library / API | threads at {} waiters (before) | threads at {} waiters (before) | \
         KiB per waiter at {} | drain of {} | timer lag while {} guards drop: max / p99 (idle: \
         max / p99) |",
        thousands(small.waiters),
        thousands(p.waiters),
        thousands(p.waiters),
        thousands(p.waiters),
        thousands(p.drops),
    );
    out.push_str("|---|---:|---:|---:|---:|---:|\n");
    for side in &report.sides {
        let (s, q, l) = (&side.small_queue, &side.queue, &side.lag);
        let secs = q.drain.as_secs_f64();
        let _ = writeln!(
            out,
            "| {} | {} ({}) | {} ({}) | {:.1} | {:.2} s ({:.0}/s) | {} / {} ({} / {}) |",
            side.library,
            thousands(s.queued.threads as usize),
            s.before.threads,
            thousands(q.queued.threads as usize),
            q.before.threads,
            q.kib_per_waiter(p.waiters),
            secs,
            q.acquired as f64 / secs.max(1e-9),
            ms(l.max),
            ms(l.p99),
            ms(l.idle_max),
            ms(l.idle_p99),
        );
    }
    let suspended = p.suspended_layout();
    let _ = writeln!(
        out,
        "\n| library / API | {} queued cancels: orphans / stalled kept | {} mid-create cancels: \
         orphans / stalled kept | {} cancels, link suspended {:?}: orphans / stalled kept |",
        thousands(p.cancelled()),
        thousands(p.cancelled()),
        thousands(suspended.cancelled()),
        p.suspension,
    );
    out.push_str("|---|---:|---:|---:|\n");
    for side in &report.sides {
        let cell = |c: &CancelResult| {
            format!(
                "{} / {} of {}",
                thousands(c.orphans),
                thousands(c.stalled),
                thousands(c.kept)
            )
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            side.library,
            cell(&side.queued),
            cell(&side.mid_create),
            cell(&side.suspended),
        );
    }
    out.push('\n');
    for side in &report.sides {
        for (what, c) in [
            ("queued", &side.queued),
            ("mid-create", &side.mid_create),
            ("link-suspended", &side.suspended),
        ] {
            let _ = writeln!(out, "- {}, {what} cancels: {}", side.library, outcome(c));
        }
        let l = &side.lag;
        let _ = writeln!(
            out,
            "- {}, {} guards dropped: every waiter ended and no node left {:.2} s after the \
             drop; {} ticks meanwhile; a waiter's release call: p99 {}, longest {}",
            side.library,
            thousands(l.dropped),
            l.cleared.as_secs_f64(),
            thousands(l.ticks),
            fine(l.release_p99),
            fine(l.release_max),
        );
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

/// The series name of a side in the charts (ours in blue, our blocking API light blue).
fn series(side: &SideReport) -> &'static str {
    match side.library {
        l if l.starts_with("zk-locks async") => "zk-locks async",
        l if l.starts_with("zk-locks") => "zk-locks blocking",
        _ => "zookeeper-client 0.11",
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
    let bars = |f: &dyn Fn(&SideReport) -> (f64, Option<f64>)| -> Vec<Bar> {
        report
            .sides
            .iter()
            .map(|s| {
                let (value, high) = f(s);
                Bar {
                    series: series(s),
                    value,
                    high,
                }
            })
            .collect()
    };
    let one = |f: fn(&SideReport) -> f64| move |s: &SideReport| (f(s), None);
    let threads = Bars {
        title: "Threads of the process with every waiter queued".into(),
        unit: "threads".into(),
        note: note("OS threads of the whole process (/proc/self/status)"),
        groups: vec![
            Group {
                label: format!("{} waiters", p.small().waiters),
                bars: bars(&one(|s| s.small_queue.queued.threads as f64)),
            },
            Group {
                label: format!("{} waiters", p.waiters),
                bars: bars(&one(|s| s.queue.queued.threads as f64)),
            },
        ],
    };
    let waiters = p.waiters;
    let cost = Bars {
        title: "What a waiting acquire costs".into(),
        unit: "KiB".into(),
        note: note("resident memory growth per queued waiter"),
        groups: vec![Group {
            label: "resident memory per waiter".into(),
            bars: bars(&|s| (s.queue.kib_per_waiter(waiters), None)),
        }],
    };
    let drain = Bars {
        title: "The queue drained".into(),
        unit: "s".into(),
        note: note("from the holders' release to the last waiter's acquisition"),
        groups: vec![Group {
            label: format!("{} waiters", p.waiters),
            bars: bars(&one(|s| s.queue.drain.as_secs_f64())),
        }],
    };
    let orphans = Bars {
        title: "Nodes left behind by cancelled acquires".into(),
        unit: "nodes".into(),
        note: note("nodes left once the kept waiters are done"),
        groups: vec![
            Group {
                label: format!("{} cancelled while queued", p.cancelled()),
                bars: bars(&one(|s| s.queued.orphans as f64)),
            },
            Group {
                label: format!("{} cancelled mid-create", p.cancelled()),
                bars: bars(&one(|s| s.mid_create.orphans as f64)),
            },
            Group {
                label: format!(
                    "{} cancelled, link suspended",
                    p.suspended_layout().cancelled()
                ),
                bars: bars(&one(|s| s.suspended.orphans as f64)),
            },
        ],
    };
    let lag = Bars {
        title: format!("A 1 ms timer's lateness while {} guards drop", p.drops),
        unit: "ms".into(),
        note: note("bar: p99 lateness of a tokio::time::interval(1 ms) tick; whisker: the worst"),
        groups: vec![Group {
            label: format!("{} guards dropped at once", p.drops),
            bars: bars(&|s| {
                let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
                (ms(s.lag.p99), Some(ms(s.lag.max)))
            }),
        }],
    };
    vec![
        ("async-waiters-threads.svg", threads),
        ("async-waiters-memory.svg", cost),
        ("async-waiters-drain.svg", drain),
        ("async-waiters-orphans.svg", orphans),
        ("async-waiters-lag.svg", lag),
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
