//! Reaching a crate handle's TCP socket, to end a handle whose link went silent.
//!
//! The crate keeps its socket to itself and has no read timeout: a handle on a link that lost
//! every packet (its socket still open) keeps its IO and event threads, and every call stuck in
//! it, until TCP gives up (about 15 minutes with Linux defaults; never, if something on the
//! path still acknowledges). Shutting the socket down makes the crate see a closed connection,
//! so it reconnects or gives up, and everything stuck in it returns.
//!
//! How the socket is found (Linux; elsewhere [`CrateSocket::shutdown`] does nothing): the
//! crate creates one epoll instance per handle, on the thread that calls its `connect`, and
//! registers its current socket there with mio's token 1 (re-registering every new socket of
//! a reconnect). [`open`] takes the handle's one new epoll descriptor (all openings of this
//! module are serialised, and any ambiguity gives up) and keeps a duplicate of it; the
//! kernel's `/proc/self/fdinfo` of that epoll names the registered descriptor and its inode.
//! The socket is then duplicated and its inode compared before `shutdown(2)`, so a
//! descriptor number reused in between is never touched.

/// mio 0.6's token for the crate's socket (`Token(1)` in the crate's IO loop).
#[cfg(target_os = "linux")]
const CRATE_SOCKET_TOKEN: u64 = 1;

/// A handle's way to its socket; empty when it could not be found.
pub(super) struct CrateSocket {
    #[cfg(target_os = "linux")]
    epoll: Option<std::os::fd::OwnedFd>,
}

/// Runs `connect` (which must open exactly one crate handle) and finds that handle's epoll.
pub(super) fn open<T>(connect: impl FnOnce() -> T) -> (T, CrateSocket) {
    #[cfg(target_os = "linux")]
    {
        static OPENING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
        let _serialised = OPENING.lock();
        let before = linux::open_fds();
        let handle = connect();
        let epoll = before.and_then(|before| linux::new_epoll(&before));
        if epoll.is_none() {
            log::debug!("zk-locks: the crate's socket was not found; it cannot be shut down");
        }
        (handle, CrateSocket { epoll })
    }
    #[cfg(not(target_os = "linux"))]
    {
        (connect(), CrateSocket {})
    }
}

impl CrateSocket {
    /// Shuts the handle's current socket down in both directions; returns whether one was.
    pub(super) fn shutdown(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            self.epoll
                .as_ref()
                .is_some_and(|epoll| linux::shutdown_registered(epoll.as_raw_fd()))
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashSet;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    use super::CRATE_SOCKET_TOKEN;

    /// The descriptors open now, or `None` when `/proc` cannot be read.
    pub(super) fn open_fds() -> Option<HashSet<RawFd>> {
        let dir = std::fs::read_dir("/proc/self/fd").ok()?;
        Some(
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect(),
        )
    }

    fn is_epoll(fd: RawFd) -> bool {
        std::fs::read_link(format!("/proc/self/fd/{fd}"))
            .is_ok_and(|target| target.as_os_str() == "anon_inode:[eventpoll]")
    }

    fn dup(fd: RawFd) -> Option<OwnedFd> {
        // SAFETY: F_DUPFD_CLOEXEC on any descriptor number is memory-safe; a failure is -1.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        // SAFETY: `new` is a fresh descriptor owned by nobody else.
        (new >= 0).then(|| unsafe { OwnedFd::from_raw_fd(new) })
    }

    /// The one epoll descriptor opened since `before`, duplicated; `None` unless exactly one.
    pub(super) fn new_epoll(before: &HashSet<RawFd>) -> Option<OwnedFd> {
        let now = open_fds()?;
        let mut created = now.difference(before).copied().filter(|fd| is_epoll(*fd));
        let epoll = created.next()?;
        if created.next().is_some() {
            return None;
        }
        let mine = dup(epoll)?;
        is_epoll(mine.as_raw_fd()).then_some(mine)
    }

    /// One `tfd:` line of an epoll's fdinfo: descriptor, data (hex), inode (hex).
    pub(super) fn parse_tfd(line: &str) -> Option<(RawFd, u64, u64)> {
        let mut words = line.split_whitespace();
        if words.next()? != "tfd:" {
            return None;
        }
        let fd = words.next()?.parse().ok()?;
        let mut data = None;
        let mut inode = None;
        while let Some(word) = words.next() {
            if word == "data:" {
                data = u64::from_str_radix(words.next()?, 16).ok();
            } else if let Some(hex) = word.strip_prefix("ino:") {
                inode = u64::from_str_radix(hex, 16).ok();
            }
        }
        Some((fd, data?, inode?))
    }

    pub(super) fn shutdown_registered(epoll: RawFd) -> bool {
        let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{epoll}")) else {
            return false;
        };
        let mut done = false;
        for (fd, data, inode) in info.lines().filter_map(parse_tfd) {
            if data != CRATE_SOCKET_TOKEN {
                continue;
            }
            let Some(socket) = dup(fd) else { continue };
            // SAFETY: a zeroed `stat` is a valid out-parameter for fstat.
            let mut stat: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: `socket` is an open descriptor we own; `stat` is writable.
            if unsafe { libc::fstat(socket.as_raw_fd(), &mut stat) } != 0 {
                continue;
            }
            if stat.st_mode & libc::S_IFMT != libc::S_IFSOCK || stat.st_ino != inode {
                continue; // the number was reused since the kernel listed it
            }
            // SAFETY: shutdown on a socket we hold a duplicate of.
            done |= unsafe { libc::shutdown(socket.as_raw_fd(), libc::SHUT_RDWR) } == 0;
        }
        done
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::linux::parse_tfd;

    #[test]
    fn parses_epoll_fdinfo_lines() {
        assert_eq!(
            parse_tfd(
                "tfd:        4 events:       19 data:                1  pos:0 ino:f3ba13 sdev:9"
            ),
            Some((4, 1, 0xf3ba13))
        );
        assert_eq!(parse_tfd("pos:\t0"), None);
        assert_eq!(parse_tfd("tfd: x events: 1 data: 1 ino:1"), None);
        assert_eq!(parse_tfd("tfd: 4 events: 19 data: 1 pos:0"), None);
        assert_eq!(parse_tfd("tfd: 4 data:"), None);
    }
}
