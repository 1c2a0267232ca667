//! The server's admin side, as tests read it: four-letter words, and the first server a
//! connect string names.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::client::connect_string;
use crate::error::Result;
use crate::testing::process::io_err;

/// Sends a four-letter word (`ruok`, `srvr`, `wchp`, `wchs`, `mntr`, ...) to the server at
/// `addr` and returns its whole reply. Connecting is bounded by 2 s, the reply by 5 s.
pub fn four_letter(addr: SocketAddr, cmd: &str) -> Result<String> {
    let context = || format!("four-letter command {cmd:?} to {addr}");
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(io_err(context()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io_err(context()))?;
    stream
        .write_all(cmd.as_bytes())
        .map_err(io_err(context()))?;
    let mut reply = String::new();
    stream
        .read_to_string(&mut reply)
        .map_err(io_err(context()))?;
    Ok(reply)
}

/// The address of the first server of `connect_string` (`host[:port],...[/chroot]`, read
/// as every client reads it) and its chroot (`""` when none), for a proxy or a four-letter
/// word aimed at that server.
pub fn first_server(connect_string: &str) -> Result<(SocketAddr, String)> {
    let (hosts, chroot) = connect_string::parse(connect_string)?;
    // `parse` refuses an empty host list, so there is a first host.
    let first = hosts.first().map(String::as_str).unwrap_or_default();
    let addr = connect_string::resolve(connect_string, first)?;
    Ok((addr, chroot.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_server_and_the_chroot_of_a_connect_string() {
        let (addr, chroot) = first_server("127.0.0.1:2182,127.0.0.1:2183/app/locks").unwrap();
        assert_eq!(addr, SocketAddr::from(([127, 0, 0, 1], 2182)));
        assert_eq!(chroot, "/app/locks");
        let (addr, chroot) = first_server("127.0.0.1").unwrap();
        assert_eq!(addr.port(), 2181);
        assert_eq!(chroot, "");
        assert!(first_server("").is_err());
    }
}
