//! Reaching a crate handle's TCP socket, to end a handle whose link went silent.
//!
//! The crate keeps its socket to itself and has no read timeout: a handle on a link that lost
//! every packet (its socket still open) keeps its IO and event threads, and every call stuck in
//! it, until TCP gives up (about 15 minutes with Linux defaults; never, if something on the
//! path still acknowledges). Shutting the socket down makes the crate see a closed connection,
//! so it reconnects or gives up, and everything stuck in it returns.
//!
//! How the socket is found (Linux; elsewhere [`CrateSocket::shutdown`] does nothing): the
//! crate creates one epoll instance per handle, on the thread that calls its `connect`, with
//! mio's wake-up pipe registered in it, and registers its current socket there with mio's
//! token 1 (re-registering every new socket of a reconnect). [`open`] finds the one epoll
//! whose wake-up pipe did not exist before the crate's `connect` (all openings of this module
//! are serialised, and any ambiguity gives up; descriptor numbers are not trusted, as other
//! threads close and reuse them meanwhile) and keeps a duplicate of it. The kernel's
//! `/proc/self/fdinfo` of that epoll names the registered socket's descriptor and inode; the
//! socket is duplicated and its inode compared before `shutdown(2)`, so a descriptor number
//! reused in between is never touched.

/// mio 0.6's token for the crate's socket (`Token(1)` in the crate's IO loop).
#[cfg(target_os = "linux")]
const CRATE_SOCKET_TOKEN: u64 = 1;

/// mio 0.6's token for the wake-up pipe of every `Poll` (`Token(usize::MAX)`).
#[cfg(target_os = "linux")]
const MIO_AWAKENER_TOKEN: u64 = usize::MAX as u64;

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
        let before = linux::open_pipes();
        let handle = connect();
        let epoll = before.and_then(|before| linux::new_epoll(&before));
        if epoll.is_none() {
            log::debug!("the crate's socket was not found; it cannot be shut down");
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

    use super::{CRATE_SOCKET_TOKEN, MIO_AWAKENER_TOKEN};

    fn link(fd: &str) -> Option<String> {
        let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
        target.into_os_string().into_string().ok()
    }

    fn fd_names() -> Option<Vec<String>> {
        let dir = std::fs::read_dir("/proc/self/fd").ok()?;
        Some(
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect(),
        )
    }

    /// The inodes of the pipes open now, or `None` when `/proc` cannot be read.
    pub(super) fn open_pipes() -> Option<HashSet<u64>> {
        Some(
            fd_names()?
                .iter()
                .filter_map(|fd| {
                    let target = link(fd)?;
                    target
                        .strip_prefix("pipe:[")?
                        .strip_suffix(']')?
                        .parse()
                        .ok()
                })
                .collect(),
        )
    }

    fn is_epoll(fd: &str) -> bool {
        link(fd).is_some_and(|target| target == "anon_inode:[eventpoll]")
    }

    /// The registrations of an epoll descriptor: (descriptor, data, inode) each.
    fn registrations(epoll: &str) -> Vec<(RawFd, u64, u64)> {
        std::fs::read_to_string(format!("/proc/self/fdinfo/{epoll}"))
            .map(|info| info.lines().filter_map(parse_tfd).collect())
            .unwrap_or_default()
    }

    /// The inode of the mio wake-up pipe registered in an epoll, if any.
    fn awakener(epoll: &str) -> Option<u64> {
        registrations(epoll)
            .into_iter()
            .find(|(_, data, _)| *data == MIO_AWAKENER_TOKEN)
            .map(|(_, _, inode)| inode)
    }

    fn dup(fd: RawFd) -> Option<OwnedFd> {
        // SAFETY: F_DUPFD_CLOEXEC on any descriptor number is memory-safe; a failure is -1.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        // SAFETY: `new` is a fresh descriptor owned by nobody else.
        (new >= 0).then(|| unsafe { OwnedFd::from_raw_fd(new) })
    }

    /// The one epoll whose mio wake-up pipe is not among `pipes_before`, duplicated; `None`
    /// unless exactly one.
    pub(super) fn new_epoll(pipes_before: &HashSet<u64>) -> Option<OwnedFd> {
        let mut created = fd_names()?.into_iter().filter_map(|fd| {
            if !is_epoll(&fd) {
                return None;
            }
            let pipe = awakener(&fd)?;
            (!pipes_before.contains(&pipe)).then_some((fd, pipe))
        });
        let (epoll, pipe) = created.next()?;
        if created.next().is_some() {
            return None;
        }
        let mine = dup(epoll.parse().ok()?)?;
        // The number may have been reused in between: the duplicate must be that epoll.
        let mine_name = mine.as_raw_fd().to_string();
        (is_epoll(&mine_name) && awakener(&mine_name) == Some(pipe)).then_some(mine)
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
        let mut done = false;
        for (fd, data, inode) in registrations(&epoll.to_string()) {
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
