//! Leader election across Rust and Curator: `LeaderLatch`es of both runtimes on one path,
//! then `LeaderSelector`s. Exactly one leader at a time (the leadership spells of every
//! participant, on one clock, never overlap), Curator's `getLeader()` and ours name the same
//! id, and leadership moves when the leader closes, yields, or its process is killed
//! (`kill -9`: the JVM's session times out after 2 s). The Rust participant killed with
//! `kill -9` is a `zklock --elect` process among Curator selectors. Latches of both runtimes
//! elect over TLS too.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zk_locks::locks::{CloseMode, LeaderLatch, LeaderLatchListener, LeaderSelector, Leadership};
use zk_locks::testing::harness::{eventually, unique_root};
use zk_locks::ZkClient;

use crate::harness::*;

/// One Curator participant (`Leader.java`), and whether it says it leads.
struct Peer {
    jvm: Jvm,
    leading: bool,
}

impl Peer {
    fn start(classes: &std::path::Path, connect: &str, kind: &str, path: &str, id: &str) -> Peer {
        Peer::start_with_env(classes, connect, kind, path, id, &[])
    }

    /// [`Peer::start`] with extra environment variables (`INTEROP_TLS_CA`: over TLS).
    fn start_with_env(
        classes: &std::path::Path,
        connect: &str,
        kind: &str,
        path: &str,
        id: &str,
        env: &[(&str, &str)],
    ) -> Peer {
        let mut peer = Peer {
            jvm: Jvm::spawn_leader(classes, &[connect, kind, path, id], env),
            leading: false,
        };
        peer.reply("CLOCK ");
        peer.reply("READY");
        peer
    }

    /// The next line that is not a leadership event (those update `leading`); it must start
    /// with `prefix`.
    fn reply(&mut self, prefix: &str) -> String {
        loop {
            let line = self.jvm.expect("");
            match line.as_str() {
                "LEADING" => self.leading = true,
                "NOT-LEADING" => self.leading = false,
                _ if line.starts_with(prefix) => return line,
                _ => panic!("expected {prefix:?} from Curator, got {line:?}"),
            }
        }
    }

    fn ask(&mut self, command: &str, prefix: &str) -> String {
        self.jvm.send(command);
        self.reply(prefix)
    }

    /// Curator's `getLeader()`: its id and flag.
    fn leader(&mut self) -> (String, bool) {
        let line = self.ask("LEADER", "LEADER ");
        let f: Vec<&str> = line.split(' ').collect();
        (f[1].to_string(), f[2] == "true")
    }

    /// Curator's `getParticipants()`: ids and flags in its order.
    fn participants(&mut self) -> Vec<(String, bool)> {
        self.jvm.send("PARTICIPANTS");
        let mut out = Vec::new();
        loop {
            let line = self.reply("");
            if line == "END" {
                return out;
            }
            let f: Vec<&str> = line.split(' ').collect();
            out.push((f[1].to_string(), f[2] == "true"));
        }
    }

    fn has_leadership(&mut self) -> bool {
        self.ask("HAS", "HAS ") == "HAS true"
    }

    /// Blocks until Curator says it leads.
    fn wait_leading(&mut self) {
        while !self.leading {
            let line = self.jvm.expect("");
            match line.as_str() {
                "LEADING" => self.leading = true,
                "NOT-LEADING" => self.leading = false,
                _ => panic!("unexpected {line:?} from Curator"),
            }
        }
    }

    /// Its records so far (the process keeps running).
    fn dump(&mut self) -> Vec<Record> {
        self.jvm.send("DUMP");
        self.records()
    }

    /// Closes it (its exit recorded first) and returns its records.
    fn close(mut self) -> Vec<Record> {
        self.jvm.send("CLOSE");
        let records = self.records();
        self.reply("CLOSED");
        self.jvm.finish();
        records
    }

    fn records(&mut self) -> Vec<Record> {
        let mut out = Vec::new();
        loop {
            let line = self.reply("");
            if line == "END" {
                return out;
            }
            out.push(Record::parse(&line));
        }
    }

    /// `kill -9`: its records so far, and its exit recorded now (it can lead no longer).
    fn kill(mut self, id: &str) -> Vec<Record> {
        let mut records = self.dump();
        self.jvm.kill_now();
        records.push(Record::now(false, 'x', id));
        records
    }
}

type Records = Arc<Mutex<Vec<Record>>>;

/// A Rust latch's spells, recorded on the shared clock.
struct Spells(Records, String);

impl LeaderLatchListener for Spells {
    fn is_leader(&self, _: &Leadership) {
        self.0.lock().unwrap().push(Record::now(true, 'x', &self.1));
    }
    fn not_leader(&self) {
        self.0
            .lock()
            .unwrap()
            .push(Record::now(false, 'x', &self.1));
    }
}

fn rust_latch(connect: &str, path: &str, id: &str, records: &Records) -> LeaderLatch {
    latch_on(rust_client(connect), path, id, records)
}

fn latch_on(
    client: zk_locks::SharedClient,
    path: &str,
    id: &str,
    records: &Records,
) -> LeaderLatch {
    let latch = LeaderLatch::new(client, path, id)
        .unwrap()
        .with_close_mode(CloseMode::NotifyLeader);
    latch.add_listener(Arc::new(Spells(records.clone(), id.to_string())));
    latch.start().unwrap();
    latch
}

fn ids(participants: Vec<zk_locks::locks::Participant>) -> Vec<(String, bool)> {
    participants
        .iter()
        .map(|p| (p.id().into_owned(), p.is_holder))
        .collect()
}

fn pairs(v: &[(&str, bool)]) -> Vec<(String, bool)> {
    v.iter().map(|(id, l)| (id.to_string(), *l)).collect()
}

#[test]
fn latches_of_both_runtimes_elect_one_leader_and_agree_on_it() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let path = format!("{}/election", unique_root("leader-latch"));
    let rust: Records = Arc::default();
    // Queue order: jvm-1, rust-a, jvm-2.
    let mut j1 = Peer::start(classes, &connect, "latch", &path, "jvm-1");
    j1.wait_leading();
    let a = rust_latch(&connect, &path, "rust-a", &rust);
    eventually(PATIENCE, "rust-a queued", || {
        a.participants().unwrap().len() == 2
    });
    let mut j2 = Peer::start(classes, &connect, "latch", &path, "jvm-2");
    eventually(PATIENCE, "jvm-2 queued", || {
        a.participants().unwrap().len() == 3
    });

    let queue = pairs(&[("jvm-1", true), ("rust-a", false), ("jvm-2", false)]);
    assert_eq!(ids(a.participants().unwrap()), queue);
    assert_eq!(j1.participants(), queue);
    assert_eq!(j2.leader(), ("jvm-1".to_string(), true));
    assert!(!a.has_leadership() && !j2.has_leadership() && j1.has_leadership());

    let mut records = j1.close(); // leadership moves to rust-a
    let led = a
        .await_leadership_for(PATIENCE)
        .unwrap()
        .expect("rust-a leads");
    assert_eq!(j2.leader(), ("rust-a".to_string(), true));
    assert!(!j2.has_leadership());

    a.close().unwrap(); // to jvm-2
    assert_eq!(led.state(), zk_locks::LockState::Lost);
    j2.wait_leading();
    let b = rust_latch(&connect, &path, "rust-b", &rust);
    eventually(PATIENCE, "rust-b queued", || {
        b.participants().unwrap().len() == 2
    });
    assert_eq!(b.leader().unwrap().unwrap().id(), "jvm-2");

    records.extend(j2.kill("jvm-2")); // kill -9: rust-b leads once the session expires
    b.await_leadership_for(PATIENCE)
        .unwrap()
        .expect("rust-b leads");
    b.close().unwrap();
    records.extend(rust.lock().unwrap().iter().cloned());
    let (peak, switches) = check(records, 1).unwrap();
    assert_eq!(peak, 1);
    assert!(switches >= 3, "leadership changed side {switches} times");
}

/// Latches of both runtimes over TLS (Curator on ZooKeeper's Netty socket with the test CA,
/// ours on rustls) through the server's `secureClientPort`: one leader at a time, named alike
/// by both, and leadership moving from Curator to Rust and back on close.
#[cfg(feature = "tls")]
#[test]
fn latches_of_both_runtimes_over_tls_elect_one_leader() {
    let Some(classes) = classes() else {
        return;
    };
    let tls = TlsTarget::shared();
    let (secure, env) = (&tls.connect, tls.env());
    let client = tls.client();
    let path = format!("{}/election", unique_root("leader-tls"));
    let rust: Records = Arc::default();
    let mut j1 = Peer::start_with_env(classes, secure, "latch", &path, "jvm-1", &env);
    j1.wait_leading();
    let a = latch_on(client, &path, "rust-a", &rust);
    eventually(PATIENCE, "rust-a queued", || {
        a.participants().unwrap().len() == 2
    });
    let mut j2 = Peer::start_with_env(classes, secure, "latch", &path, "jvm-2", &env);
    eventually(PATIENCE, "jvm-2 queued", || {
        a.participants().unwrap().len() == 3
    });
    assert_eq!(j2.leader(), ("jvm-1".to_string(), true));
    assert_eq!(a.leader().unwrap().unwrap().id(), "jvm-1");

    let mut records = j1.close(); // to rust-a
    a.await_leadership_for(PATIENCE)
        .unwrap()
        .expect("rust-a leads");
    assert_eq!(j2.leader(), ("rust-a".to_string(), true));
    a.close().unwrap(); // to jvm-2
    j2.wait_leading();
    assert!(j2.has_leadership());
    records.extend(j2.close());
    records.extend(rust.lock().unwrap().iter().cloned());
    let (peak, switches) = check(records, 1).unwrap();
    assert_eq!(peak, 1);
    assert!(switches >= 2, "leadership changed side {switches} times");
}

#[test]
fn selectors_of_both_runtimes_take_turns_and_agree_on_the_leader() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let path = format!("{}/election", unique_root("leader-selector"));
    let rust: Records = Arc::default();
    let mut j1 = Peer::start(classes, &connect, "selector", &path, "jvm-1");
    j1.wait_leading();
    let (led_tx, led) = mpsc::channel::<Leadership>();
    let spells = rust.clone();
    let a = LeaderSelector::new(rust_client(&connect), &path, move |l| {
        spells
            .lock()
            .unwrap()
            .push(Record::now(true, 'x', "rust-a"));
        let _ = led_tx.send(l.clone());
        while !l.ended().is_cancelled() {
            l.wait_while_leading(Some(Duration::from_millis(50)));
        }
        spells
            .lock()
            .unwrap()
            .push(Record::now(false, 'x', "rust-a"));
    })
    .unwrap()
    .with_id("rust-a");
    a.auto_requeue();
    a.start().unwrap();
    eventually(PATIENCE, "rust-a queued", || {
        a.participants().unwrap().len() == 2
    });
    assert_eq!(a.leader().unwrap().unwrap().id(), "jvm-1");
    assert_eq!(j1.leader(), ("jvm-1".to_string(), true));
    assert_eq!(j1.participants(), ids(a.participants().unwrap()));

    j1.jvm.send("YIELD"); // Curator's takeLeadership returns: rust-a leads, jvm-1 requeues
    let first = led.recv_timeout(PATIENCE).expect("rust-a leads");
    eventually(PATIENCE, "jvm-1 requeued", || {
        a.participants().unwrap().len() == 2
    });
    assert_eq!(j1.leader(), ("rust-a".to_string(), true));
    assert!(!j1.has_leadership());

    a.interrupt_leadership(); // back to jvm-1
    j1.wait_leading();
    assert_eq!(a.leader().unwrap().unwrap().id(), "jvm-1");

    let mut records = j1.kill("jvm-1"); // kill -9: rust-a leads again
    let second = led.recv_timeout(PATIENCE).expect("rust-a leads again");
    assert!(second.term() > first.term());
    a.close().unwrap();
    records.extend(rust.lock().unwrap().iter().cloned());
    let (peak, switches) = check(records, 1).unwrap();
    assert_eq!(peak, 1);
    assert!(switches >= 3, "leadership changed side {switches} times");
}

/// A zklock process, killed (SIGKILL) and reaped when dropped: a failed test leaves none.
struct Zklock(Child);

impl Drop for Zklock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether process `pid` still runs (a zombie does not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !state.is_some_and(|s| s.starts_with('Z'))
    })
}

/// A Rust participant in its own process, `zklock --elect`, leads an election of Curator
/// `LeaderSelector`s and is killed with `kill -9`: its command dies with it, and a Curator
/// participant leads once its 2 s session expires, never while it lived. Before and after,
/// Curator's `getLeader()` and ours name the same id.
#[test]
fn a_zklock_leader_killed_with_kill_9_hands_over_to_curator() {
    let Some((connect, classes)) = setup() else {
        return;
    };
    let path = format!("{}/election", unique_root("leader-zklock"));
    let file = std::env::temp_dir().join(format!(
        "zk-locks-interop-zklock-leader-{}-{}",
        std::process::id(),
        mono_nanos()
    ));
    let client = rust_client(&connect);
    let observer = LeaderSelector::new(client.clone(), &path, |_| {}).unwrap();
    // The leader's term: its node's czxid.
    let term = || {
        let leader = observer.leader().unwrap().expect("a leader");
        client
            .exists(&leader.path)
            .unwrap()
            .expect("its node")
            .czxid
    };
    // zklock's spell is recorded from before it is spawned to after it is reaped: wider than
    // its real one, so the check is only stricter.
    let mut records = vec![Record::now(true, 'x', "rust-zklock")];
    let mut zklock = Zklock(
        Command::new(env!("CARGO_BIN_EXE_zklock"))
            .env_remove("ZK_CONNECT")
            .env_remove("ZK_AUTH")
            .stdin(Stdio::null())
            .args(["--connect", &connect, "--session-timeout", "2s", "--elect"])
            .args(["--id", "rust-zklock", &path, "--", "sh", "-c"])
            // The command, while it leads: its pid and term in the file, then it runs on.
            .arg(concat!(
                "echo $$ $ZKLOCK_FENCING_TOKEN > \"$0.tmp\"; mv \"$0.tmp\" \"$0\"; ",
                "exec sleep 120 </dev/null >/dev/null 2>&1"
            ))
            .arg(&file)
            .spawn()
            .expect("spawn zklock"),
    );
    eventually(PATIENCE, "zklock leads (its command runs)", || {
        file.exists()
    });
    let led = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    let (command, zklock_term) = led.trim().split_once(' ').unwrap();
    let (command, zklock_term): (u32, i64) =
        (command.parse().unwrap(), zklock_term.parse().unwrap());
    assert!(running(command), "the leader's command runs");

    // Queue order: rust-zklock (leading), jvm-1, jvm-2.
    let mut j1 = Peer::start(classes, &connect, "selector", &path, "jvm-1");
    let mut j2 = Peer::start(classes, &connect, "selector", &path, "jvm-2");
    eventually(PATIENCE, "both Curator participants queued", || {
        observer.participants().unwrap().len() == 3
    });
    let queue = pairs(&[("rust-zklock", true), ("jvm-1", false), ("jvm-2", false)]);
    assert_eq!(ids(observer.participants().unwrap()), queue);
    assert_eq!(j2.participants(), queue);
    assert_eq!(observer.leader().unwrap().unwrap().id(), "rust-zklock");
    assert_eq!(j1.leader(), ("rust-zklock".to_string(), true));
    assert_eq!(
        term(),
        zklock_term,
        "the command ran with the leader's term"
    );
    assert!(!j1.has_leadership() && !j2.has_leadership());

    // kill -9: the process, and with it its command; its session expires 2 s later.
    zklock.0.kill().unwrap();
    zklock.0.wait().unwrap();
    records.push(Record::now(false, 'x', "rust-zklock"));
    j1.wait_leading();
    if running(command) {
        // SAFETY: kill(2) of the process the failed check is about.
        unsafe { libc::kill(command as i32, libc::SIGKILL) };
        panic!("the killed leader's command still runs beside the new leader");
    }
    assert_eq!(observer.leader().unwrap().unwrap().id(), "jvm-1");
    assert_eq!(j2.leader(), ("jvm-1".to_string(), true));
    assert!(j1.has_leadership() && !j2.has_leadership());
    assert!(
        term() > zklock_term,
        "the next term is larger, across runtimes"
    );
    let queue = pairs(&[("jvm-1", true), ("jvm-2", false)]);
    assert_eq!(ids(observer.participants().unwrap()), queue);
    assert_eq!(j2.participants(), queue);

    // jvm-2 first, so that nobody leads after jvm-1 closes.
    records.extend(j2.close());
    records.extend(j1.close());
    let (peak, switches) = check(records, 1).unwrap();
    assert_eq!(peak, 1);
    assert_eq!(switches, 1, "leadership moved from zklock to Curator once");
}
