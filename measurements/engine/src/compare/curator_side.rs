//! Curator's side: `CuratorBench.java` (next to this file), compiled and run against
//! Debian's Curator 5.4 jars, one command per line on its stdin, one `RESULT` line back.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use super::{Run, Scenario, Side};
use zk_locks::testing::curator;

/// Curator 5.4 in a JVM, driven line by line over stdin/stdout.
pub(super) struct CuratorSide {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl CuratorSide {
    pub(super) fn start(
        connect: &str,
        sessions: usize,
        class_dir: &Path,
    ) -> Result<CuratorSide, String> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/compare");
        let sources = [dir.join("CuratorBench.java"), dir.join("CuratorQueue.java")];
        curator::compile(&sources, class_dir).map_err(|e| e.to_string())?;
        let mut child = curator::java(class_dir, "CuratorBench")
            .map_err(|e| e.to_string())?
            .arg(connect)
            .arg(sessions.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting java: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut side = CuratorSide {
            child,
            stdin,
            stdout,
        };
        match side.read_line()?.as_str() {
            "READY" => Ok(side),
            other => Err(format!("CuratorBench did not start: {other}")),
        }
    }

    pub(super) fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("CuratorBench exited".into()),
            Ok(_) => Ok(line.trim().to_string()),
            Err(e) => Err(format!("reading from CuratorBench: {e}")),
        }
    }

    /// Writes one command line.
    pub(super) fn send_line(&mut self, command: &str) -> Result<(), String> {
        writeln!(self.stdin, "{command}").map_err(|e| format!("writing to CuratorBench: {e}"))?;
        self.stdin.flush().map_err(|e| e.to_string())
    }

    pub(super) fn command(&mut self, command: &str) -> Result<Run, String> {
        self.send_line(command)?;
        let line = self.read_line()?;
        parse_result(&line).ok_or_else(|| format!("CuratorBench, on {command:?}: {line}"))
    }

    pub(super) fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

impl Drop for CuratorSide {
    fn drop(&mut self) {
        // After `quit` the child has exited and this is a no-op; on an error path it is not.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Side for CuratorSide {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn run(&mut self, scenario: &Scenario, path: &str, n: usize) -> Result<Run, String> {
        self.command(&match scenario {
            Scenario::RoundTrip => format!("roundtrip {path} {n}"),
            Scenario::Uncontended(recipe) => format!("uncontended {recipe} {path} {n}"),
            Scenario::Contended { recipe, sessions } => {
                format!("contended {recipe} {path} {sessions} {n}")
            }
        })
    }
}

/// Parses `RESULT kind=.. n=.. p50_ns=.. p99_ns=.. elapsed_ns=..`.
fn parse_result(line: &str) -> Option<Run> {
    let rest = line.strip_prefix("RESULT ")?;
    let field = |key: &str| -> Option<u64> {
        rest.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    Some(Run {
        n: field("n")?,
        p50_ns: field("p50_ns")?,
        p99_ns: field("p99_ns")?,
        elapsed_ns: field("elapsed_ns")?,
        ..Run::default()
    })
}
