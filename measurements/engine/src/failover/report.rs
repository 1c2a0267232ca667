//! One trial's numbers and the markdown tables of a run.

use super::{Fault, Outcome, Series};

/// One trial on one side.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The longest time with no acquisition, from the last acquisition before the fault
    /// until the end of the trial (`None`: no acquisition after the fault at all).
    pub gap_ms: Option<u64>,
    /// From the fault to the next acquisition by the client it struck (the one that held the
    /// lock, or the waiter whose member froze).
    pub holder_ms: Option<u64>,
    /// Acquire or release calls that failed.
    pub errors: u64,
    /// Sessions lost.
    pub lost: u64,
    /// Holds that overlapped another (acquired before the previous one was released).
    pub overlaps: u64,
    /// Connect attempts per client during the trial.
    pub attempts: Vec<u64>,
}

impl Sample {
    /// The numbers of `outcome`, for a fault at `struck` (ns) that struck client `holder`.
    pub fn from_outcome(outcome: &Outcome, holder: usize, struck: u64) -> Sample {
        let mut holds = outcome.holds.clone();
        holds.sort_by_key(|h| h.1);
        let overlaps = holds.windows(2).filter(|w| w[1].1 < w[0].2).count() as u64;
        let before = holds
            .iter()
            .filter(|h| h.1 <= struck)
            .map(|h| h.1)
            .next_back()
            .unwrap_or(struck);
        let after: Vec<u64> = holds.iter().filter(|h| h.1 > struck).map(|h| h.1).collect();
        let mut gap = None;
        let mut prev = before;
        for &t in &after {
            gap = Some(gap.unwrap_or(0).max(t - prev));
            prev = t;
        }
        let holder_ms = holds
            .iter()
            .find(|h| h.0 == holder && h.1 > struck)
            .map(|h| (h.1 - struck) / 1_000_000);
        Sample {
            gap_ms: gap.map(|g| g / 1_000_000),
            holder_ms,
            errors: outcome.errors,
            lost: outcome.lost,
            overlaps,
            attempts: outcome.attempts.clone(),
        }
    }

    /// Connect attempts of the sessions that made any, each (a reconnecting session).
    fn reconnecting(&self) -> impl Iterator<Item = u64> + '_ {
        self.attempts.iter().copied().filter(|&a| a > 0)
    }
}

/// The `q`-quantile (nearest rank) of `values`.
fn quantile(values: &[u64], q: f64) -> Option<u64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
    v.get(rank - 1).copied()
}

fn pair(values: &[u64]) -> String {
    match (quantile(values, 0.5), quantile(values, 0.9)) {
        (Some(a), Some(b)) => format!("{a} / {b} ms"),
        _ => "- / - ms".into(),
    }
}

fn ratio(ours: &[u64], theirs: &[u64]) -> String {
    let r = |q| match (quantile(ours, q), quantile(theirs, q)) {
        (Some(a), Some(b)) if b > 0 => format!("{:.2}", a as f64 / b as f64),
        _ => "-".into(),
    };
    format!("{} / {}", r(0.5), r(0.9))
}

/// Prints the comparison table and the health table of a run.
pub fn print_report(results: &[Series]) {
    let get = |fault: Fault, name: &str| {
        results
            .iter()
            .find(|(f, n, _)| *f == fault && *n == name)
            .map(|(_, _, s)| s.as_slice())
            .unwrap_or(&[])
    };
    let trials = results.iter().map(|r| r.2.len()).max().unwrap_or(0);
    println!(
        "\nFailover, 3-member ensemble, holder + 2 waiters on one mutex (one client per member),"
    );
    println!("session 10 s, {trials} trials per fault per library; times from the fault.\n");
    println!("| fault | metric | zk-locks p50 / p90 | Curator p50 / p90 | ratio p50 / p90 |");
    println!("|---|---|---|---|---|");
    let mut faults: Vec<Fault> = Vec::new();
    for (fault, _, _) in results {
        if !faults.contains(fault) {
            faults.push(*fault);
        }
    }
    for fault in faults {
        let (ours, theirs) = (get(fault, "zk-locks"), get(fault, "Curator"));
        let gaps = |s: &[Sample]| s.iter().filter_map(|x| x.gap_ms).collect::<Vec<_>>();
        let backs = |s: &[Sample]| s.iter().filter_map(|x| x.holder_ms).collect::<Vec<_>>();
        for (metric, o, t) in [
            ("longest gap with no acquisition", gaps(ours), gaps(theirs)),
            (fault.struck_client(), backs(ours), backs(theirs)),
        ] {
            println!(
                "| {} | {metric} | {} | {} | {} |",
                fault.label(),
                pair(&o),
                pair(&t),
                ratio(&o, &t)
            );
        }
    }
    println!();
    println!("| fault | library | trials | errors | lost sessions | overlaps | not back | connect attempts per reconnecting session (mean / max) | a 1,000-client fleet would send |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (fault, name, samples) in results {
        let sum = |f: fn(&Sample) -> u64| samples.iter().map(f).sum::<u64>();
        let not_back = samples.iter().filter(|s| s.holder_ms.is_none()).count();
        let attempts: Vec<u64> = samples.iter().flat_map(|s| s.reconnecting()).collect();
        let mean = if attempts.is_empty() {
            0.0
        } else {
            attempts.iter().sum::<u64>() as f64 / attempts.len() as f64
        };
        let max = attempts.iter().max().copied().unwrap_or(0);
        println!(
            "| {} | {name} | {} | {} | {} | {} | {not_back} | {mean:.1} / {max} | ~{:.0} attempts |",
            fault.label(),
            samples.len(),
            sum(|s| s.errors),
            sum(|s| s.lost),
            sum(|s| s.overlaps),
            mean * 1000.0
        );
    }
}
