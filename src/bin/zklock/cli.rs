//! The command line: options (parsed with `lexopt`: `-t30s`, `-t 30s`, `--timeout=30s` alike),
//! the usage text and digest credentials; the durations are checked in [`durations`].
//!
//! Parsing never touches the network; a bad argument is a [`Usage`] error, printed with a
//! pointer to `--help` (exit status 64).

use std::ffi::OsString;
use std::time::Duration;

use zk_locks::client::acl::AclProvider;

use crate::durations;

pub(crate) const HELP: &str = "\
zklock - run a command while holding a ZooKeeper lock (Curator-compatible)

USAGE:
    zklock [OPTIONS] PATH -- COMMAND [ARGS...]
    zklock --elect [--id ID] [OPTIONS] PATH -- COMMAND [ARGS...]
    zklock [OPTIONS] holders [--semaphore N] [--json] PATH

Options go before or after the subcommand and PATH (`zklock -c zk1:2181 holders /p` and
`zklock holders /p -c zk1:2181` alike); everything after `--` is the command.

Acquires the lock at PATH (an InterProcessMutex by default), runs COMMAND, releases the lock
and exits with COMMAND's status. JVM processes using Curator 5.4's recipes on the same PATH
contend for the same lock. One PATH is one kind of lock: a PATH in use by another kind (a
mutex, --read/--write, --semaphore) is refused (exit 69), as the kinds do not exclude each
other.

With --elect, zklock is an active/passive daemon: it runs COMMAND each time it is elected
leader of PATH, and queues again when COMMAND exits or leadership is lost, until stopped by
SIGINT/SIGTERM/SIGHUP. The election is Curator 5.4's LeaderSelector's (a mutex whose nodes
hold the participant id), so zklock, zk-locks and Curator selectors elect one leader among
them.

OPTIONS:
    -c, --connect HOSTS        ZooKeeper connect string, e.g. zk1:2181,zk2:2181/chroot
                               (default: $ZK_CONNECT)
    -t, --timeout DUR          give up waiting for the lock after DUR (default: wait forever)
        --read                 take the read side of an InterProcessReadWriteLock
        --write                take the write side of an InterProcessReadWriteLock
        --semaphore N          take one lease of an InterProcessSemaphoreV2 with N leases
        --elect                run COMMAND whenever elected leader, queueing again after each
                               run (a LeaderSelector election), until stopped
        --id ID                (--elect) the participant id stored in our node (default,
                               and for an empty ID: `<host> <pid>`); Curator's getLeader()
                               names it
        --session-timeout DUR  ZooKeeper session timeout (default 10s)
        --tick-time DUR        the ensemble's tickTime (zoo.cfg): the proof that keeps the lock
                               then needs no assumption on the servers' session bounds; state
                               it when minSessionTimeout is below two ticks (default: assumed
                               at most half the session timeout, ZooKeeper's own bounds)
        --connect-timeout DUR  give up connecting (exit 69) after DUR (default: the session
                               timeout); servers that refuse are retried until then
        --grace DUR            after a lost lock, time between SIGTERM and SIGKILL (default 5s)
        --foreground           keep the command in zklock's process group, so that it may
                               read from the terminal (as timeout --foreground); signals
                               then reach the command alone, not the processes it starts
        --auth-file FILE       digest credentials `user:password` from FILE (default: $ZK_AUTH);
                               never on the command line, where `ps` shows them; the
                               command does not inherit $ZK_AUTH
        --acl MODE             ACL of the nodes zklock creates: open (default), creator-all
                               (only the same user), read-only-for-world (others may look);
                               creator-all and read-only-for-world need credentials
        --tls-ca FILE          connect with TLS (HOSTS name secureClientPorts), verifying the
                               servers against the PEM CA certificates in FILE (feature `tls`)
        --tls-cert FILE        with --tls-key FILE: present this PEM client certificate
    -v, --verbose              debug logging of zk_locks and zklock (as RUST_LOG=zk_locks=debug,
                               on top of RUST_LOG); -vv: trace
        --json                 (holders) one JSON object per line, see below
    -h, --help                 this text
    -V, --version              the version

DUR is a duration: 500ms, 10s, 1m30s, 2h (a bare number means seconds); --timeout and --grace
up to 365days, --connect-timeout from 1ms to 365days, --session-timeout and --tick-time from
1ms to about 24 days. Values attach as -t30s,
-t=30s or --timeout=30s.

The command sees ZKLOCK_PATH (the lock path), ZKLOCK_NODE (our lock node's full path) and
ZKLOCK_FENCING_TOKEN (the node's czxid: pass it to resources that reject stale writers; with
--elect, the leader's term, larger for every new leader).

With --elect, each run follows the rules above, then: when COMMAND exits by itself, or
leadership is lost (COMMAND terminated as a lost lock is), zklock gives up leadership, queues
again (on a new session) and runs COMMAND again when elected. A stop signal while waiting
(or between two runs) withdraws from the queue and exits 128+N; while COMMAND runs it is
forwarded, and zklock exits with COMMAND's status once it ends, without queueing again. A command that cannot be
started (126, 127) or a ZooKeeper failure (69, 70) also ends zklock.

The command runs in a process group of its own, and every signal zklock sends goes to the
whole group (the command and the helpers it starts). If the lock is lost while the command
runs (the session expired, or someone deleted our lock node: the lock may now be held by
someone else), the group gets SIGTERM, then SIGKILL once the command exits or after the grace
period, and zklock exits 76. A short suspension costs nothing, but a lock that stays suspect
(the link down, or no contact with the ensemble's leader proven: a member cut off from the
others still answers pings) is given up before its session could expire on the leader: the
group gets SIGTERM a sixth of the session timeout before that moment and SIGKILL at it,
whatever --grace says, and zklock exits 76.
SIGINT/SIGTERM/SIGHUP while waiting for the lock withdraw from the queue; while the command
runs they are forwarded to its group. On Linux the group is killed if zklock dies (kill -9
included), and by the moment its session could expire even while zklock itself is stopped
(SIGSTOP, a debugger, a frozen cgroup). Out of reach: a process that leaves the group (setsid, daemons). Without
--foreground the command is not the terminal's foreground job: reading from the terminal
stops it (SIGTTIN).

`holders` prints the lock's participants in queue order: state (holder/waiting; leader for
a LeaderLatch's `latch-` nodes), kind (each node's own: a PATH holding several kinds lists
each kind's queue), node name and node data (zklock and zk-locks store `<host> <pid>`,
Curator its IP address; in an election, the participant id). A LeaderSelector's election
(zklock --elect) is a mutex: its holder is the leader. For a
semaphore, --semaphore N tells the holders from the one lease waiting for room; without it
every lease is listed as a holder. A lock with no participants (free, or no such path) lists
nothing, says so on stderr and exits 1, as grep does when nothing matches.

`holders --json` prints one JSON object per participant and line, in queue order, with the
keys position (0 first), node (the node's name), path, kind (mutex, read, write, lease, latch),
is_holder, session_id (the node's owner in hex, as ZooKeeper prints it: 0x...), data and
data_encoding: the node's data as text when it is UTF-8 (data_encoding utf-8), else as
lower-case hex (data_encoding hex).

Log lines go to stderr with their target: zk_locks::locks (queued, acquired with the wait,
released with the hold time, suspect, lost: each with node and session id),
zk_locks::client::native (connections, the session), zk_locks::session (state changes),
zklock (the command's life). RUST_LOG=zk_locks::locks=debug selects one layer.

EXIT STATUS:
    0-255  the command's own status
    0      (holders) the participants were listed
    1      (holders) the lock has no participants (it is free, or no node at PATH)
    64     usage error
    69     could not connect to ZooKeeper, or not allowed (credentials refused, the lock's
           ACL does not grant our user: a wrong password?; with --acl creator-all or
           read-only-for-world, a lock directory that lets others create or delete nodes),
           or PATH is in use by another kind of lock
    70     ZooKeeper error while acquiring or listing
    75     timed out waiting for the lock
    76     the lock was lost while the command ran (it was terminated)
    126    the command could not be executed
    127    the command was not found
    128+N  zklock was interrupted by signal N while waiting, or the command died of signal N

EXAMPLES:
    export ZK_CONNECT=zk1:2181,zk2:2181,zk3:2181
    zklock /locks/nightly-report -- ./make-report.sh
    zklock --timeout 30s /locks/db-migration -- ./migrate up
    zklock --semaphore 3 /pools/encoder -- ffmpeg -i in.mp4 out.webm
    zklock --read /locks/catalog -- ./export-catalog
    zklock --elect --id \"$(hostname)\" /elections/scheduler -- ./scheduler
    zklock holders /locks/nightly-report || echo 'the lock is free'
    zklock --connect-timeout 2s holders /locks/nightly-report
    ZK_AUTH=deploy:s3cret zklock --acl creator-all /locks/deploy -- ./deploy.sh
    RUST_LOG=debug zklock /locks/x -- true
";

/// Which recipe to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore(usize),
}

/// Credentials and the ACL of what zklock creates.
#[derive(Debug, Clone, Default)]
pub(crate) struct Security {
    /// `--auth-file`, read by [`load_credentials`].
    pub(crate) auth_file: Option<String>,
    /// Digest `user:password`, from the file or $ZK_AUTH.
    pub(crate) credentials: Option<String>,
    /// `--acl`.
    pub(crate) acl: AclMode,
    /// `--tls-ca`, `--tls-cert`, `--tls-key`: PEM files.
    pub(crate) tls_ca: Option<String>,
    pub(crate) tls_cert: Option<String>,
    pub(crate) tls_key: Option<String>,
}

/// `--acl`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum AclMode {
    #[default]
    Open,
    CreatorAll,
    ReadOnlyForWorld,
}

impl AclMode {
    pub(crate) fn provider(self) -> AclProvider {
        match self {
            AclMode::Open => AclProvider::open(),
            AclMode::CreatorAll => AclProvider::creator_all(),
            AclMode::ReadOnlyForWorld => AclProvider::read_only_for_world(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct RunArgs {
    pub(crate) security: Security,
    pub(crate) connect: String,
    pub(crate) session_timeout: Duration,
    /// `--tick-time`: the ensemble's `tickTime`, when stated.
    pub(crate) tick_time: Option<Duration>,
    /// `--connect-timeout` (`None`: the session timeout).
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) grace: Duration,
    /// `--foreground`: the command stays in zklock's process group.
    pub(crate) foreground: bool,
    /// `--elect`: run the command whenever elected, queueing again after each run.
    pub(crate) elect: bool,
    /// `--id`: the participant id stored in our node (`--elect`).
    pub(crate) id: Option<String>,
    pub(crate) kind: Kind,
    pub(crate) path: String,
    pub(crate) command: Vec<OsString>,
    /// `-v` given this many times.
    pub(crate) verbose: u8,
}

#[derive(Debug)]
pub(crate) struct HoldersArgs {
    pub(crate) security: Security,
    pub(crate) connect: String,
    pub(crate) session_timeout: Duration,
    /// `--tick-time`: the ensemble's `tickTime`, when stated.
    pub(crate) tick_time: Option<Duration>,
    /// `--connect-timeout` (`None`: the session timeout).
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) semaphore: Option<usize>,
    pub(crate) path: String,
    /// `--json`: one JSON object per participant.
    pub(crate) json: bool,
    /// `-v` given this many times.
    pub(crate) verbose: u8,
}

#[derive(Debug)]
pub(crate) enum Cli {
    Help,
    Version,
    Run(RunArgs),
    Holders(HoldersArgs),
}

/// A usage error: the message is printed with a pointer to `--help`.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

pub(crate) fn parse_cli(args: Vec<OsString>, env_connect: Option<String>) -> Result<Cli, Usage> {
    use lexopt::Arg::{Long, Short, Value};
    use lexopt::ValueExt;
    let usage = |e: lexopt::Error| Usage(e.to_string());
    let mut parser = lexopt::Parser::from_args(args);
    let mut connect = None;
    let mut session_timeout = Duration::from_secs(10);
    let mut tick_time = None;
    let mut connect_timeout = None;
    let mut timeout = None;
    let mut grace = Duration::from_secs(5);
    let mut foreground = false;
    let mut elect = false;
    let mut id = None;
    let mut kind = None;
    let mut semaphore = None;
    let mut holders_mode = false;
    let mut path = None;
    let mut command = Vec::new();
    let mut security = Security::default();
    let mut verbose = 0u8;
    let mut json = false;
    loop {
        // A `--` where an option or the PATH may stand starts the command (lexopt would take
        // the rest as plain values, which we could not tell from a misplaced command).
        if let Ok(mut raw) = parser.raw_args() {
            if raw.peek().is_some_and(|a| a == "--") {
                raw.next();
                command.extend(raw);
                break;
            }
        }
        let Some(arg) = parser.next().map_err(usage)? else {
            break;
        };
        let mut set_kind = |k: Kind| -> Result<(), Usage> {
            if kind.replace(k).is_some_and(|old| old != k) {
                return Err(Usage(
                    "--read, --write and --semaphore exclude each other".into(),
                ));
            }
            Ok(())
        };
        // Every option value as UTF-8 text.
        let value = |parser: &mut lexopt::Parser| -> Result<String, Usage> {
            parser.value().and_then(|v| v.string()).map_err(usage)
        };
        match arg {
            Short('h') | Long("help") => return Ok(Cli::Help),
            Short('V') | Long("version") => return Ok(Cli::Version),
            Short('c') | Long("connect") => connect = Some(value(&mut parser)?),
            Short('t') | Long("timeout") => {
                let text = value(&mut parser)?;
                timeout = Some(durations::wait("--timeout", &text).map_err(Usage)?);
            }
            Long("session-timeout") => {
                let text = value(&mut parser)?;
                session_timeout =
                    durations::session_timeout("--session-timeout", &text).map_err(Usage)?;
            }
            Long("tick-time") => {
                let text = value(&mut parser)?;
                tick_time = Some(durations::session_timeout("--tick-time", &text).map_err(Usage)?);
            }
            Long("connect-timeout") => {
                let text = value(&mut parser)?;
                connect_timeout =
                    Some(durations::connect_timeout("--connect-timeout", &text).map_err(Usage)?);
            }
            Long("grace") => {
                let text = value(&mut parser)?;
                grace = durations::wait("--grace", &text).map_err(Usage)?;
            }
            Long("foreground") => foreground = true,
            Long("elect") => elect = true,
            Long("id") => id = Some(value(&mut parser)?),
            Short('v') | Long("verbose") => verbose = verbose.saturating_add(1),
            Long("json") => json = true,
            Long("auth-file") => security.auth_file = Some(value(&mut parser)?),
            Long("tls-ca") => security.tls_ca = Some(value(&mut parser)?),
            Long("tls-cert") => security.tls_cert = Some(value(&mut parser)?),
            Long("tls-key") => security.tls_key = Some(value(&mut parser)?),
            Long("acl") => {
                security.acl = match value(&mut parser)?.as_str() {
                    "open" => AclMode::Open,
                    "creator-all" => AclMode::CreatorAll,
                    "read-only-for-world" => AclMode::ReadOnlyForWorld,
                    other => {
                        return Err(Usage(format!(
                            "--acl must be open, creator-all or read-only-for-world, not {other:?}"
                        )))
                    }
                }
            }
            Long("read") => set_kind(Kind::Read)?,
            Long("write") => set_kind(Kind::Write)?,
            Long("semaphore") => {
                let v = value(&mut parser)?;
                let n: usize = v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    Usage(format!(
                        "--semaphore needs a number of leases > 0, not {v:?}"
                    ))
                })?;
                semaphore = Some(n);
                set_kind(Kind::Semaphore(n))?;
            }
            Value(v) => {
                let text = v
                    .into_string()
                    .map_err(|v| Usage(format!("argument {v:?} is not valid UTF-8")))?;
                // The subcommand stands where the first non-option does, wherever the
                // options are (git's and kubectl's rule); a PATH is absolute, never `holders`.
                if !holders_mode && path.is_none() && text == "holders" {
                    holders_mode = true;
                } else if path.replace(text.clone()).is_some() {
                    return Err(Usage(format!(
                        "unexpected argument {text:?} (put the command after --)"
                    )));
                }
            }
            other => return Err(usage(other.unexpected())),
        }
    }
    let connect = connect
        .or(env_connect)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            Usage("no ZooKeeper connect string: use --connect HOSTS or set ZK_CONNECT".into())
        })?;
    let path = path.ok_or_else(|| Usage("missing the lock PATH".into()))?;
    zk_locks::paths::validate_path(&path).map_err(|e| Usage(e.to_string()))?;
    if path == "/" {
        return Err(Usage("the lock PATH needs its own directory, not /".into()));
    }
    if holders_mode {
        if !command.is_empty() {
            return Err(Usage("holders takes no command".into()));
        }
        if matches!(kind, Some(Kind::Read | Kind::Write))
            || timeout.is_some()
            || foreground
            || elect
            || id.is_some()
        {
            return Err(Usage(
                "holders takes only --connect, --session-timeout, --tick-time, --connect-timeout, --auth-file, --acl, --tls-*, --semaphore, --json and -v".into(),
            ));
        }
        return Ok(Cli::Holders(HoldersArgs {
            security,
            connect,
            session_timeout,
            tick_time,
            connect_timeout,
            semaphore,
            path,
            json,
            verbose,
        }));
    }
    if command.is_empty() {
        return Err(Usage("missing the COMMAND (after --)".into()));
    }
    if json {
        return Err(Usage("--json is an option of holders".into()));
    }
    if id.is_some() && !elect {
        return Err(Usage("--id is an option of --elect".into()));
    }
    if elect && (kind.is_some() || timeout.is_some()) {
        return Err(Usage(
            "--elect runs an election: not with --read, --write, --semaphore or --timeout".into(),
        ));
    }
    Ok(Cli::Run(RunArgs {
        security,
        connect,
        session_timeout,
        tick_time,
        connect_timeout,
        timeout,
        grace,
        foreground,
        elect,
        id,
        kind: kind.unwrap_or(Kind::Mutex),
        path,
        command,
        verbose,
    }))
}

/// Reads the digest credentials (`--auth-file`, else `$ZK_AUTH`) and checks that an ACL mode
/// that needs them has them. Never echoes the credentials.
pub(crate) fn load_credentials(mut cli: Cli, env_auth: Option<String>) -> Result<Cli, Usage> {
    let security = match &mut cli {
        Cli::Run(args) => &mut args.security,
        Cli::Holders(args) => &mut args.security,
        Cli::Help | Cli::Version => return Ok(cli),
    };
    let credentials = match &security.auth_file {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| Usage(format!("cannot read --auth-file {file:?}: {e}")))?
                .trim_end_matches(['\r', '\n'])
                .to_string(),
        ),
        None => env_auth.filter(|a| !a.is_empty()),
    };
    if let Some(c) = &credentials {
        if c.split_once(':').is_none_or(|(user, _)| user.is_empty()) {
            return Err(Usage("credentials must be `user:password` (digest)".into()));
        }
    }
    if security.tls_ca.is_none() && (security.tls_cert.is_some() || security.tls_key.is_some()) {
        return Err(Usage("--tls-cert and --tls-key need --tls-ca".into()));
    }
    if security.tls_cert.is_some() != security.tls_key.is_some() {
        return Err(Usage("--tls-cert and --tls-key go together".into()));
    }
    if cfg!(not(feature = "tls")) && security.tls_ca.is_some() {
        return Err(Usage(
            "this zklock was built without TLS (cargo feature `tls`)".into(),
        ));
    }
    if security.acl != AclMode::Open && credentials.is_none() {
        return Err(Usage(
            "--acl creator-all and read-only-for-world need credentials: --auth-file FILE or $ZK_AUTH"
                .into(),
        ));
    }
    security.credentials = credentials;
    Ok(cli)
}
