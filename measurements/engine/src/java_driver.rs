//! A Java program of ours (`CuratorBench.java`, `FailoverBench.java`) compiled and run
//! against Debian's Curator 5.4 jars and driven one line at a time: a command on its stdin,
//! one answer line on its stdout. It prints `READY` once started and exits on `quit`; a
//! driver dropped on an error path is killed, so no JVM outlives its measurement.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use zk_locks::testing::curator;

/// One running Java driver program.
pub(crate) struct JavaDriver {
    /// The main class, named in errors.
    class: &'static str,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl JavaDriver {
    /// Compiles `sources` into `class_dir`, starts `class` with `args` and waits for `READY`.
    pub(crate) fn start(
        sources: &[PathBuf],
        class: &'static str,
        args: &[String],
        class_dir: &Path,
    ) -> Result<JavaDriver, String> {
        curator::compile(sources, class_dir).map_err(|e| e.to_string())?;
        let mut child = curator::java(class_dir, class)
            .map_err(|e| e.to_string())?
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting java: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut driver = JavaDriver {
            class,
            child,
            stdin,
            stdout,
        };
        match driver.read_line()?.as_str() {
            "READY" => Ok(driver),
            other => Err(format!("{class} did not start: {other}")),
        }
    }

    /// The JVM's process id (its CPU time is read from `/proc`).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next answer line, trimmed.
    pub(crate) fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err(format!("{} exited", self.class)),
            Ok(_) => Ok(line.trim().to_string()),
            Err(e) => Err(format!("reading from {}: {e}", self.class)),
        }
    }

    /// Writes one command line.
    pub(crate) fn send_line(&mut self, command: &str) -> Result<(), String> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("writing to {}: {e}", self.class))
    }

    /// The main class's name.
    pub(crate) fn class(&self) -> &'static str {
        self.class
    }

    /// Asks the program to close its clients and waits for the JVM to exit.
    pub(crate) fn quit(mut self) {
        let _ = self.send_line("quit");
        let _ = self.child.wait();
    }
}

impl Drop for JavaDriver {
    fn drop(&mut self) {
        // After `quit` the child has exited and this is a no-op; on an error path it is not.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
