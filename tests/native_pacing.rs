//! Reconnect pacing in an outage, against scripted members on loopback: a member that does
//! not answer at all (refused connection) is passed over while others remain, and a member
//! that closes without a ConnectResponse (not serving: electing) is tried again after a
//! pause whose ceiling is 300 ms the first time in an outage (an election lasts at least
//! 200 ms) and 200 ms after that. Asserted on the order and count of attempts and on the pause
//! ceilings the client noted in its link journal, never on elapsed time.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zk_locks::client::native::jute::Writer;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::ZkClient;

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
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
fn member(not_serving: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let n = seen.fetch_add(1, Ordering::SeqCst);
            if read_frame(&mut stream).is_none() || n < not_serving {
                continue;
            }
            let mut w = Writer::new();
            w.i32(0).i32(10_000).i64(0x42).buffer(&[7; 16]).bool(false);
            if stream.write_all(&w.finish()).is_err() {
                continue;
            }
            thread::spawn(move || {
                while let Some(request) = read_frame(&mut stream) {
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

/// An address nothing listens on: connections to it are refused.
fn refusing() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn connect(hosts: &[&str]) -> Arc<NativeClient> {
    NativeClient::connect_with(
        NativeOptions::new(hosts.join(","))
            .session_timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(60)),
    )
    .unwrap()
}

/// The journal as a list of events: `Some(host)` for an attempt on `host` (failed or
/// answered), `None` for a pause; with each pause's ceiling in ms.
fn attempts(client: &NativeClient, hosts: &[&str]) -> (Vec<String>, Vec<u64>) {
    let mut tried = Vec::new();
    let mut pauses = Vec::new();
    for (_, event) in client.link_journal() {
        if let Some(host) = hosts.iter().find(|h| event.starts_with(&format!("{h}: "))) {
            tried.push(host.to_string());
        } else if let Some(ms) = event
            .strip_prefix("pause up to ")
            .and_then(|rest| rest.strip_suffix(" ms"))
        {
            pauses.push(ms.parse().unwrap());
        }
    }
    (tried, pauses)
}

/// Between two attempts on a member that refused the connection, each other member was
/// tried at least twice: it is passed over for one pass.
#[test]
fn a_refused_member_is_passed_over_for_a_pass() {
    let dead = refusing();
    let (a, a_count) = member(3);
    let (b, b_count) = member(3);
    let hosts = [dead.as_str(), a.as_str(), b.as_str()];
    let client = connect(&hosts);
    let (tried, _) = attempts(&client, &hosts);
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
    // The live members were each tried until one accepted.
    let live = a_count.load(Ordering::SeqCst) + b_count.load(Ordering::SeqCst);
    assert_eq!(
        tried.len(),
        live + dead_at.len(),
        "every attempt journaled: {tried:?}"
    );
    client.close();
}

/// A member that is not serving is tried again after a pause under 300 ms, then under
/// 200 ms each time (a steady pace through an election); a refused member costs no pause
/// while the other one remains.
#[test]
fn a_member_not_serving_is_retried_after_a_first_pause_then_a_steady_one() {
    let dead = refusing();
    let (electing, count) = member(3);
    let hosts = [dead.as_str(), electing.as_str()];
    let client = connect(&hosts);
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
