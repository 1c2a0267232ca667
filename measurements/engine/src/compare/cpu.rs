//! CPU time of the processes in a comparison, from `/proc` (Linux): the server's (found by
//! its listening port) and each side's client process. Where the server is not on this
//! machine, or `/proc` says nothing, the figures are left out (`None`).

use std::net::SocketAddr;

/// The id of the local process listening on `addr`'s port, if any (the ZooKeeper server when
/// it runs on this machine under a user whose `/proc` entries we can read).
pub(crate) fn listening_pid(addr: SocketAddr) -> Option<u32> {
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .find_map(|table| listening_inode(&table, addr.port()))?;
    let socket = format!("socket:[{inode}]");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let fds = std::fs::read_dir(entry.path().join("fd")).ok()?;
            fds.flatten()
                .any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == socket.as_str())
                })
                .then_some(pid)
        })
}

/// The inode of the socket listening on `port` in one `/proc/net/tcp*` table.
fn listening_inode(table: &str, port: u16) -> Option<u64> {
    const LISTEN: &str = "0A";
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let local_port = fields.get(1)?.rsplit(':').next()?;
        (u16::from_str_radix(local_port, 16).ok()? == port && *fields.get(3)? == LISTEN)
            .then(|| fields.get(9)?.parse().ok())?
    })
}

/// User plus system CPU time of process `pid` (all its threads) so far, in nanoseconds.
pub(crate) fn process_cpu_ns(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis,
    // where `state` is the first; utime and stime are fields 14 and 15 of the whole line.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|&t| t > 0)?;
    Some((utime + stime) * 1_000_000_000 / ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_is_found_by_its_port_and_state() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:0885 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0\n\
   1: 0100007F:0885 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0 20 4 30 10 -1\n";
        assert_eq!(listening_inode(table, 0x0885), Some(4242));
        assert_eq!(listening_inode(table, 2182), None);
    }

    #[test]
    fn this_process_has_spent_some_cpu_time() {
        let spin = (0..2_000_000u64).fold(0u64, |a, b| a.wrapping_add(b * b));
        assert_ne!(spin, 1);
        assert!(process_cpu_ns(std::process::id()).is_some_and(|ns| ns > 0));
    }

    #[test]
    fn our_own_listener_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(listening_pid(addr), Some(std::process::id()));
    }
}
