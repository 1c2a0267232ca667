//! Plumbing shared by the recipes (not a recipe itself): where to connect — the embedded
//! in-memory ensemble by default, a real ensemble with `--connect HOSTS` or `ZK_CONNECT` —,
//! one session per simulated process, and the log format that tells the story.
//!
//! Each recipe includes this file with `#[path = "support.rs"] mod support;`, and
//! `tests/recipes.rs` includes each recipe the same way, so not every helper is used
//! everywhere.
#![allow(dead_code)]

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::client::native::NativeClient;
use zk_locks::{SharedClient, ZkClient};

/// Errors of a recipe: the library's, or a broken promise the recipe checks.
pub type AnyError = Box<dyn std::error::Error + Send + Sync>;
/// Result of a recipe.
pub type AnyResult<T> = Result<T, AnyError>;

/// Session timeout requested from a real ensemble. Within the window of a default server
/// (tickTime 2 s: 4 s to 40 s) and of `testing::TestingServer` (1 s to 60 s).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Command-line options every recipe understands.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--connect HOSTS` (or `ZK_CONNECT`): a real ensemble; `None`: the embedded one.
    pub connect: Option<String>,
    /// Arguments the recipe interprets itself.
    pub rest: Vec<String>,
}

/// Parses `--connect HOSTS`, `--connect=HOSTS` and `--memory` (ignore `ZK_CONNECT`); the
/// environment variable `ZK_CONNECT` is the default for `--connect`.
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

/// Where the recipe's sessions live.
pub enum Ensemble {
    /// The embedded in-memory ZooKeeper (`MemoryEnsemble`): no server needed.
    Memory(MemoryEnsemble),
    /// A real ensemble.
    Real(String),
}

impl Ensemble {
    /// The ensemble the options name.
    pub fn from_options(options: &Options) -> Ensemble {
        match &options.connect {
            Some(hosts) => Ensemble::Real(hosts.clone()),
            None => Ensemble::Memory(MemoryEnsemble::new()),
        }
    }

    /// For the log.
    pub fn describe(&self) -> String {
        match self {
            Ensemble::Memory(_) => {
                "the embedded in-memory ensemble (use --connect HOSTS for a real one)".into()
            }
            Ensemble::Real(hosts) => format!("the ZooKeeper ensemble at {hosts}"),
        }
    }

    /// True for the embedded ensemble.
    pub fn is_memory(&self) -> bool {
        matches!(self, Ensemble::Memory(_))
    }

    /// A new client with its own session, as a separate process would have.
    pub fn session(&self) -> AnyResult<Conn> {
        self.session_at(None)
    }

    /// Like [`Ensemble::session`], through `hosts` instead of the ensemble's own connect
    /// string (a fault proxy in front of it), for a real ensemble.
    pub fn session_at(&self, hosts: Option<&str>) -> AnyResult<Conn> {
        match self {
            Ensemble::Memory(ensemble) => {
                let memory = ensemble.connect();
                Ok(Conn {
                    client: memory.clone(),
                    memory: Some(memory),
                })
            }
            Ensemble::Real(own) => {
                let client = NativeClient::connect(hosts.unwrap_or(own), SESSION_TIMEOUT)?;
                Ok(Conn {
                    client,
                    memory: None,
                })
            }
        }
    }
}

/// One session: the client the recipes use, plus the in-memory handle for fault injection.
pub struct Conn {
    /// The client, as recipes take it.
    pub client: SharedClient,
    memory: Option<Arc<MemoryClient>>,
}

impl Conn {
    /// The in-memory client (fault injection), on the embedded ensemble.
    pub fn memory(&self) -> Option<&MemoryClient> {
        self.memory.as_deref()
    }

    /// Ends this session as a crash would, seen from the lock: on the embedded ensemble the
    /// server expires it (the client then gets a new one); on a real ensemble the client is
    /// closed (its ephemeral nodes go at once, as after an expiry).
    pub fn kill(&self) {
        match &self.memory {
            Some(memory) => memory.expire(),
            None => self.client.close(),
        }
    }
}

/// The first server of a connect string, and the chroot suffix (empty when none).
pub fn first_server(hosts: &str) -> AnyResult<(SocketAddr, String)> {
    let (servers, chroot) = match hosts.find('/') {
        Some(i) => (&hosts[..i], &hosts[i..]),
        None => (hosts, ""),
    };
    let first = servers.split(',').next().unwrap_or_default().trim();
    let first = if first.contains(':') {
        first.to_string()
    } else {
        format!("{first}:2181")
    };
    let addr = first
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| format!("{first:?} does not resolve"))?;
    Ok((addr, chroot.to_string()))
}

/// Logs to stderr as `  0.123s INFO  message`, at info for the recipe (`name`) and warn for
/// the library, unless `RUST_LOG` says otherwise.
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

/// The `main` of every recipe: logging, arguments, exit status.
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
/// (`_c_…-lock-0000000003` → `lock-0000000003`).
pub fn short(path: &str) -> &str {
    let name = zk_locks::paths::node_name(path);
    if zk_locks::locks::internals::is_protected(name) {
        &name[zk_locks::locks::internals::PROTECTED_PREFIX_LEN..]
    } else {
        name
    }
}
