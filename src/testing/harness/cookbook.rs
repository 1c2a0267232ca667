//! What every program of the cookbook (`recipes/`) shares: its command line (the in-memory
//! ensemble by default, a real one with `--connect HOSTS` or `ZK_CONNECT`), its log format,
//! its exit status, and checking the promises it tells.

use std::io::Write;
use std::time::{Duration, Instant};

use super::backend::{Backend, Memory};
use super::real::{ClientKind, Real};
use crate::locks::internals::{is_protected, PROTECTED_PREFIX_LEN};
use crate::testing::shared_server;

/// Errors of a recipe: the library's, or a broken promise the recipe checks.
pub type AnyError = Box<dyn std::error::Error + Send + Sync>;
/// Result of a recipe.
pub type AnyResult<T> = Result<T, AnyError>;

/// Session timeout the recipes ask of a real ensemble. Within the window of a default server
/// (tickTime 2 s: 4 s to 40 s) and of `testing::TestingServer` (ZooKeeper's own bounds at
/// tickTime 500 ms: 1 s to 10 s).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// The command line every recipe understands.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--connect HOSTS` (or `ZK_CONNECT`): a real ensemble; `None`: the embedded one.
    pub connect: Option<String>,
    /// Arguments the recipe interprets itself.
    pub rest: Vec<String>,
}

impl Options {
    /// Reads `--connect HOSTS`, `--connect=HOSTS` and `--memory` (the embedded ensemble,
    /// whatever `ZK_CONNECT` says); the environment variable `ZK_CONNECT` is the default for
    /// `--connect`. Other arguments are left in [`Options::rest`].
    pub fn parse(args: &[String]) -> AnyResult<Options> {
        let mut connect = std::env::var("ZK_CONNECT").ok().filter(|s| !s.is_empty());
        let mut rest = Vec::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if arg == "--connect" {
                connect = Some(
                    it.next()
                        .ok_or("--connect needs HOSTS (host:port[,host:port][/chroot])")?
                        .clone(),
                );
            } else if let Some(hosts) = arg.strip_prefix("--connect=") {
                connect = Some(hosts.to_string());
            } else if arg == "--memory" {
                connect = None;
            } else {
                rest.push(arg.clone());
            }
        }
        Ok(Options { connect, rest })
    }

    /// Where the recipe's sessions live: a fresh in-memory ensemble, or the real one named
    /// (sessions on our own client, [`SESSION_TIMEOUT`], no fault proxy).
    pub fn backend(&self) -> Box<dyn Backend> {
        match &self.connect {
            Some(hosts) => Box::new(Real::at(hosts, ClientKind::Native, SESSION_TIMEOUT)),
            None => Box::new(Memory::new()),
        }
    }

    /// Where the recipe runs, for its first log line.
    pub fn describe(&self) -> String {
        match &self.connect {
            Some(hosts) => format!("the ZooKeeper ensemble at {hosts}"),
            None => "the embedded in-memory ensemble (use --connect HOSTS for a real one)".into(),
        }
    }
}

/// Logs to stderr as `  0.123s INFO  message`, at info for the recipe (`name`) and warn for
/// the library, unless `RUST_LOG` says otherwise. A second call does nothing.
pub fn init_logging(name: &str) {
    let start = Instant::now();
    let default = format!("{name}=info,zk_locks=warn");
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default))
        .format(move |buf, record| {
            writeln!(
                buf,
                "{:>7.3}s {:<5} {}",
                start.elapsed().as_secs_f64(),
                record.level(),
                record.args()
            )
        })
        .try_init();
}

/// The `main` of every recipe: logging, arguments, exit status 1 (after an error line) when
/// `run` fails.
pub fn main<T>(name: &str, run: fn(&[String]) -> AnyResult<T>) {
    init_logging(name);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        log::error!("{name} failed: {e}");
        std::process::exit(1);
    }
}

/// Fails the recipe with `message` unless `condition` holds: recipes check what they promise.
pub fn ensure(condition: bool, message: impl Into<String>) -> AnyResult<()> {
    if condition {
        Ok(())
    } else {
        Err(message.into().into())
    }
}

/// A lock node's name without Curator's `_c_<uuid>-` protection prefix, for the log
/// (`/a/_c_…-lock-0000000003` → `lock-0000000003`).
pub fn short(path: &str) -> &str {
    let name = crate::paths::node_name(path);
    if is_protected(name) {
        &name[PROTECTED_PREFIX_LEN..]
    } else {
        name
    }
}

/// A recipe's own tests: the arguments that run it in-process on the embedded ensemble
/// (`--memory`, whatever `ZK_CONNECT` says), with the log captured by the test runner.
pub fn memory_args() -> Vec<String> {
    let _ = env_logger::builder().is_test(true).try_init();
    vec!["--memory".to_string()]
}

/// A recipe's own tests: the arguments that run it against the shared test server
/// ([`shared_server`]); `None` (skip) when no server can run here, unless
/// `ZK_LOCKS_REQUIRE_SERVER=1`, which makes that a failure.
pub fn shared_server_args() -> Option<Vec<String>> {
    let server = shared_server()?;
    let _ = env_logger::builder().is_test(true).try_init();
    Some(vec!["--connect".to_string(), server.connect_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn memory_overrides_connect_and_the_rest_is_kept() {
        let o = Options::parse(&args(&["--connect", "h:1", "x", "--memory", "y"])).unwrap();
        assert_eq!(o.connect, None);
        assert_eq!(o.rest, ["x", "y"]);
        let o = Options::parse(&args(&["--connect=h:2/c"])).unwrap();
        assert_eq!(o.connect.as_deref(), Some("h:2/c"));
        assert!(Options::parse(&args(&["--connect"])).is_err());
    }

    #[test]
    fn short_drops_the_protection_prefix() {
        let protected = "/a/_c_7d3f8a04-9e1b-4c52-8f7e-0b6a1d2c3e4f-lock-0000000003";
        assert_eq!(short(protected), "lock-0000000003");
        assert_eq!(short("/a/lock-0000000004"), "lock-0000000004");
    }
}
