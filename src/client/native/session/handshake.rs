//! One attempt to reach a server and be accepted: the host resolved now and each of its
//! addresses tried (`hosts`), TCP (and TLS), the ConnectRequest with the last zxid seen, the
//! ConnectResponse. The attempt's socket is registered at once, so `close()` can shut it.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{SessionCore, MIN_TIMEOUT};
use crate::client::native::failure::ConnectFailure;
use crate::client::native::hosts::{self, Reach};
use crate::client::native::records::{ConnectRequest, ConnectResponse};
use crate::client::native::transport::Transport;

impl SessionCore {
    /// One attempt on `host`: resolved now, each of its addresses tried within `timeout`.
    /// A failure says how far the most hopeful address got (a name that does not resolve:
    /// [`Reach::Unreachable`]).
    pub(super) fn handshake(
        &self,
        host: &str,
        timeout: Duration,
        session_id: i64,
        password: Vec<u8>,
    ) -> Result<(Transport, ConnectResponse), ConnectFailure> {
        hosts::try_addresses(host, timeout, |addr, timeout| {
            self.handshake_at(host, addr, timeout, session_id, password.clone())
        })
    }

    fn handshake_at(
        &self,
        host: &str,
        addr: SocketAddr,
        timeout: Duration,
        session_id: i64,
        password: Vec<u8>,
    ) -> Result<(Transport, ConnectResponse), ConnectFailure> {
        let failed = |what: &str, e| ConnectFailure::io(Reach::Failed, what, e);
        let timeout = timeout.max(Duration::from_millis(1));
        let tcp = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| ConnectFailure::io(Reach::Unreachable, "connect", e))?;
        self.track_attempt(&tcp)?;
        let _ = tcp.set_nodelay(true);
        tcp.set_read_timeout(Some(timeout))
            .and_then(|()| tcp.set_write_timeout(Some(timeout)))
            .map_err(|e| failed("socket options", e))?;
        #[cfg(feature = "tls")]
        let mut stream = match &self.config.tls {
            Some(config) => {
                let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
                let name = name.trim_start_matches('[').trim_end_matches(']');
                Transport::tls(tcp, config.clone(), name)?
            }
            None => Transport::plain(tcp),
        };
        #[cfg(not(feature = "tls"))]
        let mut stream = {
            let _ = host; // the name matters only to TLS (the server name it checks)
            Transport::plain(tcp)
        };
        let request = ConnectRequest {
            last_zxid_seen: self.last_zxid.load(Ordering::SeqCst),
            timeout_ms: i32::try_from(self.config.session_timeout.as_millis()).unwrap_or(i32::MAX),
            session_id,
            password,
        };
        use std::io::Write;
        stream
            .write_all(&request.encode())
            .map_err(|e| failed("write", e))?;
        let body = hosts::read_connect_response(
            &mut stream,
            self.config.packet_limit,
            request.last_zxid_seen,
        )?;
        let response = ConnectResponse::decode(&body).map_err(|e| {
            ConnectFailure::explained(
                Reach::Failed,
                format!("ConnectResponse: {e}"),
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        // A write that makes no progress for 2/3 of the *negotiated* timeout fails, as the
        // link is dead by then anyway (the dead-link clock shuts it down at that point).
        let negotiated = Duration::from_millis(response.timeout_ms.max(1) as u64);
        stream
            .set_read_timeout(None)
            .and_then(|()| stream.set_write_timeout(Some((negotiated * 2 / 3).max(MIN_TIMEOUT))))
            .map_err(|e| failed("socket options", e))?;
        Ok((stream, response))
    }
}
