//! `zklock`: run a command while holding a ZooKeeper lock that Curator clients share.
//!
//! The lock is taken on a worker thread (a mutex and the read/write sides are released by the
//! thread that took them), so the main thread stays free to notice signals, a lost lock and
//! the child's exit. See `--help` for usage and the exit codes.

use std::ffi::OsString;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::acl::AclProvider;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::locks::{
    standard_sort_key, HeldNode, InterProcessLock, InterProcessMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreV2, LockState, READ_LOCK_NAME, WRITE_LOCK_NAME,
};
use zk_locks::{Error, SharedClient, ZkError};

/// Exit codes of zklock itself (sysexits.h where one fits); any other status is the child's.
mod exit {
    /// Bad arguments.
    pub const USAGE: i32 = 64;
    /// No session with ZooKeeper (unreachable, bad connect string), or not allowed: refused
    /// credentials, a node whose ACL does not grant ours, an ACL that would lock us out.
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

const HELP: &str = "\
zklock - run a command while holding a ZooKeeper lock (Curator-compatible)

USAGE:
    zklock [OPTIONS] PATH -- COMMAND [ARGS...]
    zklock holders [--connect HOSTS] [--session-timeout DUR] [--auth-file FILE] [--semaphore N] PATH

Acquires the lock at PATH (an InterProcessMutex by default), runs COMMAND, releases the lock
and exits with COMMAND's status. JVM processes using Curator 5.4's recipes on the same PATH
contend for the same lock.

OPTIONS:
    -c, --connect HOSTS        ZooKeeper connect string, e.g. zk1:2181,zk2:2181/chroot
                               (default: $ZK_CONNECT)
    -t, --timeout DUR          give up waiting for the lock after DUR (default: wait forever)
        --read                 take the read side of an InterProcessReadWriteLock
        --write                take the write side of an InterProcessReadWriteLock
        --semaphore N          take one lease of an InterProcessSemaphoreV2 with N leases
        --session-timeout DUR  ZooKeeper session timeout (default 10s)
        --grace DUR            after a lost lock, time between SIGTERM and SIGKILL (default 5s)
        --auth-file FILE       digest credentials `user:password` from FILE (default: $ZK_AUTH);
                               never on the command line, where `ps` shows them; the
                               command does not inherit $ZK_AUTH
        --acl MODE             ACL of the nodes zklock creates: open (default), creator-all
                               (only the same user), read-only-for-world (others may look);
                               creator-all and read-only-for-world need credentials
        --tls-ca FILE          connect with TLS (HOSTS name secureClientPorts), verifying the
                               servers against the PEM CA certificates in FILE (feature `tls`)
        --tls-cert FILE        with --tls-key FILE: present this PEM client certificate
    -h, --help                 this text
    -V, --version              the version

DUR is a number with a unit: 500ms, 10s, 2m, 1h (a bare number means seconds).

The command sees ZKLOCK_PATH (the lock path), ZKLOCK_NODE (our lock node's full path) and
ZKLOCK_FENCING_TOKEN (the node's czxid: pass it to resources that reject stale writers).

If the session is lost while the command runs (the lock may now be held by someone else), the
command gets SIGTERM, then SIGKILL after the grace period. A suspended connection alone does
not count as lost. SIGINT/SIGTERM while waiting for the lock withdraw from the queue; while
the command runs they are forwarded to it.

`holders` prints the lock's participants in queue order: state (holder/waiting), kind, node
name and node data (zklock and zk-locks store `<host> <pid>`, Curator its IP address). For a
semaphore, --semaphore N tells the holders from the one lease waiting for room; without it
every lease is listed as a holder.

EXIT STATUS:
    0-255  the command's own status
    64     usage error
    69     could not connect to ZooKeeper, or not allowed (credentials refused, the lock's
           ACL does not grant our user: a wrong password?)
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
    zklock holders /locks/nightly-report
    ZK_AUTH=deploy:s3cret zklock --acl creator-all /locks/deploy -- ./deploy.sh
    RUST_LOG=debug zklock /locks/x -- true
";

/// Which recipe to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore(usize),
}

/// Credentials and the ACL of what zklock creates.
#[derive(Debug, Clone, Default)]
struct Security {
    /// `--auth-file`, read by [`load_credentials`].
    auth_file: Option<String>,
    /// Digest `user:password`, from the file or $ZK_AUTH.
    credentials: Option<String>,
    /// `--acl`.
    acl: AclMode,
    /// `--tls-ca`, `--tls-cert`, `--tls-key`: PEM files.
    tls_ca: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
}

/// `--acl`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum AclMode {
    #[default]
    Open,
    CreatorAll,
    ReadOnlyForWorld,
}

impl AclMode {
    fn provider(self) -> AclProvider {
        match self {
            AclMode::Open => AclProvider::open(),
            AclMode::CreatorAll => AclProvider::creator_all(),
            AclMode::ReadOnlyForWorld => AclProvider::read_only_for_world(),
        }
    }
}

#[derive(Debug)]
struct RunArgs {
    security: Security,
    connect: String,
    session_timeout: Duration,
    timeout: Option<Duration>,
    grace: Duration,
    kind: Kind,
    path: String,
    command: Vec<OsString>,
}

#[derive(Debug)]
struct HoldersArgs {
    security: Security,
    connect: String,
    session_timeout: Duration,
    semaphore: Option<usize>,
    path: String,
}

#[derive(Debug)]
enum Cli {
    Help,
    Version,
    Run(RunArgs),
    Holders(HoldersArgs),
}

/// A usage error: the message is printed with a pointer to `--help`.
#[derive(Debug)]
struct Usage(String);

fn main() {
    // Warnings (a lost session, a dead link) reach the operator unless RUST_LOG says otherwise.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp_millis()
        .init();
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
    let code = match cli {
        Cli::Help => {
            print!("{HELP}");
            0
        }
        Cli::Version => {
            println!("zklock {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Cli::Holders(args) => holders(&args),
        Cli::Run(args) => run(args),
    };
    std::process::exit(code);
}

// ---------------------------------------------------------------------------------------------
// Arguments

/// Parses a duration: `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (expected e.g. 500ms, 10s, 2m)"))?;
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "invalid duration unit in {text:?} (use ms, s, m or h)"
            ))
        }
    };
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("duration {text:?} is out of range"))
}

fn parse_cli(args: Vec<OsString>, env_connect: Option<String>) -> Result<Cli, Usage> {
    let mut args = args.into_iter();
    let mut connect = None;
    let mut session_timeout = Duration::from_secs(10);
    let mut timeout = None;
    let mut grace = Duration::from_secs(5);
    let mut kind = None;
    let mut semaphore = None;
    let mut holders_mode = false;
    let mut path = None;
    let mut command = Vec::new();
    let mut first = true;
    let mut security = Security::default();
    while let Some(arg) = args.next() {
        let text = arg
            .to_str()
            .ok_or_else(|| Usage(format!("argument {arg:?} is not valid UTF-8")))?
            .to_string();
        if first && text == "holders" {
            first = false;
            holders_mode = true;
            continue;
        }
        first = false;
        if text == "--" {
            command.extend(args.by_ref());
            break;
        }
        // `--name=value` or `--name value`.
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (text.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, Usage> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => args
                    .next()
                    .and_then(|v| v.into_string().ok())
                    .ok_or_else(|| Usage(format!("{name} needs a value"))),
            }
        };
        let mut set_kind = |k: Kind| -> Result<(), Usage> {
            if kind.replace(k).is_some_and(|old| old != k) {
                return Err(Usage(
                    "--read, --write and --semaphore exclude each other".into(),
                ));
            }
            Ok(())
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(Cli::Help),
            "-V" | "--version" => return Ok(Cli::Version),
            "-c" | "--connect" => connect = Some(value(&name)?),
            "-t" | "--timeout" => timeout = Some(parse_duration(&value(&name)?).map_err(Usage)?),
            "--session-timeout" => {
                session_timeout = parse_duration(&value(&name)?).map_err(Usage)?;
                if session_timeout.is_zero() {
                    return Err(Usage("--session-timeout must be more than 0".into()));
                }
            }
            "--grace" => grace = parse_duration(&value(&name)?).map_err(Usage)?,
            "--auth-file" => security.auth_file = Some(value(&name)?),
            "--tls-ca" => security.tls_ca = Some(value(&name)?),
            "--tls-cert" => security.tls_cert = Some(value(&name)?),
            "--tls-key" => security.tls_key = Some(value(&name)?),
            "--acl" => {
                security.acl = match value(&name)?.as_str() {
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
            "--read" => set_kind(Kind::Read)?,
            "--write" => set_kind(Kind::Write)?,
            "--semaphore" => {
                let v = value(&name)?;
                let n: usize = v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    Usage(format!(
                        "--semaphore needs a number of leases > 0, not {v:?}"
                    ))
                })?;
                semaphore = Some(n);
                set_kind(Kind::Semaphore(n))?;
            }
            _ if name.starts_with('-') && name.len() > 1 => {
                return Err(Usage(format!("unknown option {name}")))
            }
            _ => {
                if path.replace(text.clone()).is_some() {
                    return Err(Usage(format!(
                        "unexpected argument {text:?} (put the command after --)"
                    )));
                }
            }
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
        if matches!(kind, Some(Kind::Read | Kind::Write)) || timeout.is_some() {
            return Err(Usage(
                "holders takes only --connect, --session-timeout, --auth-file, --acl, --tls-* and --semaphore".into(),
            ));
        }
        return Ok(Cli::Holders(HoldersArgs {
            security,
            connect,
            session_timeout,
            semaphore,
            path,
        }));
    }
    if command.is_empty() {
        return Err(Usage("missing the COMMAND (after --)".into()));
    }
    Ok(Cli::Run(RunArgs {
        security,
        connect,
        session_timeout,
        timeout,
        grace,
        kind: kind.unwrap_or(Kind::Mutex),
        path,
        command,
    }))
}

/// Reads the digest credentials (`--auth-file`, else `$ZK_AUTH`) and checks that an ACL mode
/// that needs them has them. Never echoes the credentials.
fn load_credentials(mut cli: Cli, env_auth: Option<String>) -> Result<Cli, Usage> {
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

fn connect(
    hosts: &str,
    session_timeout: Duration,
    security: &Security,
) -> Result<Arc<NativeClient>, Error> {
    let mut options = NativeOptions::new(hosts)
        .session_timeout(session_timeout)
        .acl_provider(security.acl.provider());
    if let Some(credentials) = &security.credentials {
        options = options.auth("digest", credentials.as_bytes());
    }
    #[cfg(feature = "tls")]
    if let Some(ca) = &security.tls_ca {
        let mut tls = zk_locks::client::native::TlsOptions::from_ca_file(ca)?;
        if let (Some(cert), Some(key)) = (&security.tls_cert, &security.tls_key) {
            tls = tls.client_cert_files(cert, key)?;
        }
        options = options.tls(tls);
    }
    NativeClient::connect_with(options)
}

/// Not allowed (rather than broken): our credentials or ACL do not fit the lock.
fn not_allowed(e: &Error) -> bool {
    matches!(e, Error::NotAuthorized { .. } | Error::InvalidAcl { .. })
}

// ---------------------------------------------------------------------------------------------
// Signals

/// The last SIGINT/SIGTERM/SIGHUP received (0: none). The handler only stores it: the main
/// loop polls it, because nothing else is async-signal-safe.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signo: libc::c_int) {
    SIGNAL.store(signo, Ordering::SeqCst);
}

fn install_signal_handlers() {
    for signo in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is valid; the handler only does an atomic store, which
        // is async-signal-safe; SA_RESTART keeps other threads' system calls going.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signo, &action, std::ptr::null_mut()) != 0 {
                log::warn!("cannot install a handler for signal {signo}");
            }
        }
    }
}

fn take_signal() -> Option<i32> {
    match SIGNAL.swap(0, Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

// ---------------------------------------------------------------------------------------------
// Running a command under the lock

/// How often the main loop looks at the signal flag and the child.
const TICK: Duration = Duration::from_millis(10);

/// What the worker thread reports.
enum Event {
    Connected(Arc<NativeClient>),
    Acquired(Arc<HeldNode>),
    TimedOut,
    Failed(Error),
    /// The watcher saw the lock lost.
    Lost,
    /// The worker released the lock (after main asked).
    Released,
}

fn run(args: RunArgs) -> i32 {
    install_signal_handlers();
    let (events_tx, events) = mpsc::channel();
    let loss_tx = events_tx.clone();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let request = Request {
        security: args.security.clone(),
        hosts: args.connect.clone(),
        session_timeout: args.session_timeout,
        kind: args.kind,
        path: args.path.clone(),
        timeout: args.timeout,
    };
    let spawned = std::thread::Builder::new()
        .name("zklock-holder".into())
        .spawn(move || hold(&request, &events_tx, &release_rx));
    if let Err(e) = spawned {
        eprintln!("zklock: cannot start a thread: {e}");
        return exit::LOCK_ERROR;
    }

    // Phase 1: connect and wait for the lock, interruptibly.
    let mut client: Option<Arc<NativeClient>> = None;
    let node = loop {
        if let Some(signo) = take_signal() {
            // Closing the session deletes our node at once, so the queue moves on.
            eprintln!(
                "zklock: interrupted by signal {signo} while waiting for {}",
                args.path
            );
            if let Some(c) = &client {
                zk_locks::ZkClient::close(c.as_ref());
            }
            return exit::SIGNAL_BASE + signo;
        }
        match events.recv_timeout(TICK) {
            Ok(Event::Connected(c)) => client = Some(c),
            Ok(Event::Acquired(node)) => break node,
            Ok(Event::TimedOut) => {
                eprintln!(
                    "zklock: timed out after {:?} waiting for {}",
                    args.timeout.unwrap_or_default(),
                    args.path
                );
                close(&client);
                return exit::TIMED_OUT;
            }
            Ok(Event::Failed(e @ Error::Connect { .. })) => {
                eprintln!("zklock: {e}");
                return exit::UNAVAILABLE;
            }
            Ok(Event::Failed(e)) if not_allowed(&e) => {
                eprintln!("zklock: cannot acquire {}: {e}", args.path);
                close(&client);
                return exit::UNAVAILABLE;
            }
            Ok(Event::Failed(e)) => {
                eprintln!("zklock: cannot acquire {}: {e}", args.path);
                close(&client);
                return exit::LOCK_ERROR;
            }
            Ok(Event::Lost | Event::Released) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                eprintln!("zklock: the lock thread ended unexpectedly");
                close(&client);
                return exit::LOCK_ERROR;
            }
        }
    };
    log::info!("acquired {} as {}", args.path, node.path());

    // Phase 2: run the command; watch the lock meanwhile.
    let token = match node.fencing_token() {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "zklock: the lock {} was lost right after acquiring it: {e}",
                args.path
            );
            close(&client);
            return exit::LOCK_LOST;
        }
    };
    let mut cmd = Command::new(&args.command[0]);
    // The credentials are zklock's, not the command's.
    cmd.args(&args.command[1..])
        .env_remove("ZK_AUTH")
        .env("ZKLOCK_PATH", &args.path)
        .env("ZKLOCK_NODE", node.path())
        .env("ZKLOCK_FENCING_TOKEN", token.to_string());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("zklock: cannot run {:?}: {e}", args.command[0]);
            let _ = release_tx.send(());
            close(&client);
            return if e.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            };
        }
    };
    watch_for_loss(node.clone(), loss_tx);
    let outcome = supervise(&mut child, &events, args.grace);
    match outcome {
        Outcome::Exited(status) => {
            // The worker releases (deletes our node); closing afterwards ends the session,
            // which would delete the node anyway if the release could not.
            if release_tx.send(()).is_ok() {
                let deadline = Instant::now() + args.session_timeout;
                while let Ok(event) =
                    events.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                {
                    if matches!(event, Event::Released) {
                        break;
                    }
                }
            }
            close(&client);
            status_code(status)
        }
        Outcome::LockLost(status) => {
            eprintln!(
                "zklock: lost the lock {} (node {}) while the command ran; it was terminated ({})",
                args.path,
                node.path(),
                describe(status)
            );
            close(&client);
            exit::LOCK_LOST
        }
    }
}

enum Outcome {
    Exited(ExitStatus),
    LockLost(ExitStatus),
}

/// Waits for the child; forwards signals to it; terminates it when the lock is lost.
fn supervise(child: &mut Child, events: &Receiver<Event>, grace: Duration) -> Outcome {
    let pid = child.id() as libc::pid_t;
    loop {
        if let Some(signo) = take_signal() {
            log::info!("forwarding signal {signo} to the command");
            // SAFETY: plain kill(2) on our own unreaped child: the pid cannot be reused yet.
            unsafe { libc::kill(pid, signo) };
        }
        match child.try_wait() {
            Ok(Some(status)) => return Outcome::Exited(status),
            Ok(None) => {}
            Err(e) => {
                log::error!("waiting for the command: {e}");
            }
        }
        match events.recv_timeout(TICK) {
            Ok(Event::Lost) => return Outcome::LockLost(terminate(child, grace)),
            Ok(_) | Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {}
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`; returns the child's status.
fn terminate(child: &mut Child, grace: Duration) -> ExitStatus {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child, which is not reaped yet (try_wait returned None).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(TICK),
            _ => break,
        }
    }
    log::warn!("the command ignored SIGTERM for {grace:?}; sending SIGKILL");
    let _ = child.kill();
    match child.wait() {
        Ok(status) => status,
        Err(e) => {
            log::error!("waiting for the killed command: {e}");
            std::os::unix::process::ExitStatusExt::from_raw(libc::SIGKILL)
        }
    }
}

fn status_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signo)) => exit::SIGNAL_BASE + signo,
        (None, None) => exit::LOCK_ERROR,
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signo)) => format!("signal {signo}"),
        _ => "unknown status".into(),
    }
}

fn close(client: &Option<Arc<NativeClient>>) {
    if let Some(c) = client {
        zk_locks::ZkClient::close(c.as_ref());
    }
}

/// Reports `Event::Lost` once the held node is lost. Suspect (connection suspended) is not
/// lost yet: the session may come back, and the server keeps our node meanwhile.
fn watch_for_loss(node: Arc<HeldNode>, tx: Sender<Event>) {
    let spawned = std::thread::Builder::new()
        .name("zklock-watch".into())
        .spawn(move || loop {
            let session = node.client().session();
            let epoch = session.epoch();
            match node.wait_while_held(None) {
                LockState::Lost => {
                    let _ = tx.send(Event::Lost);
                    return;
                }
                LockState::Suspect => {
                    session.wait_for_change(epoch, None);
                }
                LockState::Held => {}
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot watch the lock for loss: {e}");
    }
}

/// What the worker is to take.
struct Request {
    security: Security,
    hosts: String,
    session_timeout: Duration,
    kind: Kind,
    path: String,
    timeout: Option<Duration>,
}

/// The worker: connects, acquires, reports, and releases when told to (on the same thread,
/// as a reentrant mutex requires). Main may stop listening at any point (it then exits).
fn hold(request: &Request, events: &Sender<Event>, release: &Receiver<()>) {
    let client = match connect(&request.hosts, request.session_timeout, &request.security) {
        Ok(c) => c,
        Err(e) => {
            let _ = events.send(Event::Failed(e));
            return;
        }
    };
    let _ = events.send(Event::Connected(client.clone()));
    let shared: SharedClient = client;
    let path = request.path.as_str();
    let result = match request.kind {
        Kind::Mutex => InterProcessMutex::new(shared, path)
            .and_then(|m| hold_lock(&m, request.timeout, events, release)),
        Kind::Read => InterProcessReadWriteLock::new(shared, path)
            .and_then(|rw| hold_lock(rw.read_lock(), request.timeout, events, release)),
        Kind::Write => InterProcessReadWriteLock::new(shared, path)
            .and_then(|rw| hold_lock(rw.write_lock(), request.timeout, events, release)),
        Kind::Semaphore(max) => InterProcessSemaphoreV2::new(shared, path, max)
            .and_then(|s| hold_lease(&s, request.timeout, events, release)),
    };
    if let Err(e) = result {
        let _ = events.send(Event::Failed(e));
    }
}

fn hold_lock<L: InterProcessLock>(
    lock: &L,
    timeout: Option<Duration>,
    events: &Sender<Event>,
    release: &Receiver<()>,
) -> Result<(), Error> {
    let acquired = match timeout {
        Some(t) => lock.acquire_timeout(t)?,
        None => lock.acquire().map(|()| true)?,
    };
    if !acquired {
        let _ = events.send(Event::TimedOut);
        return Ok(());
    }
    let Some(node) = lock.held_nodes().into_iter().next() else {
        return Err(Error::NotAcquired {
            path: "(the lock)".into(),
        });
    };
    let _ = events.send(Event::Acquired(node));
    // Main says when (or drops the sender when it exits without releasing).
    if release.recv().is_ok() {
        if let Err(e) = lock.release() {
            log::warn!("releasing the lock: {e}");
        }
        let _ = events.send(Event::Released);
    }
    Ok(())
}

fn hold_lease(
    semaphore: &InterProcessSemaphoreV2,
    timeout: Option<Duration>,
    events: &Sender<Event>,
    release: &Receiver<()>,
) -> Result<(), Error> {
    let lease = match timeout {
        Some(t) => semaphore.acquire_timeout(t)?,
        None => Some(semaphore.acquire()?),
    };
    let Some(lease) = lease else {
        let _ = events.send(Event::TimedOut);
        return Ok(());
    };
    let _ = events.send(Event::Acquired(lease.held_node().clone()));
    if release.recv().is_ok() {
        if let Err(e) = lease.close() {
            log::warn!("returning the lease: {e}");
        }
        let _ = events.send(Event::Released);
    } else {
        std::mem::forget(lease);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// `zklock holders`

/// One participant as `holders` prints it.
struct Participant {
    name: String,
    kind: &'static str,
    holder: bool,
}

fn holders(args: &HoldersArgs) -> i32 {
    let client = match connect(&args.connect, args.session_timeout, &args.security) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zklock: {e}");
            return exit::UNAVAILABLE;
        }
    };
    let code = match list_participants(client.as_ref(), &args.path, args.semaphore) {
        Ok((dir, participants)) => {
            for p in participants {
                let data = match zk_locks::ZkClient::get_data(
                    client.as_ref(),
                    &format!("{dir}/{}", p.name),
                    None,
                ) {
                    Ok((data, _)) => String::from_utf8_lossy(&data).into_owned(),
                    // Gone since the listing: it is no longer a participant.
                    Err(ZkError::NoNode) => continue,
                    Err(code) => format!("(unreadable: {code})"),
                };
                let state = if p.holder { "holder" } else { "waiting" };
                println!("{state:<8} {:<9} {}  {}", p.kind, p.name, data.trim_end());
            }
            0
        }
        Err(e) if not_allowed(&e) => {
            eprintln!("zklock: not allowed to look at {}: {e}", args.path);
            exit::UNAVAILABLE
        }
        Err(e) => {
            eprintln!("zklock: cannot list {}: {e}", args.path);
            exit::LOCK_ERROR
        }
    };
    zk_locks::ZkClient::close(client.as_ref());
    code
}

fn children(client: &dyn zk_locks::ZkClient, path: &str) -> Result<Vec<String>, Error> {
    match client.get_children(path, None) {
        Ok(c) => Ok(c),
        Err(ZkError::NoNode) => Ok(Vec::new()),
        Err(code) => Err(Error::zk("get_children", path, code)),
    }
}

/// The participants of the lock at `path` in queue order, and the directory holding them.
/// The recipe is recognised from the node names (Curator's layout): a semaphore has `leases`
/// (and `locks`), a read/write lock `__READ__`/`__WRIT__` nodes, a mutex `lock-` nodes.
fn list_participants(
    client: &dyn zk_locks::ZkClient,
    path: &str,
    semaphore: Option<usize>,
) -> Result<(String, Vec<Participant>), Error> {
    let mut names = children(client, path)?;
    if semaphore.is_some() || names.iter().any(|n| n == "leases") {
        let dir = format!("{path}/leases");
        let mut leases = children(client, &dir)?;
        leases.sort_by(|a, b| standard_sort_key(a, "lease-").cmp(standard_sort_key(b, "lease-")));
        // Without the maximum every lease node counts as held; with it, a node past the maximum
        // is the one lease waiting for room.
        let max = semaphore.unwrap_or(usize::MAX);
        let participants = leases
            .into_iter()
            .enumerate()
            .map(|(i, name)| Participant {
                name,
                kind: "lease",
                holder: i < max,
            })
            .collect();
        return Ok((dir, participants));
    }
    let rw = names
        .iter()
        .any(|n| n.contains(READ_LOCK_NAME) || n.contains(WRITE_LOCK_NAME));
    if rw {
        let key = |n: &str| -> String {
            standard_sort_key(standard_sort_key(n, READ_LOCK_NAME), WRITE_LOCK_NAME).to_string()
        };
        names.sort_by_key(|n| key(n));
        // A writer holds at the head; a reader when no writer is ahead of it. A downgrading
        // writer's read node shares the write node's sequence: both hold, in either order.
        let head_key = names.first().map(|n| key(n));
        let mut first_writer_key: Option<String> = None;
        let participants = names
            .into_iter()
            .map(|name| {
                let writer = name.contains(WRITE_LOCK_NAME);
                let k = key(&name);
                let holder = if writer {
                    head_key.as_deref() == Some(k.as_str())
                } else {
                    first_writer_key.as_deref().is_none_or(|w| k.as_str() <= w)
                };
                if writer && first_writer_key.is_none() {
                    first_writer_key = Some(k);
                }
                Participant {
                    kind: if writer { "write" } else { "read" },
                    name,
                    holder,
                }
            })
            .collect();
        return Ok((path.to_string(), participants));
    }
    names.sort_by(|a, b| standard_sort_key(a, "lock-").cmp(standard_sort_key(b, "lock-")));
    let participants = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| Participant {
            name,
            kind: "mutex",
            holder: i == 0,
        })
        .collect();
    Ok((path.to_string(), participants))
}
