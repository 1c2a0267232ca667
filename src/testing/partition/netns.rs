//! [`Network`]: a bridge in the root namespace (`10.a.b.1/24`) and, per member, a network
//! namespace joined to it by a veth pair, with the member's own address `10.a.b.(i+2)`.
//!
//! Names share one scheme, `zkl<pid in hex>-<n in hex>` (the bridge `…br`, the root end of
//! member i's veth `…v<i>`, its namespace `…m<i>`), short enough for the 15 bytes of an
//! interface name. Whatever carries the pid of a process that no longer exists is a leftover
//! of a run that could not clean up (killed): it is removed before a network is made.
//!
//! A cut is made with neighbour entries, the one fault `ip` alone can place silently: inside
//! the cut member's namespace every peer's address resolves to [`NOWHERE_MAC`], and inside each
//! peer's namespace the member's address does too. Frames to that address are flooded by the
//! bridge and dropped by every port (addressed to no one), so both directions lose every packet
//! and nobody hears a reset, an ICMP error or a local send error: connections time out, as on
//! a real partition. The root namespace's entries are untouched, so clients still reach every
//! member.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::testing::process::process_alive;

/// The first bytes of every name this module gives a namespace or an interface.
const PREFIX: &str = "zkl";
/// A member's end of its veth pair, inside its namespace.
const MEMBER_LINK: &str = "eth0";
/// Where a cut member's peers "are": a locally administered unicast address that no interface
/// has, so frames sent to it reach nobody.
const NOWHERE_MAC: &str = "02:7a:6b:00:00:00";
/// Linux's longest interface name (`IFNAMSIZ` - 1).
const MAX_LINK_NAME: usize = 15;

/// Runs `ip args…`; its stdout, or an error naming the command and its stderr.
fn ip(args: &[&str]) -> Result<String> {
    let command = format!("ip {}", args.join(" "));
    let output = Command::new(super::ip_command())
        .args(args)
        .output()
        .map_err(|source| Error::Io {
            context: format!("running `{command}`"),
            source,
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    Err(Error::Io {
        context: format!("`{command}` failed ({})", output.status),
        source: std::io::Error::other(stderr),
    })
}

/// The pid a name of this scheme carries, if it is one.
fn owner_pid(name: &str) -> Option<i32> {
    let hex = name.strip_prefix(PREFIX)?.split('-').next()?;
    i32::from_str_radix(hex, 16).ok()
}

/// Removes the namespaces and links of this scheme whose process is gone.
fn remove_leftovers() {
    let stale = |name: &str| owner_pid(name).is_some_and(|pid| !process_alive(pid));
    if let Ok(list) = ip(&["netns", "list"]) {
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if stale(name) {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
    if let Ok(list) = ip(&["-o", "link", "show"]) {
        // "12: zkl1f2e-0v0@if2: <…>": the name is the second field, up to '@' or ':'.
        for line in list.lines() {
            let Some(field) = line.split_whitespace().nth(1) else {
                continue;
            };
            let name = field.trim_end_matches(':').split('@').next().unwrap_or("");
            if stale(name) {
                let _ = ip(&["link", "del", name]);
            }
        }
    }
}

/// True when the root namespace already has an address or route inside `10.a.b.0/24`.
fn subnet_in_use(subnet: [u8; 2]) -> Result<bool> {
    let listing = ip(&["-o", "-4", "route", "show", "table", "all"])?;
    Ok(listing
        .split_whitespace()
        .filter_map(|token| token.split('/').next()?.parse::<Ipv4Addr>().ok())
        .any(|addr| addr.octets()[..3] == [10, subnet[0], subnet[1]]))
}

/// The `/24` of a process's network number `n` (< 256): spread by pid so that parallel test
/// processes differ (two collide only when their pids are equal modulo 200), `10.20.0.0` to
/// `10.219.255.0`, and checked free before use.
fn subnet_for(pid: u32, n: u32) -> [u8; 2] {
    let v = (pid % 200) * 256 + n % 256;
    [20 + (v / 256) as u8, (v % 256) as u8]
}

/// Checks that namespaces work here by making and removing a one-member network.
pub(super) fn probe() -> std::result::Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root (network namespaces need CAP_NET_ADMIN)".into());
    }
    Network::create(1)
        .map(drop)
        .map_err(|e| match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        })
}

/// A bridge and one namespace per member (see the module docs); removed on drop.
pub(crate) struct Network {
    tag: String,
    subnet: [u8; 2],
    /// Which members are cut off: the link between two members is down when either is.
    cut: Mutex<Vec<bool>>,
}

impl Network {
    /// Makes the network for `members` members (after removing dead runs' leftovers). On an
    /// error, whatever was made is removed.
    pub fn create(members: usize) -> Result<Network> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        if members == 0 || members > 200 {
            return Err(Error::InvalidArgument {
                name: "members",
                reason: format!("{members} members: a partitionable cluster has 1 to 200"),
            });
        }
        remove_leftovers();
        let pid = std::process::id();
        // n wraps at 256 (two hex digits of a name): a process never has 256 networks at once.
        let free = (0..64)
            .map(|_| COUNTER.fetch_add(1, Ordering::Relaxed) % 256)
            .map(|n| (n, subnet_for(pid, n)))
            .find_map(|(n, subnet)| match subnet_in_use(subnet) {
                Ok(false) => Some(Ok((n, subnet))),
                Ok(true) => None,
                Err(e) => Some(Err(e)),
            });
        let (n, subnet) = free.unwrap_or_else(|| {
            Err(Error::InvalidArgument {
                name: "members",
                reason: "no free 10.x.y.0/24 subnet for a new network".into(),
            })
        })?;
        let tag = format!("{PREFIX}{pid:x}-{n:x}");
        let network = Network {
            tag,
            subnet,
            cut: Mutex::new(vec![false; members]),
        };
        if network.root_link(members - 1).len() > MAX_LINK_NAME {
            return Err(Error::InvalidArgument {
                name: "members",
                reason: format!(
                    "interface name {:?} too long",
                    network.root_link(members - 1)
                ),
            });
        }
        network.build()?;
        Ok(network)
    }

    fn build(&self) -> Result<()> {
        let bridge = self.bridge();
        let gateway = format!("{}/24", self.bridge_addr());
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &gateway, "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..self.members() {
            let (ns, link) = (self.namespace(i), self.root_link(i));
            let addr = format!("{}/24", self.member_addr(i));
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link",
                "add",
                &link,
                "type",
                "veth",
                "peer",
                "name",
                MEMBER_LINK,
                "netns",
                &ns,
            ])?;
            ip(&["link", "set", &link, "master", &bridge, "up"])?;
            ip(&["-n", &ns, "addr", "add", &addr, "dev", MEMBER_LINK])?;
            ip(&["-n", &ns, "link", "set", MEMBER_LINK, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    fn members(&self) -> usize {
        self.cut.lock().len()
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    fn root_link(&self, i: usize) -> String {
        format!("{}v{i}", self.tag)
    }

    /// The namespace member `i` runs in.
    pub fn namespace(&self, i: usize) -> String {
        format!("{}m{i}", self.tag)
    }

    /// The bridge's address in the root namespace: where the test's clients come from.
    pub fn bridge_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet[0], self.subnet[1], 1)
    }

    /// Member `i`'s address (inside its namespace).
    pub fn member_addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet[0], self.subnet[1], i as u8 + 2)
    }

    /// Cuts member `i` off from every other member (`true`) or heals its links (`false`);
    /// a link stays down while the member at its other end is cut off itself.
    pub fn set_cut(&self, i: usize, cut: bool) -> Result<()> {
        let mut state = self.cut.lock();
        let before = state.clone();
        state[i] = cut;
        for a in 0..state.len() {
            for b in (0..state.len()).filter(|&b| b != a) {
                let (was, is) = (before[a] || before[b], state[a] || state[b]);
                if was != is {
                    self.set_link_down(a, b, is)?;
                }
            }
        }
        Ok(())
    }

    /// Inside member `from`'s namespace, sends what goes to member `to` nowhere (`down`), or
    /// lets ARP find `to` again.
    fn set_link_down(&self, from: usize, to: usize, down: bool) -> Result<()> {
        let (ns, peer) = (self.namespace(from), self.member_addr(to).to_string());
        if down {
            ip(&[
                "-n",
                &ns,
                "neigh",
                "replace",
                &peer,
                "lladdr",
                NOWHERE_MAC,
                "nud",
                "permanent",
                "dev",
                MEMBER_LINK,
            ])?;
        } else {
            ip(&["-n", &ns, "neigh", "del", &peer, "dev", MEMBER_LINK])?;
        }
        Ok(())
    }
}

impl Drop for Network {
    /// Removes every namespace (their veth pairs go with them) and the bridge. Runs on unwind
    /// too, so a failing test leaves nothing behind; a killed one is cleaned by the next run.
    fn drop(&mut self) {
        for i in 0..self.members() {
            let _ = ip(&["netns", "del", &self.namespace(i)]);
            let _ = ip(&["link", "del", &self.root_link(i)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether these tests can make namespaces: skipped with a note where not, failed under
    /// `ZK_LOCKS_REQUIRE_SERVER=1`.
    fn namespaces_here() -> bool {
        match super::super::available() {
            Ok(()) => true,
            Err(reason) if crate::testing::server_required() => panic!("{reason}"),
            Err(reason) => {
                eprintln!("skipping: no network namespaces ({reason})");
                false
            }
        }
    }

    fn namespace_exists(name: &str) -> bool {
        let list = ip(&["netns", "list"]).unwrap();
        list.lines()
            .any(|l| l.split_whitespace().next() == Some(name))
    }

    #[test]
    fn a_panicking_test_leaves_no_network_behind() {
        if !namespaces_here() {
            return;
        }
        let names = std::sync::Mutex::new(Vec::new());
        let unwound = std::panic::catch_unwind(|| {
            let net = Network::create(2).unwrap();
            names
                .lock()
                .unwrap()
                .extend([net.namespace(0), net.namespace(1), net.bridge()]);
            net.set_cut(0, true).unwrap();
            panic!("a failing test");
        });
        assert!(unwound.is_err());
        let names = names.into_inner().unwrap();
        assert_eq!(names.len(), 3);
        assert!(!namespace_exists(&names[0]) && !namespace_exists(&names[1]));
        assert!(
            ip(&["link", "show", &names[2]]).is_err(),
            "{} remains",
            names[2]
        );
    }

    #[test]
    fn a_dead_runs_leftovers_are_removed() {
        if !namespaces_here() {
            return;
        }
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let (ns, bridge) = (format!("zkl{dead:x}-0m0"), format!("zkl{dead:x}-0br"));
        ip(&["netns", "add", &ns]).unwrap();
        ip(&["link", "add", &bridge, "type", "bridge"]).unwrap();
        remove_leftovers();
        assert!(!namespace_exists(&ns), "{ns} remains");
        assert!(ip(&["link", "show", &bridge]).is_err(), "{bridge} remains");
    }

    #[test]
    fn names_carry_their_pid() {
        assert_eq!(owner_pid("zkl1f2e-0br"), Some(0x1f2e));
        assert_eq!(owner_pid("zkl3fffff-ffm9"), Some(0x3fffff));
        assert_eq!(owner_pid("eth0"), None);
        assert_eq!(owner_pid("zklx-1"), None);
    }

    #[test]
    fn subnets_stay_in_10_20_to_10_219() {
        for pid in [1, 4_194_304, u32::MAX] {
            for n in [0, 1, 255] {
                let [a, _] = subnet_for(pid, n);
                assert!((20..220).contains(&a), "{pid} {n}: {a}");
            }
        }
        assert_ne!(subnet_for(100, 0), subnet_for(100, 1));
        assert_ne!(subnet_for(100, 0), subnet_for(101, 0));
    }

    /// The longest name the scheme makes (pid_max is 2^22; n < 256; 9 members) fits an
    /// interface name.
    #[test]
    fn names_fit_an_interface() {
        let longest = format!("{PREFIX}{:x}-{:x}v9", 4_194_304u32, 255);
        assert!(longest.len() <= MAX_LINK_NAME, "{longest}");
    }
}
