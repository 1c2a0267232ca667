//! The participants of one trial, each an OS process of its own (so that kill -9 is real):
//! ours re-executes a program of ours in participant mode (`participant.rs`), Curator's is one
//! JVM each (`ElectionParticipant.java`). Both speak the same lines; a thread per process
//! reads them onto one channel, where the trial takes them in arrival order.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use zk_locks::testing::curator;

use super::participant::PARTICIPANT_FLAG;

/// A library under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// zk-locks' `LeaderLatch`.
    Ours,
    /// Curator 5.4's `LeaderLatch`.
    Curator,
}

impl Library {
    /// How the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Library::Ours => "zk-locks",
            Library::Curator => "Curator",
        }
    }
}

/// How to start a participant of each library.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// A program that runs [`participant_main`](super::participant_main) first thing (the
    /// failover program itself: `std::env::current_exe()`).
    pub ours: PathBuf,
    /// Where `ElectionParticipant.java` was compiled (`None`: no Curator side).
    pub curator_classes: Option<PathBuf>,
}

impl Launcher {
    /// Compiles the Curator participant into `class_dir`.
    pub fn compile_curator(class_dir: &Path) -> Result<(), String> {
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("src/failover/election/ElectionParticipant.java");
        curator::compile(&[source], class_dir).map_err(|e| e.to_string())
    }

    fn command(&self, library: Library) -> Result<Command, String> {
        match library {
            Library::Ours => {
                let mut c = Command::new(&self.ours);
                c.arg(PARTICIPANT_FLAG);
                Ok(c)
            }
            Library::Curator => {
                let dir = self.curator_classes.as_ref().ok_or("no Curator classes")?;
                curator::java(dir, "ElectionParticipant").map_err(|e| e.to_string())
            }
        }
    }
}

/// A line of a participant, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Connected with this session.
    Session(i64),
    /// Leads from this moment (ns), with this term (zk-locks: the fencing token; Curator: its
    /// node's sequence number).
    Leading(u64, String),
    /// Stopped leading at this moment.
    NotLeading(u64),
    /// Whether it leads, asked at this moment.
    Has(bool, u64),
    /// Was answered, at this moment, a read through its session (`act`).
    Acted(u64),
    /// Began to close.
    Closing(u64),
    /// Closed its latch and client.
    Closed(u64),
    /// An error, or a line not understood.
    Error(String),
    /// Its output ended (the process exited).
    Exited,
}

impl Line {
    fn parse(text: &str) -> Line {
        let mut words = text.split_whitespace();
        let word = words.next().unwrap_or("");
        let ns = |w: Option<&str>| w.and_then(|v| v.parse::<u64>().ok());
        let parsed = match word {
            "SESSION" => words
                .next()
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .map(|id| Line::Session(id as i64)),
            "LEADING" => {
                let at = ns(words.next());
                at.map(|at| Line::Leading(at, words.next().unwrap_or("-").to_string()))
            }
            "NOT-LEADING" => ns(words.next()).map(Line::NotLeading),
            "HAS" => {
                let has = words.next().map(|w| w == "true");
                has.zip(ns(words.next())).map(|(h, at)| Line::Has(h, at))
            }
            "ACTED" => ns(words.next()).map(Line::Acted),
            "CLOSING" => ns(words.next()).map(Line::Closing),
            "CLOSED" => ns(words.next()).map(Line::Closed),
            _ => None,
        };
        parsed.unwrap_or_else(|| Line::Error(text.to_string()))
    }
}

/// The processes of one trial and every line they printed so far.
pub struct Group {
    library: Library,
    children: Vec<(Child, Option<ChildStdin>)>,
    lines: Receiver<(usize, Line)>,
    /// Every line taken from the channel, in arrival order.
    pub log: Vec<(usize, Line)>,
    /// Lines taken from the channel that no wait picked yet (participants answer in any order).
    unclaimed: Vec<(usize, Line)>,
}

impl Group {
    /// Starts `n` participants of `library` on `path` (ids `p0`, `p1`, ...).
    pub fn spawn(
        launcher: &Launcher,
        library: Library,
        connect: &str,
        path: &str,
        n: usize,
    ) -> Result<Group, String> {
        let (tx, rx) = mpsc::channel();
        let mut group = Group {
            library,
            children: Vec::new(),
            lines: rx,
            log: Vec::new(),
            unclaimed: Vec::new(),
        };
        for i in 0..n {
            let mut child = launcher
                .command(library)?
                .args([connect, path, &format!("p{i}")])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("starting a {} participant: {e}", library.name()))?;
            let stdin = child.stdin.take();
            let stdout = child.stdout.take().ok_or("no stdout")?;
            let tx: Sender<(usize, Line)> = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send((i, Line::parse(line.trim()))).is_err() {
                        return;
                    }
                }
                let _ = tx.send((i, Line::Exited));
            });
            group.children.push((child, stdin));
        }
        Ok(group)
    }

    /// Sends `command` to participant `i`.
    pub fn send(&mut self, i: usize, command: &str) -> Result<(), String> {
        let stdin = self.children[i]
            .1
            .as_mut()
            .ok_or("participant's input closed")?;
        writeln!(stdin, "{command}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("to {} participant {i}: {e}", self.library.name()))
    }

    /// Takes lines (first those no wait picked yet) until `want` picks one (`what` it waits
    /// for, named in errors), for at most `bound`. A participant's error line fails the wait.
    pub fn wait_for<T>(
        &mut self,
        what: &str,
        bound: Duration,
        want: impl FnMut(usize, &Line) -> Option<T>,
    ) -> Result<T, String> {
        self.poll_for(bound, want)?.ok_or_else(|| {
            format!(
                "{}: waited {bound:?} in vain for {what}; lines: {:?}",
                self.library.name(),
                self.log
            )
        })
    }

    /// [`Self::wait_for`], `None` when `bound` passed.
    pub fn poll_for<T>(
        &mut self,
        bound: Duration,
        mut want: impl FnMut(usize, &Line) -> Option<T>,
    ) -> Result<Option<T>, String> {
        if let Some(k) = self
            .unclaimed
            .iter()
            .position(|(i, line)| want(*i, line).is_some())
        {
            let (i, line) = self.unclaimed.remove(k);
            return Ok(want(i, &line));
        }
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (i, line) = match self.lines.recv_timeout(left) {
                Ok(got) => got,
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("{}: every participant exited", self.library.name()))
                }
            };
            self.log.push((i, line.clone()));
            if let Line::Error(text) = &line {
                return Err(format!("{} participant {i}: {text}", self.library.name()));
            }
            if let Some(found) = want(i, &line) {
                return Ok(Some(found));
            }
            self.unclaimed.push((i, line));
        }
    }

    /// Takes the lines that arrive within `quiet` of each other (stragglers after an event).
    pub fn drain(&mut self, quiet: Duration) {
        while let Ok(got) = self.lines.recv_timeout(quiet) {
            self.log.push(got);
        }
    }

    /// kill -9 participant `i` (and reaps it).
    pub fn kill(&mut self, i: usize) {
        let child = &mut self.children[i].0;
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Closes every participant's input (each closes its client and exits) and waits for the
    /// processes for up to `bound`; whatever is still running then is killed.
    pub fn finish(mut self, bound: Duration) {
        for (_, stdin) in self.children.iter_mut() {
            stdin.take();
        }
        let deadline = Instant::now() + bound;
        for (child, _) in self.children.iter_mut() {
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20)); // polling an exit: no event to wait on
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // No participant outlives its trial.
        for (child, _) in self.children.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
