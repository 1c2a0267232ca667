//! Waiting without a thread, the baseline (issue 40): many waiting acquires in one tokio
//! process, zk-locks' blocking API beside an async client's lock, side by side against one
//! server (the program `measurements/async_waiters.rs`, the test
//! `tests/async_waiters_smoke.rs`).
//!
//! Each side opens a holder session and `sessions` waiter sessions, then runs three phases,
//! each on lock directories of its own (`plan.locks` of them, each held by the holder while
//! its queue forms; waiter `i` on lock `i % locks`, sessions rotated by round and lock):
//!
//! 1. **queue**: `waiters` acquires queue behind the holders; once the server shows every
//!    node and watch, the process's threads and resident memory are read (growth over the
//!    reading taken just before the waiters started); the holders release and the drain
//!    (each waiter acquires and releases at once) is timed until the last acquisition;
//! 2. **queued cancels**: the same, every other round of waiters to be given up; once all
//!    are queued and watching they are given up, the holders release, and every kept waiter
//!    must acquire within the stall bound; nodes left behind are counted;
//! 3. **mid-create cancels**: the same, the given-up half giving up 2 to 5 ms after starting.
//!
//! The async client runs first, on a process the blocking side has not yet grown; the heap
//! is trimmed before every baseline.
//!
//! - [`plan`]: the sizes, the bounds, which waiter goes where;
//! - [`probes`]: this process (`/proc/self/status`) and the server (children, watches);
//! - `side`: what a library does for the phases, and a waiter;
//! - `ours`: zk-locks' blocking API through `spawn_blocking` on `NativeClient`;
//! - `theirs`: `zookeeper-client` 0.11's `Client::lock` as tokio tasks;
//! - [`phases`]: the queue and the cancellations;
//! - [`report`]: the markdown table and the charts.

pub mod phases;
pub mod plan;
pub mod probes;
pub mod report;

mod ours;
mod side;
mod theirs;

use std::time::Duration;

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
    /// The queue.
    pub queue: QueueResult,
    /// Half the waiters given up while queued.
    pub queued: CancelResult,
    /// Half the waiters given up 2 to 5 ms after starting.
    pub mid_create: CancelResult,
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct Report {
    /// What ran.
    pub plan: Plan,
    /// The async client's side, then ours.
    pub sides: Vec<SideReport>,
    /// `/proc/loadavg` before and after.
    pub load_before: String,
    /// See `load_before`.
    pub load_after: String,
}

/// Runs both sides against the server at `connect` in one tokio runtime of this process
/// (worker threads: one per core; blocking threads: enough for every waiter at once).
pub fn run(connect: &str, plan: &Plan) -> Result<Report, String> {
    plan.check()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Above the waiters: no blocking acquire waits for a thread (tokio's default is 512).
        .max_blocking_threads(plan.waiters + 64)
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    runtime.block_on(run_sides(connect, plan))
}

async fn run_sides(connect: &str, plan: &Plan) -> Result<Report, String> {
    let load_before = probes::load_average();
    let server = Server::connect(connect, plan.session_timeout)?;
    let root = format!("/zk-locks-async-waiters-{}", std::process::id());
    let ctx = Ctx {
        connect,
        plan,
        server: &server,
    };
    let sides = async {
        let theirs_root = format!("{root}/theirs");
        let theirs = measure(&mut theirs::Theirs::default(), &ctx, &theirs_root).await?;
        let ours = measure(&mut ours::Ours::default(), &ctx, &format!("{root}/ours")).await?;
        Ok::<_, String>(vec![theirs, ours])
    }
    .await;
    server.close();
    let sides = sides?;
    Ok(Report {
        plan: plan.clone(),
        sides,
        load_before,
        load_after: probes::load_average(),
    })
}

/// One side's three phases, its sessions closed at the end whatever happened.
async fn measure(side: &mut impl Side, ctx: &Ctx<'_>, root: &str) -> Result<SideReport, String> {
    let plan = ctx.plan;
    side.open(ctx.connect, plan.sessions, plan.session_timeout)
        .await?;
    let result = async {
        let queue = phases::queue(side, ctx, &format!("{root}/queue")).await?;
        let queued =
            phases::cancellation(side, ctx, &format!("{root}/queued"), Cancel::Queued).await?;
        let mid_create =
            phases::cancellation(side, ctx, &format!("{root}/mid-create"), Cancel::MidCreate)
                .await?;
        Ok::<_, String>(SideReport {
            library: side.name(),
            queue,
            queued,
            mid_create,
        })
    }
    .await;
    side.close().await;
    // Sessions closed: let the server drop their nodes and watches before the next side.
    tokio::time::sleep(Duration::from_millis(500)).await;
    result.map_err(|e| format!("{}: {e}", side.name()))
}
