//! One run: start the workers and the fault thread, stop them, then check what was left
//! behind and summarise.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::checks::{check_exclusion, check_terms, FencedStore, Section, Summary, Tally};
use super::config::{pause, Config, Env, FaultKind, Recipe, SEMAPHORE_MAX};
use super::faults::{
    count_blip, count_path, expire_during_downgrade, fence_probe, inject, probe_path,
    revoke_mutex_holder, settle, Probe,
};
use super::timeline::{expired_unannounced, FaultLog};
use super::workers::Run;
use zk_locks::ZkClient;

/// Runs the torture on `env` and returns what it found.
pub fn run(env: &dyn Env, config: &Config) -> Summary {
    let clients = env.clients();
    let sessions = clients.len();
    let run = Arc::new(Run {
        config: config.clone(),
        sections: Mutex::new(Vec::new()),
        tally: Mutex::new(Tally::default()),
        stores: [
            Recipe::Mutex,
            Recipe::ReadWrite,
            Recipe::SemaphoreMutex,
            Recipe::Latch,
            Recipe::Selector,
        ]
        .into_iter()
        .map(|r| (r, FencedStore::default()))
        .collect(),
        stop: AtomicBool::new(false),
        counts: Mutex::new(BTreeMap::new()),
        downgrade: Mutex::new(None),
        log: FaultLog::default(),
        oracle: env.node_oracle(),
        revocations: Arc::default(),
        holds: (0..sessions).map(|_| AtomicUsize::new(0)).collect(),
    });
    let probe = Probe::default();
    let mut faults: BTreeMap<FaultKind, u64> = BTreeMap::new();
    let mut skipped = 0u64;
    // Per session: the losses the injected faults were meant to cause.
    let mut expected_losses = vec![0u64; sessions];
    let mut long_elections = 0u64;
    let losses_before: Vec<u64> = clients
        .iter()
        .map(|c| c.session().snapshot().losses)
        .collect();
    let started = Instant::now();
    let mut hung = 0u64;
    {
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let mut workers = 0;
        for (worker, client) in clients.iter().enumerate() {
            for &recipe in &config.recipes {
                let (run, client, done) = (run.clone(), client.clone(), done_tx.clone());
                workers += 1;
                thread::Builder::new()
                    .name(format!("torture-{}-{worker}", recipe.name()))
                    .spawn(move || {
                        run.worker(recipe, worker, client);
                        let _ = done.send(());
                    })
                    .expect("spawning a worker");
            }
        }
        drop(done_tx);
        // The fault thread is this one: cycle kinds and victims until the duration is over.
        let end = started + config.duration;
        let hard_end = end + config.finish_cycle_within;
        let mut n = 0usize;
        let cycle_open = |n: usize| n % config.faults.len().max(1) != 0;
        let go_on = |n: usize| {
            let now = Instant::now();
            now < end || (cycle_open(n) && now < hard_end)
        };
        while !config.faults.is_empty() && go_on(n) {
            let until = if cycle_open(n) { hard_end } else { end };
            pause(
                config
                    .gap(n)
                    .min(until.saturating_duration_since(Instant::now())),
            );
            if !go_on(n) {
                break;
            }
            let kind = config.faults[n % config.faults.len()];
            let victim = config.victim(n, clients.len());
            n += 1;
            revoke_mutex_holder(&clients[victim], &run);
            let injected = match kind {
                FaultKind::Freeze => fence_probe(env, &clients, &run, victim, &probe),
                FaultKind::DowngradeExpiry | FaultKind::DowngradeSilentSession => {
                    expire_during_downgrade(env, &clients, &run, victim, kind)
                }
                FaultKind::CountBlip => count_blip(env, &run, victim),
                _ => inject(env, &run, kind, victim),
            };
            match injected {
                Ok(()) => {
                    *faults.entry(kind).or_default() += 1;
                    if kind.ends_session() {
                        expected_losses[victim] += 1;
                    }
                    if env.last_outage() >= env.session_timeout() {
                        long_elections += 1;
                        expected_losses.iter_mut().for_each(|e| *e += 1);
                    }
                }
                Err(why) => {
                    eprintln!(
                        "torture: skipped {} on session {victim}: {why}",
                        kind.name()
                    );
                    skipped += 1;
                }
            }
        }
        if config.faults.is_empty() {
            pause(end.saturating_duration_since(Instant::now()));
        }
        env.heal();
        run.stop.store(true, Ordering::SeqCst);
        // Every attempt is bounded by its timeout plus the retry policy; a worker still running
        // long after that is hung.
        let bound = Instant::now() + config.acquire_timeout + env.session_timeout() * 8;
        for _ in 0..workers {
            if done_rx
                .recv_timeout(bound.saturating_duration_since(Instant::now()))
                .is_err()
            {
                hung += 1;
            }
        }
        // A hung worker is reported (and left running, detached), never waited for.
    }
    let duration = started.elapsed();

    // Quiescence: every worker released; watches on lock paths must all have fired or been
    // removed (a waiter that timed out leaves its predecessor watch until that node goes).
    let patience = env.session_timeout() * 4 + Duration::from_secs(5);
    // The semaphore's counts keep a data watch while they live; with every count dropped, a
    // write fires those watches for the last time (nobody re-arms them).
    run.counts.lock().clear();
    let watches_live = settle(patience, || {
        let n = env.watches_under(&config.root);
        if n > 0 {
            let max = (SEMAPHORE_MAX as i32).to_be_bytes();
            let _ = clients[0].set_data(&count_path(&config.root), &max, None);
        }
        n
    });
    let leaked_watch_details = if watches_live > 0 {
        env.describe_watches_under(&config.root)
    } else {
        Vec::new()
    };
    let spurious_losses = clients
        .iter()
        .zip(&losses_before)
        .zip(&expected_losses)
        .map(|((c, before), expected)| {
            (c.session().snapshot().losses - before).saturating_sub(*expected)
        })
        .sum();
    env.close_clients();
    drop(clients);
    // Abandoned sessions (frozen, expired) lose their nodes when the server expires them.
    let dirs: Vec<String> = Recipe::ALL
        .iter()
        .flat_map(|r| r.node_dirs(&config.root))
        .chain([probe_path(&config.root)])
        .collect();
    let orphan_names = {
        let deadline = Instant::now() + patience;
        loop {
            let left = env.nodes_under(&dirs);
            if left.is_empty() || Instant::now() >= deadline {
                break left;
            }
            thread::sleep(Duration::from_millis(50));
        }
    };
    let watches_closed = settle(patience, || env.total_watches());

    let sections = std::mem::take(&mut *run.sections.lock());
    let log = run.log.records();
    let mut violations = 0;
    let mut expired_overlaps = 0;
    let mut violation_details = Vec::new();
    let mut term_violations = 0;
    let mut leader_terms = std::collections::BTreeSet::new();
    for recipe in Recipe::ALL {
        let of: Vec<Section> = sections
            .iter()
            .filter(|s| s.recipe == recipe)
            .cloned()
            .collect();
        let max = match recipe {
            Recipe::Semaphore => SEMAPHORE_MAX as i64,
            Recipe::ReadWrite => i64::MAX, // readers share; writers are checked pairwise
            Recipe::Mutex | Recipe::SemaphoreMutex | Recipe::Latch | Recipe::Selector => 1,
        };
        if recipe.is_election() {
            // One leader per term, terms never back in time.
            let (v, d) = check_terms(&of, &log);
            term_violations += v;
            violation_details.extend(d);
            leader_terms.extend(of.iter().filter_map(|s| s.token.map(|t| (recipe, t))));
        }
        let (v, d) = check_exclusion(&of, max, &log);
        violations += v;
        violation_details.extend(d);
        // What the same sections would show with nothing set aside.
        expired_overlaps += check_exclusion(&of, max, &[]).0.saturating_sub(v);
    }
    let count = |f: &dyn Fn(&Section) -> bool| sections.iter().filter(|s| f(s)).count() as u64;
    let invalid_sections = count(&|s| !s.counts());
    let expired_sections = count(&|s| s.counts() && expired_unannounced(s, &log));
    // A refused write from a holder that was valid throughout means tokens out of order.
    let rejected_valid_writes =
        count(&|s| s.counts() && s.write_refused && !expired_unannounced(s, &log));
    let tally = std::mem::take(&mut *run.tally.lock());
    let revoked = &run.revocations;
    let (requests, calls, on_acquirer) = (
        revoked.requests.load(Ordering::SeqCst),
        revoked.calls.load(Ordering::SeqCst),
        revoked.on_acquirer.load(Ordering::SeqCst),
    );
    if tally.downgrade_violations > 0 {
        violations += tally.downgrade_violations;
        violation_details.push(format!(
            "rw: {} read lock(s) granted to a session whose write lock was lost (expired, or \
             left in a session the client had not reported), beside another writer",
            tally.downgrade_violations
        ));
    }
    let mut fencing = (0, 0, 0);
    for store in run.stores.values().chain([&probe.store]) {
        let (a, r, s) = store.counts();
        fencing = (fencing.0 + a, fencing.1 + r, fencing.2 + s);
    }
    // A superseded holder's write that came before its successor's first write is accepted
    // by any fenced store; when the server ended the holder's session without warning, the
    // holder could not know either (see `timeline`).
    fencing.2 = fencing
        .2
        .saturating_sub(count(&|s| s.write_stale && expired_unannounced(s, &log)));
    let probes = *probe.runs.lock();
    let probes_refused = *probe.refused.lock();
    let probe_holders_not_lost = *probe.not_lost.lock();
    Summary {
        backend: env.name(),
        sessions,
        duration,
        acquisitions: tally.acquisitions,
        timeouts: tally.timeouts,
        errors: tally.errors,
        release_errors: tally.release_errors,
        token_errors: tally.token_errors,
        invalid_sections,
        expired_sections,
        expired_overlaps,
        faults,
        faults_skipped: skipped,
        holder_hits: tally.holder_hits,
        violations,
        violation_details,
        leader_sections: count(&|s| s.recipe.is_election()),
        leader_terms: leader_terms.len() as u64,
        term_violations,
        fencing,
        rejected_valid_writes,
        probes,
        probes_refused,
        probe_holders_not_lost,
        stale_counts: tally.stale_counts,
        revocations: (requests, calls),
        revocation_violations: on_acquirer + calls.saturating_sub(requests),
        panics: tally.panics,
        hung,
        orphans: orphan_names.len(),
        orphan_names,
        watches_live,
        watches_closed,
        spurious_losses,
        long_elections,
        member_crashes: env.member_crashes(),
        leaked_watch_details,
    }
}
