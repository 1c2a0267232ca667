//! Curator's side: `CuratorBench.java` (next to this file), compiled and run against
//! Debian's Curator 5.4 jars, one command per line on its stdin, one `RESULT` line back.

use std::path::{Path, PathBuf};

use super::{Run, Scenario, Side};
use crate::java_driver::JavaDriver;

/// Curator 5.4 in a JVM, driven line by line over stdin/stdout.
pub(super) struct CuratorSide {
    driver: JavaDriver,
}

impl CuratorSide {
    pub(super) fn start(
        connect: &str,
        sessions: usize,
        class_dir: &Path,
    ) -> Result<CuratorSide, String> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/compare");
        let sources = [dir.join("CuratorBench.java"), dir.join("CuratorQueue.java")];
        let args = [connect.to_string(), sessions.to_string()];
        let driver = JavaDriver::start(&sources, "CuratorBench", &args, class_dir)?;
        Ok(CuratorSide { driver })
    }

    pub(super) fn read_line(&mut self) -> Result<String, String> {
        self.driver.read_line()
    }

    /// Writes one command line.
    pub(super) fn send_line(&mut self, command: &str) -> Result<(), String> {
        self.driver.send_line(command)
    }

    pub(super) fn command(&mut self, command: &str) -> Result<Run, String> {
        self.send_line(command)?;
        let line = self.read_line()?;
        parse_result(&line).ok_or_else(|| format!("CuratorBench, on {command:?}: {line}"))
    }

    pub(super) fn quit(self) {
        self.driver.quit();
    }
}

impl Side for CuratorSide {
    fn pid(&self) -> u32 {
        self.driver.pid()
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
