//! What a trial asks the members (four-letter words: `cons` for placement and a session's last
//! contact, `mntr` for the requests received), and what that asking costs: a member counts
//! every four-letter word in its `zk_packets_received` (ZooKeeper's `checkFourLetterWord`
//! counts a 4-byte packet), so the count of requests subtracts our own.

use std::net::SocketAddr;

use zk_locks::testing::harness::four_letter;

use crate::failover::mono_ns;

/// The members, and the four-letter words each answered us.
pub(super) struct Servers {
    members: Vec<SocketAddr>,
    asked: Vec<u64>,
}

/// Each member's `zk_packets_received` less the four-letter words it had answered us, at one
/// moment (`None` where `mntr` did not answer).
pub(super) type Reading = Vec<Option<u64>>;

impl Servers {
    pub(super) fn new(members: &[SocketAddr]) -> Servers {
        Servers {
            members: members.to_vec(),
            asked: vec![0; members.len()],
        }
    }

    pub(super) fn len(&self) -> usize {
        self.members.len()
    }

    fn ask(&mut self, m: usize, cmd: &str) -> Option<String> {
        let reply = four_letter(self.members[m], cmd).ok()?;
        self.asked[m] += 1;
        Some(reply)
    }

    /// The member listing `session` in its `cons`, and that listing's line.
    fn find(&mut self, session: i64) -> Option<(usize, String)> {
        let needle = format!("sid=0x{:x},", session as u64);
        (0..self.members.len()).find_map(|m| {
            let cons = self.ask(m, "cons")?;
            let line = cons.lines().find(|l| l.contains(&needle))?;
            Some((m, line.to_string()))
        })
    }

    /// The member `session` is connected to now.
    pub(super) fn member_of(&mut self, session: i64) -> Option<usize> {
        self.find(session).map(|(m, _)| m)
    }

    /// How long ago (ms) a member last answered `session`: its `cons` `lresp`, which ZooKeeper
    /// takes from its monotonic clock (`Time.currentElapsedTime`, `CLOCK_MONOTONIC` in ms, the
    /// clock of [`mono_ns`]). A session expires `T` after it was last heard from, not after
    /// a fault.
    pub(super) fn last_heard_ms(&mut self, session: i64) -> Option<f64> {
        let (_, line) = self.find(session)?;
        let lresp: u64 = line
            .split("lresp=")
            .nth(1)?
            .split([',', ')'])
            .next()?
            .parse()
            .ok()?;
        Some((mono_ns() / 1_000_000).saturating_sub(lresp) as f64)
    }

    /// Every member's request count now, ours left out.
    pub(super) fn read(&mut self) -> Reading {
        (0..self.members.len())
            .map(|m| {
                let mntr = self.ask(m, "mntr")?;
                let packets: u64 = mntr
                    .lines()
                    .find_map(|l| l.strip_prefix("zk_packets_received")?.trim().parse().ok())?;
                Some(packets.saturating_sub(self.asked[m]))
            })
            .collect()
    }
}

/// Requests received between two readings, over the members read both times.
pub(super) fn received(before: &Reading, after: &Reading) -> Option<u64> {
    let both: Vec<u64> = before
        .iter()
        .zip(after)
        .filter_map(|(b, a)| Some(a.as_ref()?.saturating_sub(*b.as_ref()?)))
        .collect();
    (!both.is_empty()).then(|| both.iter().sum())
}
