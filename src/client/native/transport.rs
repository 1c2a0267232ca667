//! The byte stream under a connection: plain TCP, or TLS over it (feature `tls`).
//!
//! A connection reads on its reader thread and writes from callers' threads at the same time.
//! TCP allows that on cloned handles; a TLS session is one state machine, so its state sits
//! behind a mutex that is held only to feed it ciphertext or take plaintext out — never
//! during a blocking socket read, so a reader waiting for bytes does not stop writers.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One connection's stream; clones share the socket (and the TLS session).
pub struct Transport {
    tcp: TcpStream,
    #[cfg(feature = "tls")]
    tls: Option<Arc<parking_lot::Mutex<rustls::ClientConnection>>>,
}

impl Transport {
    /// Plain TCP.
    pub fn plain(tcp: TcpStream) -> Transport {
        Transport {
            tcp,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Runs the TLS handshake on `tcp` (bounded by its read and write timeouts) and wraps it.
    /// The error names the cause (an unknown issuer, a refused client certificate, or a peer
    /// that does not speak TLS).
    #[cfg(feature = "tls")]
    pub fn tls(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        host: &str,
    ) -> Result<Transport, String> {
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| format!("TLS: {host:?} is not a valid server name: {e}"))?;
        let mut session = rustls::ClientConnection::new(config, name)
            .map_err(|e| format!("TLS: cannot start a session: {e}"))?;
        let mut socket = &tcp;
        while session.is_handshaking() {
            session.complete_io(&mut socket).map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof
                    || e.kind() == io::ErrorKind::ConnectionReset
                {
                    format!("TLS handshake: the server closed the connection ({e}); is this a TLS port, and does it want a client certificate?")
                } else {
                    format!("TLS handshake: {e}")
                }
            })?;
        }
        Ok(Transport {
            tcp,
            tls: Some(Arc::new(parking_lot::Mutex::new(session))),
        })
    }

    /// Another handle on the same stream.
    pub fn try_clone(&self) -> io::Result<Transport> {
        Ok(Transport {
            tcp: self.tcp.try_clone()?,
            #[cfg(feature = "tls")]
            tls: self.tls.clone(),
        })
    }

    /// Shuts the socket down both ways (wakes a blocked reader).
    pub fn shutdown(&self) {
        let _ = self.tcp.shutdown(Shutdown::Both);
    }

    /// Sets the socket's read timeout.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(timeout)
    }

    /// Sets the socket's write timeout.
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.tcp.set_write_timeout(timeout)
    }

    /// Whether a small write would not block: the socket reports room to write by
    /// `deadline` (now: no wait). Pings and closeSession use it, as they must never wait on
    /// a full socket past their deadline.
    pub fn writable_by(&self, deadline: Instant) -> bool {
        writable_by(&self.tcp, deadline)
    }
}

#[cfg(unix)]
fn writable_by(tcp: &TcpStream, deadline: Instant) -> bool {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: tcp.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        // Rounded up, so a wait shorter than a millisecond is not a busy loop.
        let millis = i32::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd, a count of one.
        let ready = unsafe { libc::poll(&mut poll, 1, millis) };
        if ready < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return ready == 1
            && poll.revents & libc::POLLOUT != 0
            && poll.revents & libc::POLLERR == 0;
    }
}

/// Elsewhere the room cannot be asked for: the write may then wait on a full socket.
#[cfg(not(unix))]
fn writable_by(_tcp: &TcpStream, _deadline: Instant) -> bool {
    true
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return tls_read(&self.tcp, tls, buf);
        }
        (&self.tcp).read(buf)
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let mut session = tls.lock();
            session.writer().write_all(buf)?;
            let mut socket = &self.tcp;
            while session.wants_write() {
                session.write_tls(&mut socket)?;
            }
            return Ok(buf.len());
        }
        (&self.tcp).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Plaintext if the session has some; else one blocking socket read (without the lock), fed
/// to the session, and again.
#[cfg(feature = "tls")]
fn tls_read(
    tcp: &TcpStream,
    tls: &parking_lot::Mutex<rustls::ClientConnection>,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut cipher = vec![0u8; 4096];
    loop {
        {
            let mut session = tls.lock();
            match session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        let n = (&*tcp).read(&mut cipher)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let mut session = tls.lock();
        let mut input = &cipher[..n];
        while !input.is_empty() {
            session.read_tls(&mut input)?;
            session
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        }
        let mut socket = tcp;
        while session.wants_write() {
            session.write_tls(&mut socket)?;
        }
    }
}
