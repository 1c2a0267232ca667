//! The signals zklock acts on, delivered by `signal-hook` as events on the main thread's
//! channel, so the main loop blocks on one channel instead of polling a flag:
//! SIGINT/SIGTERM/SIGHUP (withdraw from the queue while waiting; forwarded to the command's
//! group while it runs) and SIGCHLD (the command may have exited).

use std::sync::mpsc::Sender;

use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::waiting::Event;

/// Installs the handlers (before anything is spawned, so no exit goes unseen) and starts the
/// thread that turns each signal into [`Event::Signal`].
pub(crate) fn deliver_to(events: Sender<Event>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGCHLD])?;
    std::thread::Builder::new()
        .name("zklock-signals".into())
        .spawn(move || {
            for signo in signals.forever() {
                if events.send(Event::Signal(signo)).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// Whether `signo` asks zklock to stop (rather than report a child's exit).
pub(crate) fn is_stop(signo: i32) -> bool {
    signo != SIGCHLD
}
