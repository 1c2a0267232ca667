//! One trial's times, the overlap each stopping rule gives, and the markdown table of a run.

use std::time::Duration;

use super::{Ends, Fault};

/// One trial: the fault, when the waiter got the lock and when the holder stopped.
#[derive(Debug, Clone)]
pub struct Trial {
    /// The fault.
    pub fault: Fault,
    /// The session timeout asked for, on both sides.
    pub session: Duration,
    /// The holder's library.
    pub library: &'static str,
    /// When the fault struck (ns, `CLOCK_MONOTONIC`).
    pub struck: u64,
    /// When the waiter acquired (`None`: not within the trial).
    pub granted: Option<u64>,
    /// When the holder stopped, by each rule its library offers.
    pub ends: Ends,
    /// When the trial stopped looking (a holder that had not stopped by then is counted as
    /// stopping then: its overlap is at least that).
    pub observed_until: u64,
}

/// A holder's rule for when to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// zk-locks: stop when the guard leaves `Held`.
    LeavesHeld,
    /// Curator: stop on `LOST`.
    Lost,
    /// Curator: stop on `SUSPENDED`.
    Suspended,
}

impl Rule {
    fn label(self) -> &'static str {
        match self {
            Rule::LeavesHeld => "zk-locks (stops when its guard leaves Held)",
            Rule::Lost => "Curator 5.4, app stops on LOST",
            Rule::Suspended => "Curator 5.4, app stops on SUSPENDED",
        }
    }

    fn of(library: &str) -> &'static [Rule] {
        match library {
            "zk-locks" => &[Rule::LeavesHeld],
            _ => &[Rule::Lost, Rule::Suspended],
        }
    }
}

impl Trial {
    /// When the holder stopped by `rule`, and whether it did within the trial.
    fn stopped(&self, rule: Rule) -> (u64, bool) {
        let end = match rule {
            Rule::LeavesHeld => self.ends.left_held,
            Rule::Lost => self.ends.lost,
            Rule::Suspended => self.ends.suspended,
        };
        (end.unwrap_or(self.observed_until), end.is_some())
    }

    /// How long two believed they held the lock, by `rule` (ms).
    fn overlap_ms(&self, rule: Rule) -> u64 {
        match self.granted {
            None => 0,
            Some(granted) => self.stopped(rule).0.saturating_sub(granted) / 1_000_000,
        }
    }

    /// One line for the progress log.
    pub fn summary(&self) -> String {
        let from_fault = |t: Option<u64>| {
            t.map_or("-".into(), |t| {
                format!("{} ms", (t.saturating_sub(self.struck)) / 1_000_000)
            })
        };
        let rules: Vec<String> = Rule::of(self.library)
            .iter()
            .map(|&r| {
                let (end, seen) = self.stopped(r);
                format!(
                    "{:?} at {}{} (overlap {} ms)",
                    r,
                    if seen { "" } else { ">=" },
                    from_fault(Some(end)),
                    self.overlap_ms(r)
                )
            })
            .collect();
        format!(
            "{} T={}s {}: granted at {}, {}",
            self.fault.label(),
            self.session.as_secs(),
            self.library,
            from_fault(self.granted),
            rules.join(", ")
        )
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn seconds(ms: u64) -> String {
    format!("{:.2}", ms as f64 / 1000.0)
}

/// The markdown table: per fault, session timeout and rule, the overlap over the trials.
pub fn render(trials: &[Trial]) -> String {
    let mut out = String::from(
        "| fault | T | holder | trials | two holders (s): min–max, median | trials with two \
         holders | lock granted after the fault (s, median) | holder stopped after the fault \
         (s, median) |\n|---|---|---|---:|---|---:|---:|---:|\n",
    );
    let mut keys: Vec<(Fault, Duration, &str)> = Vec::new();
    for t in trials {
        if !keys.contains(&(t.fault, t.session, t.library)) {
            keys.push((t.fault, t.session, t.library));
        }
    }
    for (fault, session, library) in keys {
        let these: Vec<&Trial> = trials
            .iter()
            .filter(|t| t.fault == fault && t.session == session && t.library == library)
            .collect();
        for &rule in Rule::of(library) {
            let overlaps: Vec<u64> = these.iter().map(|t| t.overlap_ms(rule)).collect();
            let granted: Vec<u64> = these
                .iter()
                .filter_map(|t| t.granted.map(|g| (g.saturating_sub(t.struck)) / 1_000_000))
                .collect();
            let stopped: Vec<u64> = these
                .iter()
                .map(|t| t.stopped(rule).0.saturating_sub(t.struck) / 1_000_000)
                .collect();
            let never = these.iter().filter(|t| !t.stopped(rule).1).count();
            out.push_str(&format!(
                "| {} | {} s | {} | {} | {}–{}, {} | {} | {} | {}{} |\n",
                fault.label(),
                session.as_secs(),
                rule.label(),
                these.len(),
                seconds(*overlaps.iter().min().unwrap_or(&0)),
                seconds(*overlaps.iter().max().unwrap_or(&0)),
                seconds(median(overlaps.clone())),
                overlaps.iter().filter(|&&o| o > 0).count(),
                match granted.len() {
                    0 => "never".into(),
                    n if n < these.len() =>
                        format!("{} ({n} of {})", seconds(median(granted)), these.len()),
                    _ => seconds(median(granted)),
                },
                seconds(median(stopped)),
                if never > 0 {
                    format!(" ({never} not within the trial)")
                } else {
                    String::new()
                }
            ));
        }
    }
    out
}
