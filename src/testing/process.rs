//! One ZooKeeper JVM: locating Java and the Debian jars, writing its config, spawning it so it
//! dies with the test process, and readiness polling.
//!
//! Each JVM is spawned from its own *keeper* thread that lives exactly as long as the child:
//! the child gets `PR_SET_PDEATHSIG(SIGKILL)`, which Linux ties to the spawning **thread**, so
//! a shared server started from a short-lived test thread would otherwise die with that test,
//! and a server in a `static` (never dropped) would otherwise outlive the test process.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::testing::harness::four_letter;

/// Where Debian's `zookeeper` / `libzookeeper-java` packages put the server jar. Its manifest
/// `Class-Path` names every dependency jar in `/usr/share/java`.
const DEBIAN_ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// The main class of an ensemble member (a lone server runs `ZooKeeperServerMain`).
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
/// An slf4j binding + log4j 1.2, so the server logs (to a file) instead of printing a
/// "no binding" warning.
const DEBIAN_LOG_JARS: [&str; 2] = [
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
];
/// Prefix of every temp dir this module creates (stale ones of dead processes are removed).
const TEMP_PREFIX: &str = "zk-locks-test-";

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// The `java` binary: `$JAVA_HOME/bin/java` when set, else the first `java` on `PATH`.
pub(crate) fn find_java() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let java = Path::new(&home).join("bin/java");
        if java.is_file() {
            return Some(java);
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("java"))
        .find(|p| p.is_file())
}

/// The server classpath: `$ZK_LOCKS_ZOOKEEPER_CLASSPATH` when set, else Debian's jars.
pub(crate) fn find_classpath() -> Option<String> {
    if let Ok(cp) = std::env::var("ZK_LOCKS_ZOOKEEPER_CLASSPATH") {
        if !cp.is_empty() {
            return Some(cp);
        }
    }
    if !Path::new(DEBIAN_ZOOKEEPER_JAR).is_file() {
        return None;
    }
    let mut cp = vec![DEBIAN_ZOOKEEPER_JAR.to_string()];
    if DEBIAN_LOG_JARS.iter().all(|j| Path::new(j).is_file()) {
        cp.extend(DEBIAN_LOG_JARS.iter().map(|j| j.to_string()));
    }
    Some(cp.join(":"))
}

/// Why a real server cannot run here, or `None` when Java and the jars are present.
pub(crate) fn missing_requirements() -> Option<String> {
    let mut missing = Vec::new();
    if find_java().is_none() {
        missing.push("java (apt-get install default-jre-headless)");
    }
    if find_classpath().is_none() {
        missing.push("ZooKeeper jars (apt-get install zookeeper)");
    }
    if missing.is_empty() {
        None
    } else {
        Some(format!("missing {}", missing.join(" and ")))
    }
}

/// A free TCP port on 127.0.0.1 for a server to bind later (a JVM binds it seconds after).
/// Taken below the kernel's ephemeral range, which every outgoing connection of the machine
/// (clients, proxies, other tests) draws its source port from: a port of that range can be
/// taken by a connection before the server binds it ("Address already in use"). Never the
/// same port twice in one process; checked free by binding it.
pub(crate) fn free_port() -> Result<u16> {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let ephemeral_low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const LOWEST: u16 = 10_000;
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    if ephemeral_low > LOWEST + 1_000 {
        for _ in 0..200 {
            let port = fastrand::u16(LOWEST..ephemeral_low);
            if !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                handed_out.push(port);
                return Ok(port);
            }
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io_err("binding a free port"))?;
    let port = listener
        .local_addr()
        .map_err(io_err("reading a bound port"))?
        .port();
    handed_out.push(port);
    Ok(port)
}

/// True when a start failed because a port was taken between choosing it and the server
/// binding it (another process's socket): worth starting again on new ports.
pub(crate) fn lost_a_port_race(e: &Error) -> bool {
    e.to_string().contains("Address already in use")
}

/// A fresh temp dir `zk-locks-test-<pid>-<n>-<nanos>`; first removes dirs left by dead processes.
pub(crate) fn make_temp_dir() -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    remove_stale_dirs(&base);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = base.join(format!(
        "{TEMP_PREFIX}{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
    Ok(dir)
}

fn remove_stale_dirs(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(TEMP_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if !process_alive(pid) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether a process with this pid exists (what names of a dead run's leftovers are checked by).
pub(crate) fn process_alive(pid: i32) -> bool {
    // SAFETY: kill(pid, 0) sends nothing; it fails with ESRCH when no such process exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The last `max` bytes of a log file, for error messages.
pub(crate) fn log_tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut tail = String::new();
    let _ = file.read_to_string(&mut tail);
    tail
}

/// A server's clock: `tickTime` and the follower limits counted in ticks (`initLimit`: to
/// connect to and sync with the leader; `syncLimit`: the longest silence a follower and the
/// leader allow each other before giving up on the link), and the session bounds when a test
/// states them (`None`: not written, so ZooKeeper's own, 2 and 20 ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    pub tick_time: Duration,
    pub init_limit: u32,
    pub sync_limit: u32,
    pub min_session_timeout: Option<Duration>,
    pub max_session_timeout: Option<Duration>,
}

impl Timing {
    /// Why these settings cannot make a `zoo.cfg`, if they cannot: `(setting, reason)`.
    pub(crate) fn invalid(&self) -> Option<(&'static str, &'static str)> {
        let whole_ms = |d: Duration| d.as_millis() >= 1 && d.as_millis() <= i32::MAX as u128;
        if !whole_ms(self.tick_time) {
            return Some(("tick_time", "tickTime is 1 ms to i32::MAX ms"));
        }
        if self.init_limit == 0 || self.sync_limit == 0 {
            return Some(("init_limit/sync_limit", "the limits are at least one tick"));
        }
        for (name, bound) in [
            ("min_session_timeout", self.min_session_timeout),
            ("max_session_timeout", self.max_session_timeout),
        ] {
            if bound.is_some_and(|d| !whole_ms(d)) {
                return Some((name, "a session bound is 1 ms to i32::MAX ms"));
            }
        }
        // ZooKeeper refuses to start with the least session above the longest; the defaults
        // (2 and 20 ticks) count for a bound left unstated.
        let min = self.min_session_timeout.unwrap_or(self.tick_time * 2);
        let max = self.max_session_timeout.unwrap_or(self.tick_time * 20);
        if min > max {
            return Some((
                "min_session_timeout/max_session_timeout",
                "the least session is above the longest (an unstated bound is 2 or 20 ticks)",
            ));
        }
        None
    }

    /// The `zoo.cfg` lines of the stated session bounds (none when unstated).
    fn session_bounds_cfg(&self) -> String {
        let mut cfg = String::new();
        if let Some(min) = self.min_session_timeout {
            cfg.push_str(&format!("minSessionTimeout={}\n", min.as_millis()));
        }
        if let Some(max) = self.max_session_timeout {
            cfg.push_str(&format!("maxSessionTimeout={}\n", max.as_millis()));
        }
        cfg
    }
}

impl Default for Timing {
    /// Short ticks so elections and session expiries in tests take a second, not a minute.
    fn default() -> Timing {
        Timing {
            tick_time: Duration::from_millis(500),
            init_limit: 20,
            sync_limit: 10,
            min_session_timeout: None,
            max_session_timeout: None,
        }
    }
}

/// What a node's `zoo.cfg` says besides the per-node dirs and ports.
pub(crate) struct NodeConfig {
    /// The address every port of the node binds (127.0.0.1, or its own address in its own
    /// network namespace).
    pub host: Ipv4Addr,
    /// The network namespace the JVM runs in (`ip netns exec`), if any.
    pub netns: Option<String>,
    /// `tickTime`, `initLimit`, `syncLimit`.
    pub timing: Timing,
    /// Its client port on `host`.
    pub client_port: u16,
    /// `server.N=...` lines (empty for standalone) and this node's id.
    pub quorum: Option<(u32, Vec<String>)>,
    /// A TLS `secureClientPort` on `host` (Netty connection factory, certificates made
    /// with `openssl` in the node's dir, client certificates wanted but not required).
    pub secure_port: Option<u16>,
}

/// Two Netty jars that `zookeeper.jar`'s manifest omits: without them the Netty connection
/// factory (needed for TLS) fails every connection with `NoClassDefFoundError`.
pub(crate) const DEBIAN_NETTY_JARS: [&str; 2] = [
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
];

/// One ZooKeeper JVM with its own dir (config, data, log), restartable on the same port.
pub(crate) struct Node {
    pub dir: PathBuf,
    pub host: Ipv4Addr,
    pub client_port: u16,
    netns: Option<String>,
    /// The certificates, on a TLS node.
    pub tls: Option<super::tls::TlsFiles>,
    main_class: &'static str,
    pid: Option<i32>,
    keeper: Option<JoinHandle<()>>,
    exited: Option<mpsc::Receiver<()>>,
}

impl Node {
    /// Writes the config in a fresh temp dir; does not start the JVM.
    pub fn create(config: NodeConfig) -> Result<Node> {
        let dir = make_temp_dir()?;
        let data = dir.join("data");
        fs::create_dir_all(&data).map_err(io_err("creating the data dir"))?;
        let Timing {
            tick_time,
            init_limit,
            sync_limit,
            ..
        } = config.timing;
        let mut cfg = format!(
            "tickTime={}\n\
             initLimit={init_limit}\n\
             syncLimit={sync_limit}\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress={}\n\
             maxClientCnxns=0\n\
             {}\
             4lw.commands.whitelist=*\n\
             admin.enableServer=false\n\
             forceSync=no\n\
             electionPortBindRetry=0\n",
            tick_time.as_millis(),
            data.display(),
            config.client_port,
            config.host,
            config.timing.session_bounds_cfg()
        );
        if let Some((myid, servers)) = &config.quorum {
            for line in servers {
                cfg.push_str(line);
                cfg.push('\n');
            }
            fs::write(data.join("myid"), format!("{myid}\n")).map_err(io_err("writing myid"))?;
        }
        let tls = match config.secure_port {
            None => None,
            Some(port) => {
                let tls_dir = dir.join("tls");
                fs::create_dir_all(&tls_dir).map_err(io_err("creating the tls dir"))?;
                let files = super::tls::TlsFiles::generate(&tls_dir)?;
                cfg.push_str(&format!(
                    "secureClientPort={port}\n\
                     secureClientPortAddress={}\n\
                     serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                     ssl.keyStore.location={}\n\
                     ssl.keyStore.type=PEM\n\
                     ssl.trustStore.location={}\n\
                     ssl.trustStore.type=PEM\n\
                     ssl.clientAuth=want\n",
                    config.host,
                    files.server_store.display(),
                    files.ca.display()
                ));
                Some(files)
            }
        };
        fs::write(dir.join("zoo.cfg"), cfg).map_err(io_err("writing zoo.cfg"))?;
        // Everything to stdout, which goes to zookeeper.log in this dir (never the test output).
        fs::write(
            dir.join("log4j.properties"),
            "log4j.rootLogger=INFO, CONSOLE\n\
             log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n\
             log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n\
             log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] %-5p [%t] %c{1}: %m%n\n",
        )
        .map_err(io_err("writing log4j.properties"))?;
        Ok(Node {
            dir,
            host: config.host,
            client_port: config.client_port,
            netns: config.netns,
            tls,
            main_class: if config.quorum.is_some() {
                QUORUM_MAIN
            } else {
                "org.apache.zookeeper.server.ZooKeeperServerMain"
            },
            pid: None,
            keeper: None,
            exited: None,
        })
    }

    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::from((self.host, self.client_port))
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("zookeeper.log")
    }

    /// True while the JVM runs.
    pub fn is_running(&self) -> bool {
        match &self.exited {
            Some(rx) => matches!(rx.try_recv(), Err(mpsc::TryRecvError::Empty)),
            None => false,
        }
    }

    /// True when the JVM was spawned and exited on its own ([`Node::kill`] forgets it).
    pub fn died(&self) -> bool {
        self.exited.is_some() && !self.is_running()
    }

    /// Spawns the JVM (from a keeper thread, see the module docs). Does not wait for readiness.
    pub fn spawn(&mut self) -> Result<()> {
        if self.is_running() {
            return Ok(());
        }
        self.reap();
        let java = find_java().ok_or_else(|| Error::Connect {
            hosts: self.client_addr().to_string(),
            reason: missing_requirements().unwrap_or_default(),
            source: None,
        })?;
        let classpath = find_classpath().ok_or_else(|| Error::Connect {
            hosts: self.client_addr().to_string(),
            reason: missing_requirements().unwrap_or_default(),
            source: None,
        })?;
        let netty = if self.tls.is_some() {
            DEBIAN_NETTY_JARS.iter().map(|j| format!(":{j}")).collect()
        } else {
            String::new()
        };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(io_err("opening the server log"))?;
        let log2 = log.try_clone().map_err(io_err("cloning the log handle"))?;
        let mut command = match &self.netns {
            None => Command::new(java),
            Some(ns) => {
                let mut ip = Command::new(super::partition::ip_command());
                // `ip netns exec` execs java in place (no fork): the pid is the JVM's.
                ip.args(["netns", "exec", ns]).arg(java);
                ip
            }
        };
        if self.main_class == QUORUM_MAIN {
            // An election whose notices go unanswered polls again after a wait that doubles
            // from 200 ms up to `maxNotificationInterval` (default 60 s), and a silently
            // dropped connect waits `cnxTimeout` (default 5 s). With the defaults an election
            // after a leader kill once took 31 s on a loaded CI machine, past every session;
            // a lost notice and its back-off fit that. Both bounded to 2 s, so that an
            // election or a rejoin waits seconds at most between its tries.
            command
                .arg("-Dzookeeper.cnxTimeout=2000")
                .arg("-Dzookeeper.fastleader.maxNotificationInterval=2000");
        }
        command
            .arg("-Xmx256m")
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg("-Djava.net.preferIPv4Stack=true")
            .arg("-Dzookeeper.jmx.log4j.disable=true")
            // Containers emptied of their children are reaped within a second, not a minute.
            .arg("-Dznode.container.checkIntervalMs=500")
            .arg("-cp")
            .arg(format!("{}:{}{}", self.dir.display(), classpath, netty))
            .arg(self.main_class)
            .arg(self.dir.join("zoo.cfg"))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let (pid_tx, pid_rx) = mpsc::channel();
        let (exit_tx, exit_rx) = mpsc::channel::<()>();
        let keeper = std::thread::Builder::new()
            .name(format!("zk-server-{}", self.client_addr()))
            .spawn(move || match command.spawn() {
                Ok(mut child) => {
                    let _ = pid_tx.send(Ok(child.id() as i32));
                    let _ = child.wait();
                    drop(exit_tx);
                }
                Err(e) => {
                    let _ = pid_tx.send(Err(e));
                }
            })
            .map_err(io_err("spawning the server keeper thread"))?;
        let pid = pid_rx
            .recv()
            .map_err(|_| Error::Io {
                context: "server keeper thread died".into(),
                source: std::io::Error::other("no pid"),
            })?
            .map_err(io_err("spawning java"))?;
        self.pid = Some(pid);
        self.keeper = Some(keeper);
        self.exited = Some(exit_rx);
        Ok(())
    }

    /// SIGKILLs the JVM and waits for it to exit. Keeps the data.
    pub fn kill(&mut self) {
        if let Some(pid) = self.pid {
            if self.is_running() {
                // SAFETY: plain kill(2) on our own child's pid, still unreaped (the keeper
                // thread reaps it only after it exits).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        self.reap();
    }

    /// Stops (`SIGSTOP`) or resumes (`SIGCONT`) the JVM: a frozen
    /// member keeps its sockets open and answers nothing.
    pub fn set_frozen(&self, frozen: bool) {
        if let Some(pid) = self.pid {
            if self.is_running() {
                let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
                // SAFETY: plain kill(2) on our own child's pid, still unreaped.
                unsafe {
                    libc::kill(pid, signal);
                }
            }
        }
    }

    fn reap(&mut self) {
        if let Some(keeper) = self.keeper.take() {
            let _ = keeper.join();
        }
        self.pid = None;
        self.exited = None;
    }

    /// Waits until `ready(reply to cmd)` holds, the JVM dies, or the deadline passes.
    pub fn wait_until(
        &self,
        cmd: &str,
        ready: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = crate::testing::deadline_after(timeout);
        loop {
            if !self.is_running() {
                return Err(self.startup_error("the server process exited".into()));
            }
            let last = match four_letter(self.client_addr(), cmd) {
                Ok(reply) if ready(&reply) => return Ok(()),
                Ok(reply) => reply,
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(self.startup_error(format!(
                    "not ready within {timeout:?} (last {cmd:?} reply: {last:?})"
                )));
            }
            // Polling a child process for readiness: there is nothing to wait on instead.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until `port` on the node's host accepts a TCP connection, the JVM dies, or the deadline
    /// passes.
    pub fn wait_for_port(&self, port: u16, timeout: Duration) -> Result<()> {
        let deadline = crate::testing::deadline_after(timeout);
        let addr = SocketAddr::from((self.host, port));
        loop {
            if !self.is_running() {
                return Err(self.startup_error("the server process exited".into()));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.startup_error(format!("port {port} not open within {timeout:?}")));
            }
            // Polling a child process for readiness: there is nothing to wait on instead.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn startup_error(&self, reason: String) -> Error {
        Error::Connect {
            hosts: self.client_addr().to_string(),
            reason: format!(
                "{reason}; server log {} ends with:\n{}",
                self.log_path().display(),
                log_tail(&self.log_path(), 3000)
            ),
            source: None,
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests;
