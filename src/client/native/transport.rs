//! The byte stream under a connection: plain TCP, or TLS over it (feature `tls`).
//!
//! A connection reads on its reader thread and writes from callers' threads at the same time.
//! TCP allows that on cloned handles; a TLS session is one state machine, so its state sits
//! behind a mutex that is held only to feed it ciphertext, take plaintext out, or encrypt —
//! never during a blocking socket read or write, so a reader waiting for bytes does not stop
//! writers and a writer blocked on a full socket does not stop the reader.
//!
//! rustls buffers little on either side, and a frame may be up to the packet limit (1 MiB):
//! - writing, it takes at most 64 KiB of plaintext before its ciphertext is written out, so a
//!   frame is encrypted in chunks, each chunk's ciphertext written to the socket before the
//!   next is handed over;
//! - reading, it refuses ciphertext while 16 KiB of decrypted plaintext waits, so plaintext is
//!   always taken out before more ciphertext is fed, and ciphertext read from the socket but
//!   not yet taken stays queued here, fed a record at a time as plaintext is drained.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(feature = "tls")]
use super::failure::ConnectFailure;
#[cfg(feature = "tls")]
use super::hosts::{self, Reach};

/// One connection's stream; clones share the socket (and the TLS session).
pub struct Transport {
    tcp: TcpStream,
    #[cfg(feature = "tls")]
    tls: Option<Arc<Tls>>,
    /// This handle's buffer for ciphertext read off the socket (TLS only).
    #[cfg(feature = "tls")]
    scratch: Vec<u8>,
}

/// A TLS session shared by the clones of one transport.
#[cfg(feature = "tls")]
struct Tls {
    /// The session and the ciphertext not yet fed to it; locked only for in-memory work.
    state: parking_lot::Mutex<TlsState>,
    /// Held by whoever is writing ciphertext to the socket, from taking it out of the session
    /// until it is all written, so the records of two writers never interleave on the wire.
    /// Taken before `state`, never the other way round.
    sending: parking_lot::Mutex<()>,
}

#[cfg(feature = "tls")]
struct TlsState {
    session: rustls::ClientConnection,
    /// Ciphertext read from the socket that rustls has not taken yet (`received[fed..]`).
    received: Vec<u8>,
    fed: usize,
}

/// Bytes asked of the socket per read on a TLS link: one full TLS record and its overhead.
#[cfg(feature = "tls")]
const CIPHER_READ: usize = 16 * 1024 + 512;

impl Transport {
    /// Plain TCP.
    pub fn plain(tcp: TcpStream) -> Transport {
        Transport {
            tcp,
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "tls")]
            scratch: Vec::new(),
        }
    }

    /// Runs the TLS handshake on `tcp` (bounded by its read and write timeouts) and wraps it.
    /// The failure names the cause (an unknown issuer, a refused client certificate, or a
    /// peer that does not speak TLS) and keeps the error beneath it (rustls's, inside the
    /// `io::Error`, for a certificate that does not verify); a handshake that gets no answer
    /// in time is a member that did not answer, as over TCP (`hosts::read_failure`).
    #[cfg(feature = "tls")]
    pub fn tls(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        host: &str,
    ) -> Result<Transport, ConnectFailure> {
        let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
            ConnectFailure::explained(
                Reach::Failed,
                format!("TLS: {host:?} is not a valid server name: {e}"),
                io::Error::new(io::ErrorKind::InvalidInput, e),
            )
        })?;
        let mut session = rustls::ClientConnection::new(config, name).map_err(|e| {
            ConnectFailure::explained(
                Reach::Failed,
                format!("TLS: cannot start a session: {e}"),
                io::Error::other(e),
            )
        })?;
        let mut socket = &tcp;
        while session.is_handshaking() {
            session.complete_io(&mut socket).map_err(|e| {
                hosts::read_failure("TLS handshake", e, Reach::Failed, |e| {
                    format!(
                        "TLS handshake: the server closed the connection ({e}); is this a TLS \
                         port, and does it want a client certificate?"
                    )
                })
            })?;
        }
        Ok(Transport {
            tcp,
            tls: Some(Arc::new(Tls {
                state: parking_lot::Mutex::new(TlsState {
                    session,
                    received: Vec::new(),
                    fed: 0,
                }),
                sending: parking_lot::Mutex::new(()),
            })),
            scratch: Vec::new(),
        })
    }

    /// Another handle on the same stream.
    pub fn try_clone(&self) -> io::Result<Transport> {
        Ok(Transport {
            tcp: self.tcp.try_clone()?,
            #[cfg(feature = "tls")]
            tls: self.tls.clone(),
            #[cfg(feature = "tls")]
            scratch: Vec::new(),
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
            return tls.read(&self.tcp, buf, &mut self.scratch);
        }
        (&self.tcp).read(buf)
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            tls.write_all(&self.tcp, buf)?;
            return Ok(buf.len());
        }
        (&self.tcp).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(feature = "tls")]
impl Tls {
    /// Encrypts all of `buf` and writes it to the socket: as much plaintext as rustls takes
    /// (its 64 KiB buffer), that ciphertext to the socket (outside the state lock), again
    /// until every byte is sent. An error leaves the stream unusable (a frame sent in part).
    fn write_all(&self, tcp: &TcpStream, buf: &[u8]) -> io::Result<()> {
        let _sending = self.sending.lock();
        let mut rest = buf;
        let mut cipher = Vec::new();
        loop {
            {
                let mut state = self.state.lock();
                let taken = state.session.writer().write(rest)?;
                rest = &rest[taken..];
                while state.session.wants_write() {
                    state.session.write_tls(&mut cipher)?;
                }
            }
            if cipher.is_empty() {
                if rest.is_empty() {
                    return Ok(());
                }
                // rustls took nothing with its buffer empty: the session is closing.
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the TLS session takes no more data",
                ));
            }
            let mut socket = tcp;
            socket.write_all(&cipher)?;
            cipher.clear();
            if rest.is_empty() {
                return Ok(());
            }
        }
    }

    /// Plaintext if the session has some; else feeds it ciphertext already read (one call,
    /// whatever rustls takes: it refuses more while plaintext waits); else one blocking socket
    /// read without the lock, queued; and again.
    fn read(&self, tcp: &TcpStream, buf: &mut [u8], scratch: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            let answer = {
                let mut guard = self.state.lock();
                let state = &mut *guard;
                match state.session.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if state.fed < state.received.len() {
                    let taken = state.session.read_tls(&mut &state.received[state.fed..])?;
                    if taken == 0 {
                        // The peer closed the session (close_notify) with ciphertext after it.
                        return Ok(0);
                    }
                    state.fed += taken;
                    if state.fed == state.received.len() {
                        state.received.clear();
                        state.fed = 0;
                    }
                    state
                        .session
                        .process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    state.session.wants_write()
                } else {
                    drop(guard);
                    scratch.resize(CIPHER_READ, 0);
                    let n = (&*tcp).read(scratch)?;
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    self.state.lock().received.extend_from_slice(&scratch[..n]);
                    false
                }
            };
            if answer {
                self.send_pending(tcp)?;
            }
        }
    }

    /// Writes what the session itself wants sent after reading (a key update's answer, an
    /// alert), unless a writer is sending: that writer, or the next one (a ping comes every
    /// third of the session timeout), takes it out with its own records.
    fn send_pending(&self, tcp: &TcpStream) -> io::Result<()> {
        let Some(_sending) = self.sending.try_lock() else {
            return Ok(());
        };
        let mut cipher = Vec::new();
        {
            let mut state = self.state.lock();
            while state.session.wants_write() {
                state.session.write_tls(&mut cipher)?;
            }
        }
        let mut socket = tcp;
        socket.write_all(&cipher)
    }
}
