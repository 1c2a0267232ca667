//! Running the command under the lock: its environment, forwarding signals to it, terminating
//! it when the lock is lost, releasing afterwards, and zklock's exit status.

use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::locks::{HeldNode, LockState};

use crate::cli::RunArgs;
use crate::connecting::close;
use crate::exit;
use crate::waiting::{acquire, take_signal, Event, Held, TICK};

/// Takes the lock, runs the command while holding it, releases it; returns the exit status.
pub(crate) fn run(args: RunArgs) -> i32 {
    let Held {
        client,
        node,
        events,
        loss_tx,
        release_tx,
    } = match acquire(&args) {
        Ok(held) => held,
        Err(code) => return code,
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
            return exit::LOCK_LOST;
        }
    };
    let mut cmd = Command::new(&args.command[0]);
    // The credentials are zklock's, not the command's.
    cmd.args(&args.command[1..])
        .env_remove("ZK_AUTH")
        .env("ZKLOCK_PATH", &args.path)
        .env("ZKLOCK_NODE", node.path())
        .env("ZKLOCK_FENCING_TOKEN", token.to_string());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("zklock: cannot run {:?}: {e}", args.command[0]);
            let _ = release_tx.send(());
            close(&client);
            return if e.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            };
        }
    };
    watch_for_loss(node.clone(), loss_tx);
    let outcome = supervise(&mut child, &events, args.grace);
    match outcome {
        Outcome::Exited(status) => {
            // The worker releases (deletes our node); closing afterwards ends the session,
            // which would delete the node anyway if the release could not.
            if release_tx.send(()).is_ok() {
                let deadline = Instant::now() + args.session_timeout;
                while let Ok(event) =
                    events.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                {
                    if matches!(event, Event::Released) {
                        break;
                    }
                }
            }
            close(&client);
            status_code(status)
        }
        Outcome::LockLost(status) => {
            eprintln!(
                "zklock: lost the lock {} (node {}) while the command ran; it was terminated ({})",
                args.path,
                node.path(),
                describe(status)
            );
            close(&client);
            exit::LOCK_LOST
        }
    }
}

enum Outcome {
    Exited(ExitStatus),
    LockLost(ExitStatus),
}

/// Waits for the child; forwards signals to it; terminates it when the lock is lost.
fn supervise(child: &mut Child, events: &Receiver<Event>, grace: Duration) -> Outcome {
    let pid = child.id() as libc::pid_t;
    loop {
        if let Some(signo) = take_signal() {
            log::info!("forwarding signal {signo} to the command");
            // SAFETY: plain kill(2) on our own unreaped child: the pid cannot be reused yet.
            unsafe { libc::kill(pid, signo) };
        }
        match child.try_wait() {
            Ok(Some(status)) => return Outcome::Exited(status),
            Ok(None) => {}
            Err(e) => {
                log::error!("waiting for the command: {e}");
            }
        }
        match events.recv_timeout(TICK) {
            Ok(Event::Lost) => return Outcome::LockLost(terminate(child, grace)),
            Ok(_) | Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {}
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`; returns the child's status.
fn terminate(child: &mut Child, grace: Duration) -> ExitStatus {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child, which is not reaped yet (try_wait returned None).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(TICK),
            _ => break,
        }
    }
    log::warn!("the command ignored SIGTERM for {grace:?}; sending SIGKILL");
    let _ = child.kill();
    match child.wait() {
        Ok(status) => status,
        Err(e) => {
            log::error!("waiting for the killed command: {e}");
            std::os::unix::process::ExitStatusExt::from_raw(libc::SIGKILL)
        }
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

/// Reports `Event::Lost` once the held node is lost. Suspect (connection suspended) is not
/// lost yet: the session may come back, and the server keeps our node meanwhile.
fn watch_for_loss(node: Arc<HeldNode>, tx: Sender<Event>) {
    let spawned = std::thread::Builder::new()
        .name("zklock-watch".into())
        .spawn(move || loop {
            let session = node.client().session();
            let epoch = session.epoch();
            match node.wait_while_held(None) {
                LockState::Lost => {
                    let _ = tx.send(Event::Lost);
                    return;
                }
                LockState::Suspect => {
                    session.wait_for_change(epoch, None);
                }
                // Held, or a state of a later version: look again.
                _ => {}
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot watch the lock for loss: {e}");
    }
}
