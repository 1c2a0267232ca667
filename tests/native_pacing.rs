//! Reconnect pacing in an outage, against scripted members on loopback, over plain TCP and
//! (feature `tls`, the `over_tls::*` cases) over TLS: a member that does not answer at all
//! (refused connection, or frozen: it takes the connection and then says nothing, as a
//! SIGSTOPped member or one in a long GC pause) is passed over while others remain, with no
//! pause after it, and a member that closes without a ConnectResponse (not serving: electing)
//! is tried again after a pause whose ceiling is 300 ms the first time in an outage (an
//! election lasts at least 200 ms) and 200 ms after that. Asserted on the order and count of
//! attempts and on the pause ceilings the client noted in its link journal, never on elapsed
//! time.

#[cfg(feature = "tls")]
#[path = "support/tls_member.rs"]
mod tls_member;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zk_locks::client::native::jute::Writer;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::ZkClient;

/// What carries the members' bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Plain,
    #[cfg(feature = "tls")]
    Tls,
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

impl Wire {
    /// The member's end of an accepted connection.
    fn serve(self, tcp: TcpStream) -> Box<dyn Stream> {
        match self {
            Wire::Plain => Box::new(tcp),
            #[cfg(feature = "tls")]
            Wire::Tls => Box::new(tls_member::accept(tcp)),
        }
    }

    fn options(self, hosts: &str) -> NativeOptions {
        let options = NativeOptions::new(hosts);
        match self {
            Wire::Plain => options,
            #[cfg(feature = "tls")]
            Wire::Tls => options.tls(tls_member::client_options()),
        }
    }
}

fn read_frame(stream: &mut dyn Stream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(len)).ok()?];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

/// A member that closes its first `not_serving` connections after reading the
/// ConnectRequest, without answering (as a member that is electing), then accepts a session
/// and answers every request with an empty reply. Returns its address and its connection
/// count.
fn member(wire: Wire, not_serving: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { return };
            let n = seen.fetch_add(1, Ordering::SeqCst);
            // Each connection on its own thread: a TLS handshake must not hold up the next.
            thread::spawn(move || {
                let mut stream = wire.serve(tcp);
                if read_frame(&mut *stream).is_none() || n < not_serving {
                    return;
                }
                let mut w = Writer::new();
                w.i32(0).i32(10_000).i64(0x42).buffer(&[7; 16]).bool(false);
                if stream.write_all(&w.finish()).is_err() {
                    return;
                }
                while let Some(request) = read_frame(&mut *stream) {
                    let mut w = Writer::new();
                    w.i32(i32::from_be_bytes(request[..4].try_into().unwrap()))
                        .i64(1)
                        .i32(0);
                    if stream.write_all(&w.finish()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, count)
}

/// A member that does not answer: its connections are refused, or (`frozen`) taken by the
/// kernel into a backlog nobody accepts from, so nothing ever comes back (TCP connects, the
/// ConnectRequest or the ClientHello goes unanswered). The listener lives as long as the
/// returned guard.
fn silent(frozen: bool) -> (String, Option<TcpListener>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    (addr, frozen.then_some(listener))
}

/// A client of `hosts`; a member that does not answer costs a third of `session`'s timeout
/// per attempt (three hosts: the connect timeout is shared among them).
fn connect(wire: Wire, hosts: &[&str], session: Duration) -> Arc<NativeClient> {
    NativeClient::connect_with(
        wire.options(&hosts.join(","))
            .session_timeout(session)
            .connect_timeout(Duration::from_secs(60)),
    )
    .unwrap()
}

/// One journaled event of the outage.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// An attempt on a host (failed or answered).
    Tried(String),
    /// A pause, with its ceiling in ms.
    Paused(u64),
}

fn journal(client: &NativeClient, hosts: &[&str]) -> Vec<Event> {
    client
        .link_journal()
        .into_iter()
        .filter_map(|(_, event)| {
            if let Some(host) = hosts.iter().find(|h| event.starts_with(&format!("{h}: "))) {
                Some(Event::Tried(host.to_string()))
            } else {
                event
                    .strip_prefix("pause up to ")
                    .and_then(|rest| rest.strip_suffix(" ms"))
                    .map(|ms| Event::Paused(ms.parse().unwrap()))
            }
        })
        .collect()
}

/// The attempts in order, and the pause ceilings in ms.
fn attempts(client: &NativeClient, hosts: &[&str]) -> (Vec<String>, Vec<u64>) {
    let mut tried = Vec::new();
    let mut pauses = Vec::new();
    for event in journal(client, hosts) {
        match event {
            Event::Tried(host) => tried.push(host),
            Event::Paused(ms) => pauses.push(ms),
        }
    }
    (tried, pauses)
}

/// Between two attempts on a member that did not answer (refused, or frozen), each other
/// member was tried at least twice: it is passed over for one pass; and no pause follows an
/// attempt on it (the next member is tried at once).
fn a_silent_member_is_passed_over_for_a_pass(wire: Wire, frozen: bool) {
    let (dead, _listener) = silent(frozen);
    let (a, a_count) = member(wire, 3);
    let (b, b_count) = member(wire, 3);
    let hosts = [dead.as_str(), a.as_str(), b.as_str()];
    // A frozen member costs its whole share of the connect timeout: 4 s / 3 hosts.
    let client = connect(wire, &hosts, Duration::from_secs(4));
    let events = journal(&client, &hosts);
    let (tried, pauses) = attempts(&client, &hosts);
    let dead_at: Vec<usize> = tried
        .iter()
        .enumerate()
        .filter(|(_, h)| **h == dead)
        .map(|(i, _)| i)
        .collect();
    assert!(!dead_at.is_empty(), "{tried:?}");
    for pair in dead_at.windows(2) {
        let between = &tried[pair[0] + 1..pair[1]];
        for other in [&a, &b] {
            assert!(
                between.iter().filter(|h| *h == other).count() >= 2,
                "{dead} tried again before {other} was tried twice: {tried:?}"
            );
        }
    }
    for pair in events.windows(2) {
        assert!(
            !(pair[0] == Event::Tried(dead.clone()) && matches!(pair[1], Event::Paused(_))),
            "a pause after the member that did not answer: {events:?}"
        );
    }
    // The live members were each tried until one accepted, a pause after each refusal.
    let live = a_count.load(Ordering::SeqCst) + b_count.load(Ordering::SeqCst);
    assert_eq!(
        tried.len(),
        live + dead_at.len(),
        "every attempt journaled: {tried:?}"
    );
    assert_eq!(pauses.len(), live - 1, "{events:?}");
    client.close();
}

/// A member that is not serving is tried again after a pause under 300 ms, then under
/// 200 ms each time (a steady pace through an election); a refused member costs no pause
/// while the other one remains.
fn a_member_not_serving_is_retried_after_a_first_pause_then_a_steady_one(wire: Wire) {
    let (dead, _) = silent(false);
    let (electing, count) = member(wire, 3);
    let hosts = [dead.as_str(), electing.as_str()];
    let client = connect(wire, &hosts, Duration::from_secs(10));
    assert!(client.session().snapshot().state.is_connected());
    let (tried, pauses) = attempts(&client, &hosts);
    assert_eq!(count.load(Ordering::SeqCst), 4, "{tried:?}");
    assert_eq!(
        tried.iter().filter(|h| **h == electing).count(),
        4,
        "{tried:?}"
    );
    assert!(
        tried.iter().filter(|h| **h == dead).count() <= 2,
        "the refused member passed over every other pass: {tried:?}"
    );
    // One pause after each refusal to serve, none after the refused connection.
    assert_eq!(
        pauses,
        [300, 200, 200],
        "pause ceilings (ms); attempts {tried:?}"
    );
    assert_eq!(client.connect_attempts(), tried.len() as u64);
    client.close();
}

#[test]
fn a_refused_member_is_passed_over_for_a_pass() {
    a_silent_member_is_passed_over_for_a_pass(Wire::Plain, false);
}

#[test]
fn a_frozen_member_is_passed_over_for_a_pass() {
    a_silent_member_is_passed_over_for_a_pass(Wire::Plain, true);
}

#[test]
fn a_member_not_serving_is_retried_after_a_pause() {
    a_member_not_serving_is_retried_after_a_first_pause_then_a_steady_one(Wire::Plain);
}

/// The same cases over TLS: a frozen member times out inside the TLS handshake, and that is
/// "no answer" as it is over TCP (it was once filed as any other failure: paused after, and
/// tried again on the next pass).
#[cfg(feature = "tls")]
mod over_tls {
    use super::*;

    #[test]
    fn a_refused_member_is_passed_over_for_a_pass() {
        a_silent_member_is_passed_over_for_a_pass(Wire::Tls, false);
    }

    #[test]
    fn a_frozen_member_is_passed_over_for_a_pass() {
        a_silent_member_is_passed_over_for_a_pass(Wire::Tls, true);
    }

    #[test]
    fn a_member_not_serving_is_retried_after_a_pause() {
        a_member_not_serving_is_retried_after_a_first_pause_then_a_steady_one(Wire::Tls);
    }
}
