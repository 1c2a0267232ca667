//! The session thread's part in leaving a silent member (the rule is in `../silence.rs`):
//! judged on every turn of the keep-alive loop, from the connection's oldest unanswered
//! request, its latest answers and the last byte received.

use std::time::{Duration, Instant};

use super::SessionCore;
use crate::client::native::connection::Connection;
use crate::client::native::silence;

impl SessionCore {
    /// Judges the member silent or not (`silence.rs`): `Ok` with how long until it could be,
    /// or `Err` with how long its oldest request has gone unanswered once it is (it is then
    /// marked left and avoided; the caller closes the connection).
    pub(super) fn silent_member(
        &self,
        conn: &Connection,
        negotiated: Duration,
    ) -> Result<Duration, Duration> {
        let mut link = self.link.lock();
        let threshold =
            link.silence
                .threshold(conn.slowest_answer(), negotiated, self.config.hosts.len());
        let (unanswered, since_recv) = (conn.oldest_unanswered(), conn.since_recv());
        if !silence::is_silent(unanswered, since_recv, threshold) {
            let waited = unanswered.map_or(Duration::ZERO, |u| u.min(since_recv));
            return Ok(threshold.map_or(Duration::MAX, |t| t.saturating_sub(waited)));
        }
        let host = self.current_host(&link);
        link.left = Some(host);
        link.silence.left(host, Instant::now());
        Err(unanswered.unwrap_or_default())
    }
}
