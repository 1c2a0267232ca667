//! Reconnecting: trying the members in turn (paced, `pacing.rs`) until one accepts the
//! session, or declaring it lost when none did within `4T/3` of the last time a server spoke
//! for it (or a server says it expired); a new session then.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pacing::Pacer;
use super::{closed_reason, SessionCore};
use crate::client::native::connection::Connection;
use crate::client::native::failure::ConnectFailure;
use crate::client::native::hosts;
use crate::primitives::boot_clock::BootInstant;
use crate::session::ConnectionState;

impl SessionCore {
    /// Reports the session lost: watches dropped without firing, next connect is a new session.
    pub(super) fn lose(&self, why: &str) {
        log::warn!("session lost: {why}");
        self.note(format!("session lost: {why}"));
        {
            let mut link = self.link.lock();
            link.session_id = 0;
            link.password = vec![0; 16];
            // A new session starts from zxid 0, as a new Java handle does. (No reply can
            // raise it again: the old connection is closed, its pending queue empty.)
            self.last_zxid.store(0, Ordering::SeqCst);
        }
        self.watches.clear();
        if self.session.state() != ConnectionState::Lost {
            self.session.transition(ConnectionState::Lost, None);
        }
    }

    /// Reconnects (to the same session while it may live); `None` once closed.
    pub(super) fn reconnect(self: &Arc<Self>) -> Option<Arc<Connection>> {
        loop {
            match self.connect_until(None) {
                Ok(conn) => return Some(conn),
                Err(_) if self.is_closed() => return None,
                Err(e) => {
                    log::debug!("reconnect: {e}");
                    self.lose("no server accepted the session within 4/3 of its timeout");
                }
            }
        }
    }

    /// Tries hosts in turn until a session is established or `deadline` passes; without a
    /// deadline, while the session may live (`4T/3` after a server last spoke for it; no
    /// limit while there is no session).
    pub(super) fn connect_until(
        self: &Arc<Self>,
        deadline: Option<Instant>,
    ) -> Result<Arc<Connection>, ConnectFailure> {
        // The latest failure of each host: the error names every host's.
        let mut failures: Vec<Option<ConnectFailure>> =
            (0..self.config.hosts.len()).map(|_| None).collect();
        let mut pacer = {
            let mut link = self.link.lock();
            let mut pacer = Pacer::new(self.config.hosts.len(), link.negotiated);
            if let Some(left) = link.left.take() {
                pacer.pass_over(left);
            }
            for avoided in link.silence.avoided(Instant::now()) {
                pacer.pass_over(avoided);
            }
            pacer
        };
        let mut outage = Instant::now();
        // The ceiling of the pause before the next attempt (none before the first).
        let mut pause = Duration::ZERO;
        loop {
            let (index, host, session_id, password, negotiated, until) = {
                let mut link = self.link.lock();
                if link.closed {
                    return Err(closed_reason(&link).into());
                }
                let until = deadline.or_else(|| {
                    (link.session_id != 0).then(|| link.heard + link.negotiated * 4 / 3)
                });
                if !pause.is_zero() {
                    self.note(format!("pause up to {} ms", pause.as_millis()));
                    let wake = Instant::now() + Pacer::pause(pause);
                    let wake = until.map_or(wake, |u| wake.min(u));
                    while !link.closed && Instant::now() < wake {
                        self.changed.wait_until(&mut link, wake);
                    }
                    if link.closed {
                        return Err(closed_reason(&link).into());
                    }
                }
                if until.is_some_and(|u| Instant::now() >= u) {
                    let tried: Vec<_> = failures.into_iter().flatten().collect();
                    return Err(match tried.is_empty() {
                        true => "no attempt".into(),
                        false => ConnectFailure::joined(tried),
                    });
                }
                let index = pacer.pick(link.next_host % self.config.hosts.len());
                link.next_host = index.wrapping_add(1);
                (
                    index,
                    self.config.hosts[index].clone(),
                    link.session_id,
                    link.password.clone(),
                    link.negotiated,
                    until,
                )
            };
            self.attempts.fetch_add(1, Ordering::Relaxed);
            let connect_timeout =
                (negotiated / self.config.hosts.len() as u32).max(Duration::from_millis(100));
            let connect_timeout = until.map_or(connect_timeout, |u| {
                connect_timeout.min(u.saturating_duration_since(Instant::now()))
            });
            let asked_at = BootInstant::now();
            let (stream, response) =
                match self.handshake(&host, connect_timeout, session_id, password) {
                    Ok(done) => done,
                    Err(e) => {
                        self.link.lock().connecting = None;
                        log::debug!("{host}: {e}");
                        self.note(format!("{host}: {e}"));
                        pause = pacer.failed(index, e.reach(), outage.elapsed());
                        // A certificate that does not verify explains the failure better than
                        // the time-out of a later attempt on that host cut short by the deadline.
                        let kept = &mut failures[index];
                        if e.text().contains("certificate")
                            || !kept
                                .as_ref()
                                .is_some_and(|k| k.text().contains("certificate"))
                        {
                            *kept = Some(e.at(&host));
                        }
                        continue;
                    }
                };
            self.note(format!(
                "{host}: answered session 0x{:x} (asked 0x{session_id:x}), timeout {} ms",
                response.session_id, response.timeout_ms
            ));
            if response.timeout_ms <= 0 {
                self.link.lock().connecting = None;
                self.lose("the server says the session expired");
                drop(stream);
                // A new session: a new outage, from the next host without a pause.
                pacer = Pacer::new(self.config.hosts.len(), negotiated);
                outage = Instant::now();
                pause = Duration::ZERO;
                continue;
            }
            self.link.lock().heard = Instant::now();
            let established = self.establish(stream, response, session_id, asked_at);
            self.link.lock().connecting = None;
            match established {
                Ok(conn) => return Ok(conn),
                Err(e) => {
                    self.note(format!("{host}: {e}"));
                    failures[index] = Some(e.at(&host));
                    pause = pacer.failed(index, hosts::Reach::Failed, outage.elapsed());
                    // The link is down again: say so, as after any other broken link.
                    if self.session.state().is_connected() {
                        self.session.transition(ConnectionState::Suspended, None);
                    }
                }
            }
        }
    }
}
