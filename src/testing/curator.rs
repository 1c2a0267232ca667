//! The JVM side of interoperability tests and benchmarks: compiles small Java programs against
//! Debian's Curator 5.4 jars (`apt-get install libcurator-recipes-java`) and runs them.
//!
//! `ZK_LOCKS_CURATOR_CLASSPATH` overrides the classpath of Curator and its dependencies.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// Debian's jars that a Curator lock client needs at compile and run time.
const DEBIAN_JARS: &[&str] = &[
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "guava.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
];

const JAR_DIR: &str = "/usr/share/java";

/// The classpath of Curator and its dependencies, or what is missing.
pub fn classpath() -> std::result::Result<String, String> {
    if let Ok(cp) = std::env::var("ZK_LOCKS_CURATOR_CLASSPATH") {
        return Ok(cp);
    }
    let mut parts = Vec::new();
    for jar in DEBIAN_JARS {
        let p = Path::new(JAR_DIR).join(jar);
        if !p.exists() {
            return Err(format!(
                "{} is missing (apt-get install libcurator-recipes-java)",
                p.display()
            ));
        }
        parts.push(p.display().to_string());
    }
    if which("javac").is_none() {
        return Err("javac is missing (apt-get install default-jdk-headless)".into());
    }
    Ok(parts.join(":"))
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// Whether Curator tests can run here: like [`super::require_server`], a skip note (`false`)
/// when Java or the jars are missing, and a panic instead when `ZK_LOCKS_REQUIRE_SERVER=1`.
pub fn require_curator() -> bool {
    match classpath() {
        Ok(_) => super::require_server(),
        Err(missing) if super::server_required() => panic!(
            "{}=1 but Curator cannot run here: {missing}. Run ./scripts/test.sh, which installs it.",
            super::REQUIRE_SERVER_ENV
        ),
        Err(missing) => {
            eprintln!("skipping: no Curator ({missing})");
            false
        }
    }
}

/// Compiles `sources` into `out_dir` with `javac` against Curator's classpath.
pub fn compile(sources: &[PathBuf], out_dir: &Path) -> Result<()> {
    let cp = classpath().map_err(|reason| Error::InvalidArgument {
        name: "curator classpath",
        reason,
    })?;
    std::fs::create_dir_all(out_dir).map_err(|source| Error::Io {
        context: format!("creating {}", out_dir.display()),
        source,
    })?;
    let output = Command::new("javac")
        .arg("-nowarn")
        .arg("-cp")
        .arg(&cp)
        .arg("-d")
        .arg(out_dir)
        .args(sources)
        .output()
        .map_err(|source| Error::Io {
            context: "running javac".into(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::InvalidArgument {
            name: "java sources",
            reason: format!("javac failed: {}", String::from_utf8_lossy(&output.stderr)),
        });
    }
    Ok(())
}

/// A `java` command running `main_class` from `class_dir` with Curator on the classpath.
pub fn java(class_dir: &Path, main_class: &str) -> Result<Command> {
    let cp = classpath().map_err(|reason| Error::InvalidArgument {
        name: "curator classpath",
        reason,
    })?;
    let mut cmd = Command::new("java");
    cmd.arg("-cp")
        .arg(format!("{}:{cp}", class_dir.display()))
        .arg(main_class);
    Ok(cmd)
}

/// As [`java`], with the two Netty jars that `zookeeper.jar`'s manifest omits on the class
/// path: a ZooKeeper client over TLS (`ClientCnxnSocketNetty`) needs them on Debian.
pub fn java_tls(class_dir: &Path, main_class: &str) -> Result<Command> {
    let cp = classpath().map_err(|reason| Error::InvalidArgument {
        name: "curator classpath",
        reason,
    })?;
    let netty: String = super::process::DEBIAN_NETTY_JARS
        .iter()
        .map(|jar| format!(":{jar}"))
        .collect();
    let mut cmd = Command::new("java");
    cmd.arg("-cp")
        .arg(format!("{}:{cp}{netty}", class_dir.display()))
        .arg(main_class);
    Ok(cmd)
}
