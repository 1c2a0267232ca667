//! Waiting without a thread (issue 40): many waiting acquires in one tokio process, an async
//! client's lock, zk-locks' async acquire and zk-locks' blocking API, side by side against one
//! server (the program `measurements/async_waiters.rs`, the test
//! `tests/async_waiters_smoke.rs`).
//!
//! Each side opens a holder session and `sessions` waiter sessions, then runs its phases,
//! each on lock directories of its own (`plan.locks` of them unless said otherwise, each held
//! by the holder while its queue forms; waiter `i` on lock `i % locks`, sessions rotated by
//! round and lock):
//!
//! 1. **queue**, twice (`small_waiters`, then `waiters`): the acquires queue behind the
//!    holders; once the server shows every node and watch, the process's threads and
//!    resident memory are read (growth over the reading taken just before the waiters
//!    started); the holders release and the drain (each waiter acquires and releases at once)
//!    is timed until the last acquisition;
//! 2. **queued cancels**: `waiters` again, every other round of waiters to be given up; once
//!    all are queued and watching they are given up, the holders release, and every kept
//!    waiter must acquire within the stall bound; nodes left behind are counted;
//! 3. **mid-create cancels**: the same, the given-up half giving up 2 to 5 ms after starting;
//! 4. **guards dropped** ([`lag`]): `drops` waiters hold a lock each, then drop their guards at
//!    once while a task on the runtime ticks a 1 ms interval; its worst and 99th percentile
//!    lateness;
//! 5. **suspended cancels**: the waiter sessions reopened through a [`FaultProxy`];
//!    `2 × suspended` waiters queue, the proxy cuts their connections and refuses new ones,
//!    half are given up, the link comes back `suspension` later; then as in 2.
//!
//! The async client runs first, then our async side, then our blocking side: each async side
//! on a process the blocking side's threads have not grown; the heap is trimmed before every
//! baseline.
//!
//! - [`plan`]: the sizes, the bounds, which waiter goes where;
//! - [`probes`]: this process (`/proc/self/status`) and the server (children, watches);
//! - `side`: what a library does for the phases, and a waiter;
//! - `theirs`: `zookeeper-client` 0.11's `Client::lock` as tokio tasks;
//! - `ours_async`: zk-locks' `lock_owned_async` as tokio tasks on `NativeClient`;
//! - `ours`: zk-locks' blocking API through `spawn_blocking` on `NativeClient`;
//! - [`phases`]: the queue and the cancellations; [`lag`]: the guards dropped;
//! - [`report`]: the markdown tables and the charts.
//!
//! [`FaultProxy`]: zk_locks::testing::FaultProxy

pub mod lag;
pub mod phases;
pub mod plan;
pub mod probes;
pub mod report;

mod ours;
mod ours_async;
mod side;
mod theirs;

use zk_locks::testing::FaultProxy;

pub use lag::LagResult;
pub use phases::{Cancel, CancelResult, QueueResult};
pub use plan::Plan;

use phases::Ctx;
use probes::Server;
use side::Side;

/// One side's phases.
#[derive(Debug, Clone)]
pub struct SideReport {
    /// The library and how its waiters wait.
    pub library: &'static str,
    /// The smaller queue (`plan.small_waiters`).
    pub small_queue: QueueResult,
    /// The queue (`plan.waiters`).
    pub queue: QueueResult,
    /// Half the waiters given up while queued.
    pub queued: CancelResult,
    /// Half the waiters given up 2 to 5 ms after starting.
    pub mid_create: CancelResult,
    /// `plan.drops` guards dropped at once, the executor's timer watched.
    pub lag: LagResult,
    /// `plan.suspended` waiters given up with their link suspended.
    pub suspended: CancelResult,
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct Report {
    /// What ran.
    pub plan: Plan,
    /// The async client's side, then our async side, then our blocking side.
    pub sides: Vec<SideReport>,
    /// `/proc/loadavg` before and after.
    pub load_before: String,
    /// See `load_before`.
    pub load_after: String,
}

/// Runs every side against the server at `connect` in one tokio runtime of this process
/// (worker threads: one per core; blocking threads: enough for every waiter at once).
pub fn run(connect: &str, plan: &Plan) -> Result<Report, String> {
    plan.check()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Above the waiters: no blocking acquire waits for a thread (tokio's default is 512).
        .max_blocking_threads(plan.most_waiters() + 64)
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    runtime.block_on(run_sides(connect, plan))
}

async fn run_sides(connect: &str, plan: &Plan) -> Result<Report, String> {
    let load_before = probes::load_average();
    let server = Server::connect(connect, plan.session_timeout)?;
    let proxy = FaultProxy::start(server.addr()).map_err(|e| format!("fault proxy: {e}"))?;
    let root = format!("/zk-locks-async-waiters-{}", std::process::id());
    let ctx = Ctx {
        connect,
        plan,
        server: &server,
        proxy: &proxy,
    };
    let sides = async {
        let theirs_root = format!("{root}/theirs");
        let theirs = measure(&mut theirs::Theirs::default(), &ctx, &theirs_root).await?;
        let async_root = format!("{root}/ours-async");
        let ours_async = measure(&mut ours_async::OursAsync::default(), &ctx, &async_root).await?;
        let ours = measure(&mut ours::Ours::default(), &ctx, &format!("{root}/ours")).await?;
        Ok::<_, String>(vec![theirs, ours_async, ours])
    }
    .await;
    drop(proxy);
    server.close();
    let sides = sides?;
    Ok(Report {
        plan: plan.clone(),
        sides,
        load_before,
        load_after: probes::load_average(),
    })
}

/// One side's phases, its sessions closed at the end whatever happened: every phase but the
/// last on direct sessions, the suspended cancels on waiter sessions through the proxy.
async fn measure(side: &mut impl Side, ctx: &Ctx<'_>, root: &str) -> Result<SideReport, String> {
    let plan = ctx.plan;
    let (connect, timeout) = (ctx.connect, plan.session_timeout);
    side.open(connect, connect, plan.sessions, timeout).await?;
    let direct = async {
        let small_queue = phases::queue(side, ctx, &plan.small(), &format!("{root}/small")).await?;
        let queue = phases::queue(side, ctx, plan, &format!("{root}/queue")).await?;
        let queued =
            phases::cancellation(side, ctx, plan, &format!("{root}/queued"), Cancel::Queued)
                .await?;
        let mid_create = phases::cancellation(
            side,
            ctx,
            plan,
            &format!("{root}/mid-create"),
            Cancel::MidCreate,
        )
        .await?;
        let lag = lag::guards_dropped(side, ctx, &format!("{root}/drops")).await?;
        Ok::<_, String>((small_queue, queue, queued, mid_create, lag))
    }
    .await;
    closed(side, plan).await;
    let (small_queue, queue, queued, mid_create, lag) =
        direct.map_err(|e| format!("{}: {e}", side.name()))?;
    let proxied = ctx.proxy.connect_string();
    side.open(connect, &proxied, plan.sessions, timeout).await?;
    let suspended = phases::cancellation(
        side,
        ctx,
        &plan.suspended_layout(),
        &format!("{root}/suspended"),
        Cancel::Suspended,
    )
    .await;
    closed(side, plan).await;
    Ok(SideReport {
        library: side.name(),
        small_queue,
        queue,
        queued,
        mid_create,
        lag,
        suspended: suspended.map_err(|e| format!("{}: {e}", side.name()))?,
    })
}

/// Closes a side's sessions and lets the server drop their nodes and watches (half the
/// plan's quiet period).
async fn closed(side: &mut impl Side, plan: &Plan) {
    side.close().await;
    tokio::time::sleep(plan.quiet / 2).await;
}
