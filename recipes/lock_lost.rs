//! Lock lost: a holder works in small steps and checks its guard before each one. When its
//! connection goes quiet the guard turns `Suspect` and the holder pauses; when the session
//! expires the guard turns `Lost` and the holder stops for good, and a rival in another
//! session is granted the lock. Work done after `Suspect` could have raced the rival: that is
//! why a holder must check.
//!
//! - Embedded ensemble: the holder's link is suspended (`MemoryClient::suspend`), the server
//!   expires its session (`expire`), then the link comes back (`resume`).
//! - Real ensemble (`--connect HOSTS`): the holder connects through a `testing::FaultProxy`
//!   in front of the first server, which freezes its link; after half a session timeout the
//!   client declares `Suspended`, after one it declares `Lost` — no later than the server
//!   expires the session and hands the lock to the rival (measured: Lost at 4.1 s, rival at
//!   4.5 s, with a 4 s session on a default server).
//!
//! ```sh
//! cargo run --example lock_lost
//! cargo run --example lock_lost -- --connect 127.0.0.1:2181
//! ```

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use log::{info, warn};
use zk_locks::{InterProcessLock, InterProcessMutex, LockState};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};
use zk_locks::testing::harness::{self, Backend, ClientKind, Real, TestClient};
use zk_locks::testing::FaultProxy;

const LOCK: &str = "/zk-locks/lock_lost/lock";
/// One unit of the holder's work (simulated).
const STEP: Duration = Duration::from_millis(10);

/// What happened, for the test that runs this recipe.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The states the holder's guard went through, in order (no repeats).
    pub states: Vec<LockState>,
    /// Steps of work done while the guard was `Held`.
    pub steps_while_held: usize,
    /// True when the rival held the lock before the holder learnt it was `Lost`.
    pub rival_won_while_holder_suspect: bool,
}

/// What the holder tells the conductor.
#[derive(Debug, PartialEq)]
enum Report {
    Working,
    Suspect,
    Lost,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

/// Runs the scenario.
pub fn run(args: &[String]) -> AnyResult<Outcome> {
    let options = cookbook::Options::parse(args)?;
    let backend = options.backend();
    info!("lock_lost on {}", options.describe());
    match backend.connect_string() {
        None => scenario(backend.try_connect()?, backend.as_ref(), Fault::Memory),
        Some(hosts) => real(backend.as_ref(), &hosts),
    }
}

/// How the holder's session is made to die.
enum Fault {
    /// `suspend`, `expire`, `resume` on the embedded ensemble.
    Memory,
    /// A proxy in front of the real ensemble freezes the holder's link.
    Proxy(FaultProxy),
}

/// The holder connects through a fault proxy in front of the first server of `hosts`.
fn real(backend: &dyn Backend, hosts: &str) -> AnyResult<Outcome> {
    let (server, chroot) = harness::first_server(hosts)?;
    let proxy = FaultProxy::start(server)?;
    let via = format!("{}{chroot}", proxy.connect_string());
    info!("the holder connects through a fault proxy at {via}");
    let holder = Real::at(&via, ClientKind::Native, cookbook::SESSION_TIMEOUT).try_connect()?;
    scenario(holder, backend, Fault::Proxy(proxy))
}

fn scenario(holder_conn: TestClient, backend: &dyn Backend, fault: Fault) -> AnyResult<Outcome> {
    let rival_conn = backend.try_connect()?;
    let holder_lock = InterProcessMutex::new(holder_conn.client.clone(), LOCK)?;
    let rival_lock = InterProcessMutex::new(rival_conn.client.clone(), LOCK)?;
    // Only lists the lock's queue, to start the chaos once the rival waits in it.
    let observer = InterProcessMutex::new(rival_conn.client.clone(), LOCK)?;
    let (reports, from_holder) = mpsc::channel();
    let (rival_won, from_rival) = mpsc::channel();

    thread::scope(|scope| -> AnyResult<Outcome> {
        let holder = scope.spawn(|| hold_and_work(&holder_lock, reports));
        // The rival queues only once the holder holds the lock.
        expect(&from_holder, Report::Working, Duration::from_secs(30))?;
        let rival = scope.spawn(move || -> AnyResult<()> {
            info!("rival queues for the lock");
            let guard = rival_lock.lock()?;
            info!(
                "rival HOLDS the lock (fencing token {})",
                guard.fencing_token()?
            );
            let _ = rival_won.send(());
            guard.unlock()?;
            Ok(())
        });

        wait_for_contenders(&observer, 2)?;
        let rival_won_while_suspect = match fault {
            Fault::Memory => {
                let memory = holder_conn.memory().ok_or("not a memory session")?;
                info!("chaos: the holder's link goes down (suspend)");
                memory.suspend();
                expect(&from_holder, Report::Suspect, Duration::from_secs(10))?;
                info!("chaos: the server expires the holder's session (expire)");
                memory.expire();
                from_rival.recv_timeout(Duration::from_secs(10))?;
                info!("chaos: the holder's link comes back (resume)");
                memory.resume();
                true
            }
            Fault::Proxy(proxy) => {
                info!(
                    "chaos: the proxy freezes the holder's link (session timeout {:?})",
                    cookbook::SESSION_TIMEOUT
                );
                proxy.freeze();
                expect(&from_holder, Report::Suspect, cookbook::SESSION_TIMEOUT * 3)?;
                let won = from_rival.recv_timeout(cookbook::SESSION_TIMEOUT * 3);
                info!("chaos: the proxy lets traffic through again");
                proxy.thaw();
                won.is_ok()
            }
        };
        expect(&from_holder, Report::Lost, cookbook::SESSION_TIMEOUT * 3)?;
        let (states, steps_while_held) = holder.join().map_err(|_| "the holder panicked")??;
        rival.join().map_err(|_| "the rival panicked")??;
        ensure(
            states == [LockState::Held, LockState::Suspect, LockState::Lost],
            format!("the holder saw {states:?}"),
        )?;
        Ok(Outcome {
            states,
            steps_while_held,
            rival_won_while_holder_suspect: rival_won_while_suspect,
        })
    })
}

/// The holder: takes the lock, then does one step of work per check of its guard.
fn hold_and_work(
    lock: &InterProcessMutex,
    reports: mpsc::Sender<Report>,
) -> AnyResult<(Vec<LockState>, usize)> {
    let guard = lock.lock()?;
    info!(
        "holder HOLDS the lock (fencing token {}) and starts working",
        guard.fencing_token()?
    );
    let client = lock_client(&guard);
    let mut states = vec![LockState::Held];
    let mut steps = 0;
    let _ = reports.send(Report::Working);
    // A safety net for a scenario gone wrong: the holder never waits forever.
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        // The epoch is read before the state: a transition between the two is then not missed
        // by the wait below.
        let epoch = client.session().epoch();
        let state = guard.state();
        if states.last() != Some(&state) {
            states.push(state);
        }
        match state {
            LockState::Held => {
                thread::sleep(STEP); // one unit of (simulated) work
                steps += 1;
            }
            LockState::Lost => {
                warn!("holder: lock is LOST (session expired) — stopping work for good");
                let _ = reports.send(Report::Lost);
                break;
            }
            // Suspect (and any state a later version adds): not sure of the lock, pause.
            _ => {
                if states.len() == 2 {
                    warn!("holder: lock is SUSPECT (connection suspended) — pausing work after {steps} steps");
                    let _ = reports.send(Report::Suspect);
                }
                ensure(
                    Instant::now() < give_up,
                    "the holder stayed Suspect for a minute",
                )?;
                // Nothing to do until the connection changes: wait for the next transition.
                client.session().wait_for_change(epoch, Some(give_up));
            }
        }
    }
    // The node went with the session: a lost hold releases at once, link or no link.
    guard.unlock()?;
    info!("holder: released the lost hold");
    Ok((states, steps))
}

fn lock_client(guard: &zk_locks::LockGuard<'_, InterProcessMutex>) -> zk_locks::SharedClient {
    guard.nodes()[0].client().clone()
}

/// Polls the lock's queue until `n` contenders are in it (a real condition, bounded).
fn wait_for_contenders(lock: &InterProcessMutex, n: usize) -> AnyResult<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while lock.participant_nodes()?.len() < n {
        ensure(Instant::now() < deadline, "the rival never queued")?;
        thread::sleep(Duration::from_millis(5)); // poll pacing
    }
    Ok(())
}

/// Waits for the holder to report `want` (skipping earlier reports of other kinds).
fn expect(from_holder: &mpsc::Receiver<Report>, want: Report, within: Duration) -> AnyResult<()> {
    loop {
        match from_holder.recv_timeout(within) {
            Ok(r) if r == want => return Ok(()),
            Ok(_) => continue,
            Err(_) => {
                return Err(format!("the holder did not report {want:?} within {within:?}").into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_lost_goes_suspect_then_lost() {
        let outcome = run(&cookbook::memory_args()).unwrap();
        assert_eq!(
            outcome.states,
            [LockState::Held, LockState::Suspect, LockState::Lost]
        );
        assert!(outcome.steps_while_held > 0);
        assert!(outcome.rival_won_while_holder_suspect);
    }

    /// The real-ensemble path: the holder's link is frozen by a `FaultProxy` (one session
    /// timeout, 4 s, until the client declares the session lost).
    #[test]
    fn lock_lost_on_a_real_server_goes_suspect_then_lost() {
        let Some(args) = cookbook::shared_server_args() else {
            return;
        };
        let outcome = run(&args).unwrap();
        assert_eq!(
            outcome.states,
            [LockState::Held, LockState::Suspect, LockState::Lost]
        );
        assert!(outcome.steps_while_held > 0);
    }
}
