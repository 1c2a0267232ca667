//! `zklock`: run a command while holding a ZooKeeper lock that Curator clients share.
//!
//! The lock is taken on a worker thread (a mutex and the read/write sides are released by the
//! thread that took them), so the main thread stays free to notice signals, a lost lock and
//! the child's exit, all of which reach it as events on one channel. The main thread spawns
//! the command and lives as long as zklock (the command's parent-death signal follows it).
//! See `--help` for usage and the exit codes.
//!
//! The parts, in the order a run goes through them:
//! - [`cli`]: the options (`lexopt`), the usage text and the credentials;
//! - [`durations`]: each duration (`humantime`) checked against what it is used for;
//! - [`signals`]: SIGINT/SIGTERM/SIGHUP/SIGCHLD as events (`signal-hook`);
//! - [`connecting`]: the ZooKeeper session (credentials, ACL, TLS);
//! - [`waiting`]: acquiring on a worker thread, with `--timeout` and signals;
//! - [`supervising`]: running the command, a lost lock, the exit status;
//! - [`group`]: the command's process group, signalled as one, dying with zklock, gone by
//!   the lock's deadline even while zklock is frozen;
//! - [`holders`]: the `holders` subcommand.

mod cli;
mod connecting;
mod durations;
mod group;
mod holders;
mod signals;
mod supervising;
mod waiting;

use std::ffi::OsString;

use cli::{load_credentials, parse_cli, Cli, Usage, HELP};

/// Exit codes of zklock itself (sysexits.h where one fits); any other status is the child's.
pub(crate) mod exit {
    /// (`holders`) The lock has no participants: it is free, or there is no such path (as
    /// grep's 1: nothing matched), so that a script can test it.
    pub const NO_PARTICIPANTS: i32 = 1;
    /// Bad arguments.
    pub const USAGE: i32 = 64;
    /// No session with ZooKeeper (unreachable, bad connect string), or not allowed: refused
    /// credentials, a node whose ACL does not grant ours, an ACL that would lock us out; or
    /// the path is in use by another kind of lock (`--read`/`--write`/`--semaphore` or none).
    pub const UNAVAILABLE: i32 = 69;
    /// ZooKeeper failed while acquiring or listing (retries exhausted, session lost).
    pub const LOCK_ERROR: i32 = 70;
    /// `--timeout` passed before the lock was acquired.
    pub const TIMED_OUT: i32 = 75;
    /// The lock was lost while the command ran; the command was terminated.
    pub const LOCK_LOST: i32 = 76;
    /// The command could not be started.
    pub const CANNOT_EXECUTE: i32 = 126;
    /// The command was not found.
    pub const NOT_FOUND: i32 = 127;
    /// Killed by (or interrupted with) signal `n`: `128 + n`, as shells report it.
    pub const SIGNAL_BASE: i32 = 128;
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let cli = parse_cli(args, std::env::var("ZK_CONNECT").ok())
        .and_then(|cli| load_credentials(cli, std::env::var("ZK_AUTH").ok()));
    let cli = match cli {
        Ok(cli) => cli,
        Err(Usage(msg)) => {
            eprintln!("zklock: {msg}\nTry 'zklock --help' for more information.");
            std::process::exit(exit::USAGE);
        }
    };
    init_logging(match &cli {
        Cli::Run(args) => args.verbose,
        Cli::Holders(args) => args.verbose,
        Cli::Help | Cli::Version => 0,
    });
    let code = match cli {
        Cli::Help => {
            print!("{HELP}");
            0
        }
        Cli::Version => {
            println!("zklock {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Cli::Holders(args) => holders::holders(&args),
        Cli::Run(args) => supervising::run(args),
    };
    std::process::exit(code);
}

/// Warnings (a lost session, a dead link) reach the operator unless RUST_LOG says otherwise;
/// `-v` adds debug (`-vv` trace) for the library's targets (`zk_locks::…`) and zklock's own,
/// over whatever RUST_LOG says for them (RUST_LOG still rules every other target). Each line
/// names its target, so `RUST_LOG=zk_locks::locks=debug` picks one layer.
fn init_logging(verbose: u8) {
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"));
    logger.format_timestamp_millis().format_target(true);
    let level = match verbose {
        0 => None,
        1 => Some(log::LevelFilter::Debug),
        _ => Some(log::LevelFilter::Trace),
    };
    if let Some(level) = level {
        logger
            .filter_module("zk_locks", level)
            .filter_module("zklock", level);
    }
    logger.init();
}
