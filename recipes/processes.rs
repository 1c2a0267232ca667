//! Processes: real separate processes (children of this program) share one lock on a real
//! ensemble, and one of them dies holding it.
//!
//! 1. child 0 takes the lock and is killed with SIGKILL while holding it: no release, no
//!    goodbye. Its ephemeral lock node lives until ZooKeeper expires its session (2 s asked;
//!    the server may round it up to its minimum).
//! 2. children 1..=3 queue behind it, then each increments a counter node several times with
//!    a plain read-modify-write under the lock. They go ahead once the dead child's session
//!    expires; the final count proves that no two of them were ever inside together.
//!
//! Needs a real ensemble: `--connect HOSTS` (or `ZK_CONNECT`). Without one it starts a
//! throw-away `testing::TestingServer` (Java and Debian's ZooKeeper jars, as
//! `./scripts/test.sh` installs them).
//!
//! ```sh
//! cargo run --example processes      # starts a throw-away server
//! cargo run --example processes -- --connect 127.0.0.1:2181
//! ```

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use log::info;
use zk_locks::client::native::NativeClient;
use zk_locks::{CreateMode, InterProcessLock, InterProcessMutex, SharedClient, ZkError};

use zk_locks::testing::harness::cookbook::{self, ensure, AnyResult};

const ROOT: &str = "/zk-locks/processes";
const LOCK: &str = "/zk-locks/processes/lock";
const COUNTER: &str = "/zk-locks/processes/counter";
const WORKERS: usize = 3;
const ROUNDS: usize = 5;
/// The dying child's session timeout: short, so the survivors do not wait long.
const CRASHER_SESSION: Duration = Duration::from_secs(2);
/// Starts every line a child says to its parent.
const CHILD_PREFIX: &str = "zk-locks-child: ";
/// What a child prints once it holds the lock.
const HOLDING: &str = "HOLDING";

/// What happened, for the test that runs this recipe.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The counter at the end (`WORKERS * ROUNDS` when exclusion held).
    pub counter: i64,
    /// What it should be.
    pub expected: i64,
    /// How long the survivors waited after the holder was killed.
    pub waited_for_expiry: Duration,
}

#[cfg(not(test))]
fn main() {
    cookbook::main(env!("CARGO_CRATE_NAME"), run);
}

/// Runs the parent (or, with `child ...` arguments, one child), spawning children as
/// `current_exe child ...`.
pub fn run(args: &[String]) -> AnyResult<Outcome> {
    run_with(args, &|child_args| {
        // Falls back to argv[0] where the running program's path is unknown.
        let me = std::env::current_exe()
            .unwrap_or_else(|_| std::env::args_os().next().unwrap_or_default().into());
        let mut cmd = Command::new(me);
        cmd.args(child_args);
        cmd
    })
}

/// Like [`run`], with `spawn` building the command that runs a child with the given
/// arguments (the test harness re-enters itself differently).
pub fn run_with(args: &[String], spawn: &dyn Fn(&[String]) -> Command) -> AnyResult<Outcome> {
    if args.first().map(String::as_str) == Some("child") {
        child(&args[1..])?;
        return Ok(Outcome::default());
    }
    let options = cookbook::Options::parse(args)?;
    match options.connect {
        Some(hosts) => parent(&hosts, spawn),
        None => embedded(spawn),
    }
}

fn embedded(spawn: &dyn Fn(&[String]) -> Command) -> AnyResult<Outcome> {
    info!("no --connect: starting a throw-away ZooKeeper (testing::TestingServer)");
    let server = zk_locks::testing::TestingServer::start()?;
    parent(&server.connect_string(), spawn)
}

fn parent(hosts: &str, spawn: &dyn Fn(&[String]) -> Command) -> AnyResult<Outcome> {
    info!("processes on the ZooKeeper ensemble at {hosts}");
    let client: SharedClient = NativeClient::connect(hosts, cookbook::SESSION_TIMEOUT)?;
    reset_counter(&client)?;

    let (lines, markers) = mpsc::channel();
    let mut crasher = start_child(spawn, hosts, 0, "crash", lines.clone())?;
    markers
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| "child 0 never took the lock")?;
    let mut workers = (1..=WORKERS)
        .map(|id| start_child(spawn, hosts, id, "work", lines.clone()))
        .collect::<AnyResult<Vec<Kid>>>()?;
    drop(lines);
    wait_for_queue(&client, 1 + WORKERS)?;
    info!(
        "all {WORKERS} workers queue behind child 0; killing child 0 (pid {}) with SIGKILL",
        crasher.id()
    );
    crasher.process.kill()?;
    crasher.process.wait()?;
    let killed_at = Instant::now();
    info!("child 0 is dead; its lock node stays until ZooKeeper expires its session");

    for w in &mut workers {
        let status = w.process.wait()?;
        ensure(status.success(), format!("a worker exited with {status}"))?;
    }
    // The first "HOLDING" after the kill marks the hand-over.
    let waited = markers
        .try_iter()
        .map(|at: Instant| at.saturating_duration_since(killed_at))
        .min();
    if let Some(w) = waited {
        info!(
            "the first worker got the lock {w:?} after the kill: the dead child's session expired"
        );
    }
    let counter = read_counter(&client)?;
    let expected = (WORKERS * ROUNDS) as i64;
    info!("counter = {counter} (expected {expected}: no lost update, so never two holders)");
    ensure(
        counter == expected,
        format!("counter {counter}, expected {expected}"),
    )?;
    client.close();
    Ok(Outcome {
        counter,
        expected,
        waited_for_expiry: waited.unwrap_or_default(),
    })
}

/// A child process that is killed if still running when dropped (an early error in the
/// parent must not leave children behind). Its stdin stays open while the parent lives:
/// children exit when it closes.
struct Kid {
    process: Child,
    _stdin: Option<std::process::ChildStdin>,
}

impl Kid {
    fn id(&self) -> u32 {
        self.process.id()
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if let Ok(None) = self.process.try_wait() {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

/// Starts child `id`; a thread relays its output to the log and reports `HOLDING` lines.
fn start_child(
    spawn: &dyn Fn(&[String]) -> Command,
    hosts: &str,
    id: usize,
    mode: &str,
    markers: mpsc::Sender<Instant>,
) -> AnyResult<Kid> {
    let args = ["child", hosts, &id.to_string(), mode].map(String::from);
    let mut child = spawn(&args)
        .stdout(Stdio::piped())
        .stdin(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let stdin = child.stdin.take();
    info!("started child {id} ({mode}), pid {}", child.id());
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // Only our own protocol lines, wherever they start: a test harness re-entering
            // itself prints more, sometimes on the same line.
            let Some(at) = line.find(CHILD_PREFIX) else {
                continue;
            };
            let story = &line[at + CHILD_PREFIX.len()..];
            info!("  [child {id}] {story}");
            if story.starts_with(HOLDING) {
                let _ = markers.send(Instant::now());
            }
        }
    });
    Ok(Kid {
        process: child,
        _stdin: stdin,
    })
}

/// Polls the lock directory until `n` contenders are in it (a real condition, bounded).
fn wait_for_queue(client: &SharedClient, n: usize) -> AnyResult<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let queued = match client.get_children(LOCK, None) {
            Ok(c) => c.len(),
            Err(ZkError::NoNode) => 0,
            Err(e) => return Err(e.into()),
        };
        if queued >= n {
            return Ok(());
        }
        ensure(
            Instant::now() < deadline,
            format!("only {queued} of {n} contenders queued"),
        )?;
        thread::sleep(Duration::from_millis(20)); // poll pacing
    }
}

fn reset_counter(client: &SharedClient) -> AnyResult<()> {
    for path in ["/zk-locks", ROOT] {
        match client.create(path, b"", CreateMode::Persistent) {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match client.create(COUNTER, b"0", CreateMode::Persistent) {
        Ok(_) => Ok(()),
        Err(ZkError::NodeExists) => Ok(client.set_data(COUNTER, b"0", None).map(|_| ())?),
        Err(e) => Err(e.into()),
    }
}

fn read_counter(client: &SharedClient) -> AnyResult<i64> {
    let (data, _) = client.get_data(COUNTER, None)?;
    Ok(std::str::from_utf8(&data)?.trim().parse()?)
}

/// Says one line of the story to the parent.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{CHILD_PREFIX}{line}");
    let _ = out.flush();
}

/// A child: `child HOSTS ID crash|work`.
fn child(args: &[String]) -> AnyResult<()> {
    let [hosts, id, mode] = args else {
        return Err(format!("child needs HOSTS ID crash|work, got {args:?}").into());
    };
    let timeout = if mode == "crash" {
        CRASHER_SESSION
    } else {
        cookbook::SESSION_TIMEOUT
    };
    // Orphaned children (the parent died) exit instead of holding or queueing forever.
    thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(2);
    });
    let client: SharedClient = NativeClient::connect(hosts, timeout)?;
    let lock = InterProcessMutex::new(client.clone(), LOCK)?.with_data(format!("child-{id}"));
    if mode == "crash" {
        let _guard = lock.lock()?;
        say(&format!("{HOLDING} the lock; about to be killed"));
        loop {
            thread::park(); // until SIGKILL
        }
    }
    say("queues for the lock");
    for round in 0..ROUNDS {
        let guard = lock.lock()?;
        let value = read_counter(&client)?;
        client.set_data(COUNTER, (value + 1).to_string().as_bytes(), None)?;
        if round == 0 {
            say(&format!(
                "{HOLDING} the lock (token {}): counter {value} -> {}",
                guard.fencing_token()?,
                value + 1
            ));
        } else {
            say(&format!("holds the lock: counter {value} -> {}", value + 1));
        }
        guard.unlock()?;
    }
    client.close();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `processes_child` finds its arguments (one per line).
    const CHILD_ARGS_ENV: &str = "ZK_LOCKS_RECIPE_CHILD_ARGS";

    #[test]
    fn processes_share_a_lock_and_survive_a_killed_holder() {
        let Some(args) = cookbook::shared_server_args() else {
            return;
        };
        // Each child re-runs this test binary, filtered down to `processes_child`.
        let outcome = run_with(&args, &|child_args| {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            cmd.args([
                "tests::processes_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ARGS_ENV, child_args.join("\n"));
            cmd
        })
        .unwrap();
        assert_eq!(outcome.counter, outcome.expected);
        assert!(outcome.expected > 0);
        // The workers went ahead only after the holder was killed (once its session expired).
        assert!(outcome.waited_for_expiry > Duration::ZERO);
    }

    /// Not a test: the child process of `processes_share_a_lock_and_survive_a_killed_holder`.
    #[test]
    #[ignore = "entry point for child processes of the processes recipe"]
    fn processes_child() {
        let Ok(args) = std::env::var(CHILD_ARGS_ENV) else {
            return;
        };
        let args: Vec<String> = args.lines().map(String::from).collect();
        let outcome = run_with(&args, &|_| unreachable!("children do not spawn"));
        assert!(outcome.is_ok(), "child failed: {:?}", outcome.err());
    }
}
