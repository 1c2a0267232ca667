//! One election trial's numbers, two leaders at once from the participants' lines, and the
//! markdown tables of a run.

use super::processes::{Library, Line};
use super::{Fault, Series};

/// One trial on one library.
#[derive(Debug, Clone)]
pub struct Sample {
    /// From the fault until a participant led again (ms).
    pub next_ms: Option<f64>,
    /// From the measuring client's watch seeing the leader's node go until the next led (ms;
    /// 0 when the next led before the measuring client heard; `None` for the member kill,
    /// where the node need not go).
    pub after_node_ms: Option<f64>,
    /// The participant that led again is the one struck (the member kill: it reconnected).
    pub same_leader: bool,
    /// The member kill: the struck leader never stopped leading (back on another member
    /// before its session was in doubt; `next_ms` is then 0).
    pub kept: bool,
    /// The kill -9: how long before it the leader's member had last answered the leader's
    /// session (the server expires a session `T` after that, not after the kill).
    pub heard_ms: Option<f64>,
    /// How long two participants both said they led (ms; must be 0).
    pub overlap_ms: f64,
    /// Requests the members received from the fault until the next led, summed over the
    /// members that answered `mntr` at both ends (every session's: pings, our sessions' syncs
    /// and the measuring client's pings included; the measurement's four-letter words not).
    pub requests: Option<u64>,
    /// That window's length (ms).
    pub window_ms: f64,
    /// The measuring client's round trip before the fault (ms).
    pub rtt_ms: f64,
}

/// How long any two participants both led, by their LEADING / NOT-LEADING lines. The struck
/// participant stops leading at the fault when it was killed or closed (its application
/// decided to close); a spell still open ends at `end`.
pub fn overlap_ms(log: &[(usize, Line)], fault: Fault, struck: u64, end: u64) -> f64 {
    let n = log.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
    let mut spells: Vec<Vec<(u64, u64)>> = vec![Vec::new(); n];
    let mut open: Vec<Option<u64>> = vec![None; n];
    for (i, line) in log {
        match line {
            Line::Leading(at, _) => open[*i] = open[*i].or(Some(*at)),
            Line::NotLeading(at) => {
                if let Some(from) = open[*i].take() {
                    spells[*i].push((from, *at));
                }
            }
            _ => {}
        }
    }
    for (i, from) in open.iter().enumerate() {
        if let Some(from) = *from {
            let stop = if i == 0 && !fault.of_member() {
                struck.max(from)
            } else {
                end
            };
            spells[i].push((from, stop));
        }
    }
    let mut total = 0u64;
    for a in 0..n {
        for b in a + 1..n {
            for &(s1, e1) in &spells[a] {
                for &(s2, e2) in &spells[b] {
                    total += e1.min(e2).saturating_sub(s1.max(s2));
                }
            }
        }
    }
    total as f64 / 1e6
}

/// A time for the progress lines.
pub(super) fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// The `q`-quantile (nearest rank) of `values`.
pub(crate) fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
    v.get(rank - 1).copied()
}

fn pair(values: &[f64]) -> String {
    match (quantile(values, 0.5), quantile(values, 0.9)) {
        (Some(a), Some(b)) => format!("{a:.1} / {b:.1} ms"),
        _ => "– / – ms".into(),
    }
}

fn ratio(ours: &[f64], theirs: &[f64]) -> String {
    let r = |q| match (quantile(ours, q), quantile(theirs, q)) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".into(),
    };
    format!("{} / {}", r(0.5), r(0.9))
}

/// The comparison table and the health table of a run, in markdown.
pub fn render(results: &[Series]) -> String {
    let get = |fault: Fault, library: Library| {
        results
            .iter()
            .find(|(f, l, _)| *f == fault && *l == library)
            .map(|(_, _, s)| s.as_slice())
            .unwrap_or(&[])
    };
    let mut faults: Vec<Fault> = Vec::new();
    for (fault, _, _) in results {
        if !faults.contains(fault) {
            faults.push(*fault);
        }
    }
    let trials = results.iter().map(|r| r.2.len()).max().unwrap_or(0);
    let mut out = format!(
        "Leader election failover: 3 LeaderLatch participants, one OS process each (on members \
         of their own in a 3-member ensemble), session 10 s, {trials} trials per fault per \
         library.\n\n\
         | fault | metric | zk-locks p50 / p90 | Curator p50 / p90 | ratio p50 / p90 |\n\
         |---|---|---|---|---|\n"
    );
    let next = |s: &[Sample]| s.iter().filter_map(|x| x.next_ms).collect::<Vec<_>>();
    let after = |s: &[Sample]| s.iter().filter_map(|x| x.after_node_ms).collect::<Vec<_>>();
    let heard = |s: &[Sample]| {
        s.iter()
            .filter_map(|x| Some(x.heard_ms? + x.next_ms?))
            .collect::<Vec<_>>()
    };
    for &fault in &faults {
        let (ours, theirs) = (get(fault, Library::Ours), get(fault, Library::Curator));
        let first = match fault {
            Fault::FreezeMember(_) => "the leader is served again, from the fault",
            _ => "a participant leads again, from the fault",
        };
        let mut rows = vec![(first, next(ours), next(theirs))];
        if fault == Fault::KillProcess {
            let what = "… from the server last hearing the leader";
            rows.push((what, heard(ours), heard(theirs)));
        }
        if !fault.of_member() {
            rows.push(("… from the leader's node going", after(ours), after(theirs)));
        }
        for (metric, o, t) in rows {
            out.push_str(&format!(
                "| {} | {metric} | {} | {} | {} |\n",
                fault.label(),
                pair(&o),
                pair(&t),
                ratio(&o, &t)
            ));
        }
    }
    out.push_str(
        "\n| fault | library | trials | struck one leads again (without a lapse) | two leaders at once (trials / \
         ms) | requests in the election p50 (window p50) | requests/s in the window p50 | round \
         trip p50 |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (fault, library, samples) in results {
        let median = |f: &dyn Fn(&Sample) -> Option<f64>| {
            let v: Vec<f64> = samples.iter().filter_map(f).collect();
            quantile(&v, 0.5)
        };
        let fmt = |v: Option<f64>, unit: &str| v.map_or("–".into(), |v| format!("{v:.1}{unit}"));
        out.push_str(&format!(
            "| {} | {} | {} | {} ({}) | {} / {:.1} | {} ({}) | {} | {} |\n",
            fault.label(),
            library.name(),
            samples.len(),
            samples.iter().filter(|s| s.same_leader).count(),
            samples.iter().filter(|s| s.kept).count(),
            samples.iter().filter(|s| s.overlap_ms > 0.0).count(),
            samples.iter().map(|s| s.overlap_ms).fold(0.0, f64::max),
            fmt(median(&|s| s.requests.map(|r| r as f64)), ""),
            fmt(median(&|s| Some(s.window_ms)), " ms"),
            fmt(
                median(&|s| Some(s.requests? as f64 * 1000.0 / s.window_ms)),
                ""
            ),
            fmt(median(&|s| Some(s.rtt_ms)), " ms"),
        ));
    }
    out
}
