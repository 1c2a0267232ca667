//! The loop driver for exclusion on the read/write lock: the memory torture with the rw
//! workers only (and the semaphore's, for the fault kinds that need them), each fault kind
//! alone, many seeds varying victims and pauses, beside busy threads. Prints every violation
//! with its holders' nodes and faults, then the totals; exits 1 when a run was not clean.
//!
//! ```text
//! cargo run --release --features testing --example rw_exclusion_loop -- --seeds 20 --secs 2
//! cargo run --release --features testing --example rw_exclusion_loop -- --kind cut --hold-us 1000 --late-us 3000
//! ```
//!
//! Options: `--seeds N` (default 10), `--secs S` per run (default 2), `--busy N` spinning
//! threads beside it (default 2), `--hold-us US` critical section length (default 0),
//! `--late-us US` how late forced expiries are reported to their victims (default 0),
//! `--kind NAME` one fault kind only (the torture's names: `cut`, `freeze`, ...).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zk_locks_measurements::torture::{self, Config, FaultKind, MemoryEnv, Recipe};

struct Args {
    seeds: u64,
    secs: u64,
    busy: u64,
    hold: Duration,
    late: Duration,
    kind: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seeds: 10,
        secs: 2,
        busy: 2,
        hold: Duration::ZERO,
        late: Duration::ZERO,
        kind: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag} takes a whole number, not {value:?}"))
        };
        match flag.as_str() {
            "--seeds" => args.seeds = number()?.max(1),
            "--secs" => args.secs = number()?.max(1),
            "--busy" => args.busy = number()?,
            "--hold-us" => args.hold = Duration::from_micros(number()?),
            "--late-us" => args.late = Duration::from_micros(number()?),
            "--kind" => {
                if !FaultKind::ALL.iter().any(|k| k.name() == value) {
                    let names: Vec<_> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                    return Err(format!("no fault kind {value:?}; one of {names:?}"));
                }
                args.kind = Some(value);
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rw_exclusion_loop: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..args.busy)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let (mut runs, mut violations, mut acquisitions) = (0u64, 0u64, 0u64);
    let (mut expired, mut overlaps) = (0u64, 0u64);
    let mut dirty = Vec::new();
    let kinds = FaultKind::ALL
        .into_iter()
        .filter(|k| args.kind.as_deref().is_none_or(|only| only == k.name()));
    for kind in kinds {
        for seed in 1..=args.seeds {
            let env = MemoryEnv::new(8).with_late_loss_reports(args.late);
            let mut config = Config::new(
                format!("/loop-{}-{seed}", kind.name()),
                &[kind],
                Duration::from_secs(args.secs),
                Duration::from_secs(2),
                Duration::from_millis(20),
            );
            config.recipes = match kind {
                FaultKind::CountBlip | FaultKind::AdmissionLeaseLoss => {
                    vec![Recipe::ReadWrite, Recipe::Semaphore]
                }
                _ => vec![Recipe::ReadWrite],
            };
            config.hold = args.hold;
            config.seed = seed;
            let summary = torture::run(&env, &config);
            runs += 1;
            violations += summary.violations;
            expired += summary.expired_sections;
            overlaps += summary.expired_overlaps;
            acquisitions += summary.acquisitions.values().sum::<u64>();
            if !summary.is_clean() {
                println!("{} seed {seed}: {}", kind.name(), summary.line());
                for d in summary
                    .violation_details
                    .iter()
                    .chain(&summary.leaked_watch_details)
                {
                    println!("  {d}");
                }
                dirty.push(format!("{} seed {seed}", kind.name()));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    spinners.into_iter().for_each(|t| {
        let _ = t.join();
    });
    let (seeds, secs, busy, hold, late) = (args.seeds, args.secs, args.busy, args.hold, args.late);
    let kinds = runs / seeds;
    println!(
        "rw exclusion loop: runs={runs} ({kinds} kinds x {seeds} seeds x {secs}s, {busy} busy threads, \
         hold={hold:?}, late={late:?}) acquisitions={acquisitions} violations={violations} \
         expired-sections={expired} expired-overlaps={overlaps} unclean={dirty:?}"
    );
    match dirty.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}
