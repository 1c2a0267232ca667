//! One zk-locks `LeaderLatch` participant in a process of its own (so that kill -9 is real),
//! speaking `ElectionParticipant.java`'s lines: "SESSION <hex>" once connected; on stdin
//! `reopen` (another session: placement on a member), `start` (then "LEADING <ns> <term>" and
//! "NOT-LEADING <ns>" as leadership comes and goes), `has` ("HAS <true|false> <ns>"), `act` (a read through the session, then "ACTED <ns>"), `close` ("CLOSING <ns>", the latch and the
//! client closed, "CLOSED <ns>", exit). End of input exits. Times are [`mono_ns`].

use std::io::{BufRead, Write};
use std::sync::Arc;

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::locks::{LeaderLatch, LeaderLatchListener, Leadership};
use zk_locks::{SharedClient, ZkClient};

use crate::failover::{mono_ns, SESSION_TIMEOUT};

/// The first argument that makes a program run [`participant_main`] instead of itself.
pub const PARTICIPANT_FLAG: &str = "--election-participant";

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // The controller reads these lines; if it is gone there is no one to tell.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

struct Announce;

impl LeaderLatchListener for Announce {
    fn is_leader(&self, leadership: &Leadership) {
        say(&format!("LEADING {} {}", mono_ns(), leadership.term()));
    }

    fn not_leader(&self) {
        say(&format!("NOT-LEADING {}", mono_ns()));
    }
}

fn open(connect: &str) -> Result<Arc<NativeClient>, String> {
    let client =
        NativeClient::connect_with(NativeOptions::new(connect).session_timeout(SESSION_TIMEOUT))
            .map_err(|e| e.to_string())?;
    let id = client.session().snapshot().session_id.unwrap_or(0);
    say(&format!("SESSION {:x}", id as u64));
    Ok(client)
}

/// Runs a participant when the program was started as one (`PARTICIPANT_FLAG connect path
/// id`): `Some(exit status)` then, `None` for any other command line. Programs that spawn our
/// participants (the failover program, the election smoke test) call it first thing.
pub fn participant_main() -> Option<i32> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match &args[..] {
        [flag, connect, path, id] if flag == PARTICIPANT_FLAG => {
            Some(match run(connect, path, id) {
                Ok(()) => 0,
                Err(e) => {
                    say(&format!("ERROR {e}"));
                    1
                }
            })
        }
        _ => None,
    }
}

fn run(connect: &str, path: &str, id: &str) -> Result<(), String> {
    let mut client = open(connect)?;
    let mut latch: Option<LeaderLatch> = None;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        match line.trim() {
            "reopen" => {
                client.close();
                client = open(connect)?;
            }
            "start" => {
                let l = LeaderLatch::new(client.clone() as SharedClient, path, id)
                    .map_err(|e| e.to_string())?;
                l.add_listener(Arc::new(Announce));
                l.start().map_err(|e| e.to_string())?;
                latch = Some(l);
            }
            // Retried while the outcome is unknown (a connection lost under it, as when the
            // session moves): Curator's `checkExists` retries the same way.
            "act" => match retried(|| client.exists(path)) {
                Ok(_) => say(&format!("ACTED {}", mono_ns())),
                Err(e) => say(&format!("ERROR act: {e}")),
            },
            "has" => {
                let has = latch.as_ref().is_some_and(|l| l.has_leadership());
                say(&format!("HAS {has} {}", mono_ns()));
            }
            "close" => {
                say(&format!("CLOSING {}", mono_ns()));
                if let Some(l) = latch.take() {
                    if let Err(e) = l.close() {
                        say(&format!("ERROR closing the latch: {e}"));
                    }
                }
                client.close();
                say(&format!("CLOSED {}", mono_ns()));
                return Ok(());
            }
            other => say(&format!("ERROR unknown command {other}")),
        }
    }
    client.close();
    Ok(())
}

/// `call` again while it fails with an unknown outcome (each try waits for a connection up to
/// the client's call timeout); at most 100 tries.
fn retried<T>(
    mut call: impl FnMut() -> zk_locks::client::ZkResult<T>,
) -> zk_locks::client::ZkResult<T> {
    let mut tries = 0;
    loop {
        match call() {
            Err(e) if e.is_retryable() && tries < 100 => tries += 1,
            done => return done,
        }
    }
}
