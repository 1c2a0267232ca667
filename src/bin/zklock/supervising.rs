//! Running the command under the lock: its environment, forwarding signals to it, terminating
//! it when the lock is lost, releasing afterwards, and zklock's exit status. The command is a
//! process group of its own ([`crate::group`]): every signal goes to the whole group (to the
//! command alone with `--foreground`). With `--elect`, rounds of the same follow each other
//! until a stop signal, or a failure of zklock's own, ends one.

use std::process::{Command, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::locks::{HeldNode, LockState};

use crate::cli::RunArgs;
use crate::connecting::close;
use crate::durations::{deadline_after, remaining};
use crate::exit;
use crate::group::{Expiry, Running};
use crate::signals;
use crate::waiting::{acquire, Event, Held};

/// Takes the lock, runs the command while holding it, releases it; returns the exit status.
/// With `--elect`, does so again and again (each round queues anew) until a round ends for a
/// stop signal or a failure of zklock's own.
pub(crate) fn run(args: RunArgs) -> i32 {
    // One channel and one signal thread for every round: a signal that lands between two
    // rounds waits in the channel.
    let (events_tx, events) = mpsc::channel();
    if let Err(e) = signals::deliver_to(events_tx.clone()) {
        eprintln!("zklock: cannot handle signals: {e}");
        return exit::LOCK_ERROR;
    }
    loop {
        match round(&args, &events_tx, &events) {
            Round::Done(code) => return code,
            Round::Again(code) if args.elect => {
                // A stop signal that came once the command had ended: no new round.
                if let Some(signo) = stop_signal_pending(&events) {
                    eprintln!("zklock: stopped by signal {signo} between two runs");
                    let _ = code;
                    return exit::SIGNAL_BASE + signo;
                }
                log::info!("queueing again for leadership of {}", args.path);
            }
            Round::Again(code) => return code,
        }
    }
}

/// The first stop signal waiting in `events`, if any (other events of a round that is over
/// are dropped).
fn stop_signal_pending(events: &Receiver<Event>) -> Option<i32> {
    events.try_iter().find_map(|event| match event {
        Event::Signal(signo) if signals::is_stop(signo) => Some(signo),
        _ => None,
    })
}

/// How a round ended.
enum Round {
    /// zklock exits with this status.
    Done(i32),
    /// The command exited by itself (its status) or the lock was lost: with `--elect`, queue
    /// again; else exit with the status.
    Again(i32),
}

/// One round: take the lock, run the command while holding it, release it.
fn round(args: &RunArgs, events_tx: &Sender<Event>, events: &Receiver<Event>) -> Round {
    let Held {
        client,
        node,
        loss_tx,
        release_tx,
    } = match acquire(args, events_tx, events) {
        Ok(held) => held,
        Err(code) => return Round::Done(code),
    };

    // Phase 2: run the command; watch the lock meanwhile.
    let token = match node.fencing_token() {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "zklock: the lock {} was lost right after acquiring it: {e}",
                args.path
            );
            close(&client);
            return Round::Again(exit::LOCK_LOST);
        }
    };
    let mut cmd = Command::new(&args.command[0]);
    // The credentials are zklock's, not the command's.
    cmd.args(&args.command[1..])
        .env_remove("ZK_AUTH")
        .env("ZKLOCK_PATH", &args.path)
        .env("ZKLOCK_NODE", node.path())
        .env("ZKLOCK_FENCING_TOKEN", token.to_string());
    // The guardian kills the group by `safe_until` if zklock cannot (frozen): the same
    // deadline, and the same SIGTERM ahead of it, as `watch_for_loss` keeps.
    let expiry = Expiry {
        safe_until: {
            let node = node.clone();
            Box::new(move || node.client().session().safe_until())
        },
        timeout: client
            .as_ref()
            .map_or(args.session_timeout, |c| c.negotiated_timeout()),
        stop_ahead: args.session_timeout / STOP_AHEAD,
    };
    // On the main thread, which lives as long as zklock: the command's parent-death signal
    // and the guardian follow the thread that created them.
    let running = match Running::spawn(&mut cmd, args.foreground, Some(expiry)) {
        Ok(running) => running,
        Err(e) => {
            eprintln!("zklock: cannot run {:?}: {e}", args.command[0]);
            let _ = release_tx.send(());
            close(&client);
            return Round::Done(if e.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            });
        }
    };
    watch_for_loss(node.clone(), loss_tx, args.session_timeout);
    let (outcome, stopped) = supervise(running, events, node.path(), args.grace);
    // A stop signal forwarded to the command ends zklock once the command has ended.
    let end = |code| match stopped {
        true => Round::Done(code),
        false => Round::Again(code),
    };
    match outcome {
        Outcome::Exited(status) => {
            // The worker releases (deletes our node); closing afterwards ends the session,
            // which would delete the node anyway if the release could not.
            let mut late_stop = None;
            if release_tx.send(()).is_ok() {
                let deadline = deadline_after(args.session_timeout);
                while let Ok(event) = recv_until(events, deadline) {
                    match event {
                        Event::Released => break,
                        // Kept, not dropped: it ends an `--elect` daemon after this round.
                        Event::Signal(signo) if signals::is_stop(signo) => late_stop = Some(signo),
                        _ => {}
                    }
                }
            }
            close(&client);
            match late_stop {
                Some(signo) if args.elect => {
                    eprintln!("zklock: stopped by signal {signo} after the command ended");
                    Round::Done(exit::SIGNAL_BASE + signo)
                }
                _ => end(status_code(status)),
            }
        }
        Outcome::LockLost(status) => {
            eprintln!(
                "zklock: lost the lock {} (node {}) while the command ran; it was terminated ({})",
                args.path,
                node.path(),
                describe(status)
            );
            close(&client);
            end(exit::LOCK_LOST)
        }
    }
}

enum Outcome {
    Exited(ExitStatus),
    LockLost(ExitStatus),
}

/// Waits for the command's leader to exit; forwards signals to its group; terminates the
/// group when the lock is lost. True with the outcome when a stop signal was forwarded.
fn supervise(
    running: Running,
    events: &Receiver<Event>,
    node: &str,
    grace: Duration,
) -> (Outcome, bool) {
    let mut stopped = false;
    loop {
        // Looked at before each wait: one SIGCHLD may stand for several exits, and the exit
        // may have come before this loop started.
        if running.has_exited() {
            return (ended(running), stopped);
        }
        match events.recv() {
            Ok(Event::Signal(signo)) if signals::is_stop(signo) => {
                log::info!("forwarding signal {signo} to the command");
                stopped = true;
                running.signal(signo);
            }
            Ok(Event::Lost(lost)) if lost == node => {
                let (status, stop) = terminate(running, events, grace, None);
                return (Outcome::LockLost(status), stopped || stop);
            }
            Ok(Event::Expiring(lost, by)) if lost == node => {
                log::warn!(
                    "the lock's session may expire in {:?} and no server confirmed it: \
                     stopping the command before another holder can start",
                    by.saturating_duration_since(Instant::now())
                );
                let (status, stop) = terminate(running, events, grace, Some(by));
                return (Outcome::LockLost(status), stopped || stop);
            }
            Ok(_) => {}
            // Nobody left to report anything (cannot happen while the signal thread runs).
            Err(_) => return (ended(running), stopped),
        }
    }
}

/// Reaps the command, which has ended: by itself, or stopped by the guardian because the
/// lock's deadline passed without zklock extending it (the lock may be someone else's: a
/// lost lock).
fn ended(running: Running) -> Outcome {
    let (status, ran_out) = running.reap();
    if !ran_out {
        return Outcome::Exited(status);
    }
    log::warn!(
        "the guardian stopped the command: the lock's session could expire before zklock \
         confirmed it (was zklock stopped or starved?)"
    );
    Outcome::LockLost(status)
}

/// SIGTERM to the group; once the leader exits, or `grace` passes, or `by` comes (the moment
/// the session can expire), SIGKILL to what is left of the group (the lock is gone or may be
/// gone: nothing of the command may run on); returns the leader's status, and true when a
/// stop signal came meanwhile.
fn terminate(
    running: Running,
    events: &Receiver<Event>,
    grace: Duration,
    by: Option<Instant>,
) -> (ExitStatus, bool) {
    let mut stopped = false;
    running.signal(libc::SIGTERM);
    // `grace` is at most a year (checked at parsing); `None` would wait without limit.
    let deadline = match (deadline_after(grace), by) {
        (Some(d), Some(by)) => Some(d.min(by)),
        (d, by) => d.or(by),
    };
    while !running.has_exited() {
        match recv_until(events, deadline) {
            Ok(Event::Signal(signo)) if signals::is_stop(signo) => {
                stopped = true;
                running.signal(signo);
            }
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => {
                log::warn!("the command did not exit in time after SIGTERM; sending SIGKILL");
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    running.signal(libc::SIGKILL);
    (running.reap().0, stopped)
}

/// The next event, waiting at most until `deadline` (`None`: without limit).
fn recv_until(
    events: &Receiver<Event>,
    deadline: Option<Instant>,
) -> Result<Event, RecvTimeoutError> {
    match remaining(deadline) {
        Some(left) => events.recv_timeout(left),
        None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
    }
}

fn status_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signo)) => exit::SIGNAL_BASE + signo,
        (None, None) => exit::LOCK_ERROR,
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signo)) => format!("signal {signo}"),
        _ => "unknown status".into(),
    }
}

/// Reports `Event::Lost` once the held node is lost, and `Event::Expiring` when it stays
/// `Suspect` until `T / STOP_AHEAD` before `safe_until` (the earliest moment the leader can
/// have expired the session and granted the lock to another): a suspect lock whose session
/// comes back in time costs nothing, one that may be gone is stopped before another holder
/// can start.
fn watch_for_loss(node: Arc<HeldNode>, tx: Sender<Event>, timeout: Duration) {
    let spawned = std::thread::Builder::new()
        .name("zklock-watch".into())
        .spawn(move || loop {
            let session = node.client().session();
            let epoch = session.epoch();
            match node.wait_while_held(None) {
                LockState::Lost => {
                    let _ = tx.send(Event::Lost(node.path().to_string()));
                    return;
                }
                LockState::Suspect => {
                    let Some(safe_until) = session.safe_until() else {
                        // A backend that proves nothing: wait for the session to change.
                        session.wait_for_change(epoch, None);
                        continue;
                    };
                    let stop_at = safe_until
                        .checked_sub(timeout / STOP_AHEAD)
                        .unwrap_or(safe_until);
                    session.wait_for_change(epoch, Some(stop_at));
                    if Instant::now() >= stop_at && node.state() != LockState::Held {
                        let _ = tx.send(Event::Expiring(node.path().to_string(), safe_until));
                        return;
                    }
                }
                // Held, or a state of a later version: look again.
                _ => {}
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot watch the lock for loss: {e}");
    }
}

/// The command of a suspect lock is stopped `T / STOP_AHEAD` before its session can expire:
/// SIGTERM then, SIGKILL by the expiry at the latest.
const STOP_AHEAD: u32 = 6;
