//! Waiting without a thread (issue 40): many waiting acquires in one tokio process, side by
//! side against one `TestingServer`: `zookeeper-client` 0.11's async lock (each acquire a tokio
//! task), zk-locks' async acquire (`lock_owned_async`, each a tokio task, no `spawn_blocking`)
//! and zk-locks' blocking API (each acquire `spawn_blocking(move ||
//! mutex.try_lock_owned_with(&how))`, the blocking pool raised above the waiters). Per
//! library: OS threads of the process with 1,000 and with 10,000 waiters queued, resident
//! memory per waiter, the drain's time once the holders release; half the waiters given up
//! while queued and, in another round, 2 to 5 ms after starting (mid-create): nodes left behind
//! and kept waiters that never acquire (within the stall bound); a 1 ms tokio interval's
//! lateness while 5,000 guards drop at once; and 1,000 waiters given up with their sessions'
//! link suspended (through a `FaultProxy`: connections cut, new ones refused for 2 s). Prints
//! markdown tables and the load average. The engine is `zk_locks_measurements::async_waiters`.
//!
//! ```text
//! cargo run --release --features testing --example async_waiters [-- --waiters N] [--small N] [--locks L] [--sessions S] [--suspended N] [--drops N] [--stall SECS] [--svg DIR]
//! ```
//!
//! Defaults: 10,000 waiters (and a queue of 1,000 first) over 500 locks and 20 sessions (a
//! holder session more per side), 1,000 cancels with the link suspended, 5,000 guards
//! dropped, stall bound 30 s; about three minutes on 2 cores. `--svg DIR` also draws the
//! tables as SVG bar charts in DIR (`async-waiters-threads.svg`, `async-waiters-memory.svg`,
//! `async-waiters-drain.svg`, `async-waiters-orphans.svg`, `async-waiters-lag.svg`).
//!
//! The blocking side runs one OS thread per waiter, so the process needs room for `N` threads
//! and more: `ulimit -u` (not enforced for root), `/proc/sys/kernel/threads-max` and
//! `/proc/sys/kernel/pid_max` above `N` + a few hundred, and `/proc/sys/vm/max_map_count` above
//! `2N` + a few thousand (a thread's stack and its guard page are two mappings; Linux's default
//! 65,530 fits 10,000 waiters). The program checks these first and says which is short.
//! Needs Java and Debian's ZooKeeper 3.8 (`scripts/test.sh` installs them).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use zk_locks::testing::TestingServer;
use zk_locks_measurements::async_waiters::{self, Plan};
use zk_locks_measurements::chart;

/// Threads and mappings beside the waiters: the runtime's, the sessions', the heap's.
const SPARE_THREADS: u64 = 300;
const SPARE_MAPS: u64 = 5_000;

fn usage(problem: &str) -> ExitCode {
    eprintln!("async_waiters: {problem}");
    eprintln!(
        "usage: async_waiters [--waiters N] [--small N] [--locks L] [--sessions S] \
         [--suspended N] [--drops N] [--stall SECS] [--svg DIR]"
    );
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let mut plan = Plan::full();
    let mut svg: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            match args.next().map(|v| v.parse::<usize>()) {
                Some(Ok(n)) if n > 0 => Ok(n),
                _ => Err(format!("{name} needs a whole number above 0")),
            }
        };
        let parsed = match arg.as_str() {
            "--waiters" => number("--waiters").map(|n| plan.waiters = n),
            "--small" => number("--small").map(|n| plan.small_waiters = n),
            "--locks" => number("--locks").map(|n| plan.locks = n),
            "--suspended" => number("--suspended").map(|n| plan.suspended = n),
            "--drops" => number("--drops").map(|n| plan.drops = n),
            "--sessions" => number("--sessions").map(|n| plan.sessions = n),
            "--stall" => {
                number("--stall").map(|n| plan.stall_bound = Duration::from_secs(n as u64))
            }
            "--svg" => match args.next() {
                Some(dir) => {
                    svg = Some(dir.into());
                    Ok(())
                }
                None => Err("--svg needs a directory".into()),
            },
            other => Err(format!("unknown argument {other}")),
        };
        if let Err(problem) = parsed {
            return usage(&problem);
        }
    }
    if let Err(problem) = plan
        .check()
        .and_then(|()| room_for(plan.most_waiters() as u64))
    {
        return usage(&problem);
    }
    // The waiters' sessions are 30 s: past ZooKeeper's own longest (10 s).
    let server = match TestingServer::builder()
        .max_session_timeout(Duration::from_secs(60))
        .start()
    {
        Ok(server) => server,
        Err(e) => {
            eprintln!("async_waiters: cannot start a ZooKeeper server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = async_waiters::run(&server.connect_string(), &plan).and_then(|report| {
        println!("{}", async_waiters::report::render(&report));
        match &svg {
            None => Ok(()),
            Some(dir) => async_waiters::report::charts(&report)
                .iter()
                .try_for_each(|(name, c)| chart::write(dir, name, c)),
        }
    });
    drop(server);
    match result {
        Ok(()) => {
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            println!("load average: {}", load.trim());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("async_waiters: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether this process may run `waiters` threads at once, and if not, which limit is short.
fn room_for(waiters: u64) -> Result<(), String> {
    let threads = waiters + SPARE_THREADS;
    let maps = 2 * waiters + SPARE_MAPS;
    let read =
        |path: &str| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    for (path, need) in [
        ("/proc/sys/kernel/threads-max", threads),
        ("/proc/sys/kernel/pid_max", threads),
        ("/proc/sys/vm/max_map_count", maps),
    ] {
        if let Some(have) = read(path) {
            if have < need {
                return Err(format!(
                    "{waiters} waiters need {path} at {need} or more (it is {have}): raise it \
                     (sysctl) or run fewer --waiters"
                ));
            }
        }
    }
    let mut nproc = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct it is given.
    let read_ok = unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut nproc) } == 0;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // RLIMIT_NPROC counts every process and thread of the user; root is not held to it.
    if read_ok
        && !root
        && nproc.rlim_cur != libc::RLIM_INFINITY
        && (nproc.rlim_cur as u128) < u128::from(threads)
    {
        return Err(format!(
            "{waiters} waiters need `ulimit -u` at {threads} or more (it is {}): raise it or run \
             fewer --waiters",
            nproc.rlim_cur
        ));
    }
    Ok(())
}
