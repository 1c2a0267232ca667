//! The phases every side runs, each on lock directories of its own and with a layout of its
//! own (a [`Plan`] sized for it): the queue (every waiter queued, the process read, the drain
//! timed) and the three cancellations (half the waiters given up while queued, a few ms after
//! starting, or while queued with their sessions' link suspended; the other half kept, each
//! of which must then acquire; nodes left behind counted).

use std::time::{Duration, Instant};

use zk_locks::testing::FaultProxy;

use super::plan::Plan;
use super::probes::{trim_heap, Process, Server};
use super::side::{join_all, How, Outcome, Side, Tally, Waiter};

/// Where a phase runs.
pub(super) struct Ctx<'a> {
    pub(super) connect: &'a str,
    pub(super) plan: &'a Plan,
    pub(super) server: &'a Server,
    /// Between the waiters' sessions and the server in the suspended phase.
    pub(super) proxy: &'a FaultProxy,
}

/// The queue phase of one side.
#[derive(Debug, Clone, Default)]
pub struct QueueResult {
    /// This process before the waiters started (holders holding, sessions open).
    pub before: Process,
    /// This process with every waiter queued and watching.
    pub queued: Process,
    /// From the holders' release to the last waiter's acquisition.
    pub drain: Duration,
    /// Waiters that acquired (all of them, or the phase fails).
    pub acquired: usize,
}

impl QueueResult {
    /// Resident memory growth per waiter, KiB.
    pub fn kib_per_waiter(&self, waiters: usize) -> f64 {
        self.queued.rss.saturating_sub(self.before.rss) as f64 / 1024.0 / waiters.max(1) as f64
    }
}

/// Which cancellation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// Given up once every waiter is queued and watching.
    Queued,
    /// Given up 2 to 5 ms after starting: for most, while their create is in flight.
    MidCreate,
    /// Given up once every waiter is queued and watching, with the waiters' sessions' link
    /// down (connections cut, new ones refused) from just before until `plan.suspension`
    /// after.
    Suspended,
}

/// One cancellation phase of one side.
#[derive(Debug, Clone, Default)]
pub struct CancelResult {
    /// Waiters given up.
    pub cancels: usize,
    /// Of those, the ones that ended without the lock.
    pub cancelled: usize,
    /// Of those, the ones that acquired before their cancel took (then released).
    pub granted: usize,
    /// Kept waiters.
    pub kept: usize,
    /// Kept waiters that did not acquire within the stall bound (then given up).
    pub stalled: usize,
    /// Nodes left in the phase's directories once the holders released, every kept waiter
    /// acquired and released (or was given up) and the count stopped changing.
    pub orphans: usize,
    /// Errors the library answered (count, and the first one).
    pub errors: usize,
    /// The first error.
    pub first_error: Option<String>,
}

/// Starts waiters `0..plan.waiters` on `dirs`, `how(i)` each; kept ones count in `tally`,
/// the others in `others`.
fn start_all(
    side: &impl Side,
    plan: &Plan,
    dirs: &[String],
    how: impl Fn(usize) -> How,
    tally: &std::sync::Arc<Tally>,
    others: &std::sync::Arc<Tally>,
) -> Vec<Waiter> {
    (0..plan.waiters)
        .map(|i| {
            let how = how(i);
            let counted = if how.is_keep() { tally } else { others };
            side.start(&dirs[plan.lock_of(i)], plan.session_of(i), how, counted)
        })
        .collect()
}

/// The queue: every waiter queued behind a holder, the process read, the holders release and
/// the drain is timed until the last waiter acquired.
pub(super) async fn queue(
    side: &mut impl Side,
    ctx: &Ctx<'_>,
    plan: &Plan,
    root: &str,
) -> Result<QueueResult, String> {
    let dirs = plan.dirs(root);
    side.hold(&dirs).await?;
    trim_heap();
    let before = Process::now();
    let watches = ctx.server.watches()?;
    let tally = Tally::new(plan.waiters);
    let nobody = Tally::new(0);
    let waiters = start_all(side, plan, &dirs, |_| How::Keep, &tally, &nobody);
    ctx.server
        .wait_queued(
            &dirs,
            plan.locks + plan.waiters,
            watches + plan.waiters as u64,
            plan.bound,
        )
        .await?;
    let queued = Process::now();
    let start = Instant::now();
    side.release().await?;
    let acquired = tally.wait(plan.bound).await;
    let drain = tally
        .completed_at()
        .map(|at| at.duration_since(start))
        .ok_or_else(|| {
            format!(
                "{}: {acquired} of {} waiters acquired within {:?}",
                side.name(),
                plan.waiters,
                plan.bound
            )
        })?;
    let outcomes = join_all(waiters, plan.bound).await;
    if let Some(Outcome::Failed(e)) = outcomes.iter().find(|o| matches!(o, Outcome::Failed(_))) {
        return Err(format!("{}: a waiter failed: {e}", side.name()));
    }
    ctx.server
        .settle(&dirs, plan.quiet, Duration::from_secs(10))
        .await?;
    Ok(QueueResult {
        before,
        queued,
        drain,
        acquired,
    })
}

/// One cancellation phase: holders hold; every waiter starts, the even rounds to be given up
/// as `kind` says and the odd ones kept; the holders release; every kept waiter must acquire
/// within the stall bound; then the nodes left are counted.
pub(super) async fn cancellation(
    side: &mut impl Side,
    ctx: &Ctx<'_>,
    plan: &Plan,
    root: &str,
    kind: Cancel,
) -> Result<CancelResult, String> {
    let dirs = plan.dirs(root);
    side.hold(&dirs).await?;
    let cancels = plan.cancelled();
    let kept = plan.waiters - cancels;
    let (tally, granted) = (Tally::new(kept), Tally::new(cancels));
    let how = |i: usize| match (plan.is_cancelled(i), kind) {
        (false, _) => How::Keep,
        (true, Cancel::Queued | Cancel::Suspended) => How::Cancellable,
        (true, Cancel::MidCreate) => How::CancelAfter(plan.mid_create_delay(i)),
    };
    let watches = ctx.server.watches()?;
    let mut waiters = start_all(side, plan, &dirs, how, &tally, &granted);
    let mut cancelled: Vec<Waiter> = Vec::with_capacity(cancels);
    let mut keeping: Vec<Waiter> = Vec::with_capacity(kept);
    for (i, w) in waiters.drain(..).enumerate() {
        match plan.is_cancelled(i) {
            true => cancelled.push(w),
            false => keeping.push(w),
        }
    }
    let (all, watching) = (plan.locks + plan.waiters, watches + plan.waiters as u64);
    match kind {
        Cancel::Queued => {
            ctx.server
                .wait_queued(&dirs, all, watching, plan.bound)
                .await?;
            cancelled.iter_mut().for_each(Waiter::cancel);
        }
        Cancel::Suspended => {
            ctx.server
                .wait_queued(&dirs, all, watching, plan.bound)
                .await?;
            // The link goes down and stays down: no reconnect until the suspension is over.
            ctx.proxy.refuse(true);
            ctx.proxy.cut();
            cancelled.iter_mut().for_each(Waiter::cancel);
            tokio::time::sleep(plan.suspension).await;
            ctx.proxy.refuse(false);
        }
        // Each gives itself up after its delay; then the queue is left to settle (kept
        // waiters queued, whatever the given-up ones left behind still there).
        Cancel::MidCreate => {}
    }
    let cancel_outcomes = join_all(cancelled, plan.bound).await;
    ctx.server.settle(&dirs, plan.quiet, plan.bound).await?;
    side.release().await?;
    let acquired = tally.wait(plan.stall_bound).await;
    // Whatever has not acquired by now is stalled; give it up so the phase ends.
    keeping.iter_mut().for_each(Waiter::cancel);
    let kept_outcomes = join_all(keeping, plan.bound).await;
    let orphans = ctx.server.settle(&dirs, plan.quiet, plan.bound).await?;
    let errors: Vec<&String> = cancel_outcomes
        .iter()
        .chain(&kept_outcomes)
        .filter_map(|o| match o {
            Outcome::Failed(e) => Some(e),
            _ => None,
        })
        .collect();
    Ok(CancelResult {
        cancels,
        cancelled: cancel_outcomes
            .iter()
            .filter(|o| **o == Outcome::Cancelled)
            .count(),
        granted: cancel_outcomes
            .iter()
            .filter(|o| **o == Outcome::Acquired)
            .count(),
        kept,
        stalled: kept - acquired.min(kept),
        orphans,
        errors: errors.len(),
        first_error: errors.first().map(|e| e.to_string()),
    })
}
