//! The comparison as a markdown table: one line per scenario and metric, with the ratio
//! zk-locks / Curator ("–" where a figure was not measured).

use super::{Report, Scenario};

/// Renders the report as a markdown table (ratios are ours / Curator).
pub fn render(report: &Report) -> String {
    let m = &report.machine;
    let rounds = report.rounds;
    let mut out = format!(
        "Machine: {} CPUs ({}), ZooKeeper {}, standalone on loopback; idle background {:.1} \
         packets/s; load average {:.1} at the start, {:.1} at the end. Percentiles are medians \
         of {} alternating rounds per side; \"zk-locks\" is our own client, \"crate backend\" \
         the same recipes over the `zookeeper` crate; ratios are zk-locks / Curator.\n\n",
        m.nproc, m.cpu, m.zookeeper, m.idle_packets_per_s, m.load_before, m.load_after, rounds
    );
    out.push_str(
        "| scenario | metric | zk-locks | crate backend | Curator 5.4 | zk-locks / Curator |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|\n");
    let us = |ns: u64| ns as f64 / 1e3;
    for row in &report.rows {
        let title = row.scenario.title();
        let (o, k, c) = (&row.ours, &row.ours_crate, &row.curator);
        let mut line = |metric: &str, ours: f64, via_crate: f64, theirs: f64, digits: usize| {
            let ratio = if theirs > 0.0 && !ours.is_nan() {
                format!("{:.2}", ours / theirs)
            } else {
                "–".into()
            };
            let cell = |v: f64| match v.is_nan() {
                true => "–".to_string(),
                false => format!("{v:.digits$}"),
            };
            let (ours, via_crate, theirs) = (cell(ours), cell(via_crate), cell(theirs));
            out.push_str(&format!(
                "| {title} | {metric} | {ours} | {via_crate} | {theirs} | {ratio} |\n"
            ));
        };
        match row.scenario {
            Scenario::RoundTrip | Scenario::Uncontended(_) => {
                line("p50 µs", us(o.p50_ns), us(k.p50_ns), us(c.p50_ns), 0);
                line("p99 µs", us(o.p99_ns), us(k.p99_ns), us(c.p99_ns), 0);
                line("ops/s", o.per_second(), k.per_second(), c.per_second(), 0);
                line(
                    "requests/op",
                    o.requests_per_op(),
                    k.requests_per_op(),
                    c.requests_per_op(),
                    2,
                );
                line(
                    "round trips/op",
                    o.round_trips_per_op(),
                    k.round_trips_per_op(),
                    c.round_trips_per_op(),
                    2,
                );
            }
            Scenario::Contended { .. } => {
                line(
                    "acquisitions/s",
                    o.per_second(),
                    k.per_second(),
                    c.per_second(),
                    0,
                );
                line(
                    "hand-off p50 µs",
                    us(o.p50_ns),
                    us(k.p50_ns),
                    us(c.p50_ns),
                    0,
                );
                line(
                    "hand-off p99 µs",
                    us(o.p99_ns),
                    us(k.p99_ns),
                    us(c.p99_ns),
                    0,
                );
                line(
                    "requests/acquisition",
                    o.requests_per_op(),
                    k.requests_per_op(),
                    c.requests_per_op(),
                    2,
                );
                line(
                    "round trips/acquisition",
                    o.round_trips_per_op(),
                    k.round_trips_per_op(),
                    c.round_trips_per_op(),
                    2,
                );
            }
        }
        // Where the time goes when the server is the bottleneck: CPU per operation, on the
        // server and in each side's client process.
        let per = match row.scenario {
            Scenario::Contended { .. } => "acquisition",
            _ => "op",
        };
        line(
            &format!("server CPU µs/{per}"),
            o.server_cpu_us_per_op(),
            k.server_cpu_us_per_op(),
            c.server_cpu_us_per_op(),
            0,
        );
        line(
            &format!("client CPU µs/{per}"),
            o.client_cpu_us_per_op(),
            k.client_cpu_us_per_op(),
            c.client_cpu_us_per_op(),
            0,
        );
    }
    out
}
