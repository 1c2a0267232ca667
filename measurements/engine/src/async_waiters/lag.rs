//! The executor's timer while many guards drop at once: `plan.drops` waiters each take a lock
//! of their own and hold it; a task on the same runtime ticks a 1 ms `tokio::time::interval`
//! (missed ticks delayed, not burst: each tick's lateness is its own); the gate opens and
//! every waiter drops its guard at once (from its task, or its blocking thread); the ticks'
//! lateness is read from the gate's opening until every waiter has ended and the server shows
//! none of their nodes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;

use super::phases::Ctx;
use super::plan::Plan;
use super::side::{join_all, Gate, How, Outcome, Side, Tally};

/// How long the ticker runs before the gate opens: the idle lateness it reads meanwhile is
/// the floor the drop's lateness is read against.
const IDLE: Duration = Duration::from_millis(300);

/// The timer while the guards dropped.
#[derive(Debug, Clone, Default)]
pub struct LagResult {
    /// Guards held, then dropped at once.
    pub dropped: usize,
    /// From the gate's opening until every waiter ended and no node was left.
    pub cleared: Duration,
    /// Ticks in that window.
    pub ticks: usize,
    /// The worst tick's lateness in it.
    pub max: Duration,
    /// The 99th percentile's.
    pub p99: Duration,
    /// The worst lateness in the `IDLE` before the gate opened (guards held, nothing moving).
    pub idle_max: Duration,
    /// The 99th percentile's there.
    pub idle_p99: Duration,
    /// The 99th percentile and the longest of the waiters' release calls (dropping the guard
    /// in its task; on the blocking side `unlock` on its blocking thread, the delete waited
    /// for).
    pub release_p99: Duration,
    /// See `release_p99`.
    pub release_max: Duration,
}

/// Ticks every ms until stopped: (when it ran, how late) per tick.
fn ticker(stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<(Instant, Duration)>> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(1));
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        interval.tick().await;
        let mut ticks = Vec::with_capacity(1 << 16);
        while !stop.load(Ordering::SeqCst) {
            let due = interval.tick().await.into_std();
            let now = Instant::now();
            ticks.push((now, now.saturating_duration_since(due)));
        }
        ticks
    })
}

/// The `q` quantile of `sorted` (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The phase: hold `plan.drops` locks (one waiter each), then drop every guard at once
/// under the ticker's eye.
pub(super) async fn guards_dropped(
    side: &mut impl Side,
    ctx: &Ctx<'_>,
    root: &str,
) -> Result<LagResult, String> {
    let plan: Plan = ctx.plan.drops_layout();
    let dirs = plan.dirs(root);
    let gate = Gate::new();
    let tally = Tally::new(plan.waiters);
    let waiters: Vec<_> = (0..plan.waiters)
        .map(|i| {
            let how = How::Hold(gate.clone());
            side.start(&dirs[plan.lock_of(i)], plan.session_of(i), how, &tally)
        })
        .collect();
    let held = tally.wait(plan.bound).await;
    if held < plan.waiters {
        gate.open();
        return Err(format!(
            "only {held} of {} guards held within {:?}",
            plan.waiters, plan.bound
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let ticks = ticker(stop.clone());
    tokio::time::sleep(IDLE).await;
    let opened = Instant::now();
    gate.open();
    let outcomes = join_all(waiters, plan.bound).await;
    let left = ctx.server.drained(&dirs, plan.bound).await?;
    let cleared = opened.elapsed();
    stop.store(true, Ordering::SeqCst);
    let ticks = ticks.await.map_err(|e| format!("the ticker: {e}"))?;
    if let Some(Outcome::Failed(e)) = outcomes.iter().find(|o| matches!(o, Outcome::Failed(_))) {
        return Err(format!("a holding waiter failed: {e}"));
    }
    if left > 0 {
        return Err(format!("{left} nodes left {:?} after the drop", plan.bound));
    }
    let mut idle: Vec<Duration> = ticks
        .iter()
        .filter(|(at, _)| *at < opened)
        .map(|(_, late)| *late)
        .collect();
    idle.sort_unstable();
    let mut window: Vec<Duration> = ticks
        .iter()
        .filter(|(at, _)| *at >= opened)
        .map(|(_, late)| *late)
        .collect();
    window.sort_unstable();
    let releases = gate.releases();
    Ok(LagResult {
        dropped: held,
        cleared,
        ticks: window.len(),
        max: window.last().copied().unwrap_or_default(),
        p99: quantile(&window, 0.99),
        idle_max: idle.last().copied().unwrap_or_default(),
        idle_p99: quantile(&idle, 0.99),
        release_p99: quantile(&releases, 0.99),
        release_max: releases.last().copied().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn quantiles_are_nearest_rank() {
        let ms = |n| Duration::from_millis(n);
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(super::quantile(&sorted, 0.99), ms(99));
        assert_eq!(super::quantile(&sorted, 1.0), ms(100));
        assert_eq!(super::quantile(&[ms(7)], 0.99), ms(7));
        assert_eq!(super::quantile(&[], 0.99), Duration::ZERO);
    }
}
