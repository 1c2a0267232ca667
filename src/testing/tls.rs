//! Certificates for a TLS [`TestingServer`](super::TestingServer), made with the `openssl`
//! command at start-up (EC P-256, valid two days): a CA, the server's certificate (SAN
//! `IP:127.0.0.1, DNS:localhost`), a client certificate, and an unrelated CA that verifies
//! nothing here (for wrong-CA tests). All PEM, no passwords (ZooKeeper's PEM stores need none).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::process::io_err;
use super::TestingServer;
use crate::error::{Error, Result};

/// One TLS server per test process ([`TestingServer::start_tls`]), started on first use and
/// never stopped, as [`shared_server`](super::shared_server) is for plaintext (same skip-or-fail
/// rule), with the same session bounds (up to
/// [`SHARED_MAX_SESSION_TIMEOUT`](super::SHARED_MAX_SESSION_TIMEOUT)). Its plain port works
/// too: tests expire sessions through it.
pub fn shared_tls_server() -> Option<&'static TestingServer> {
    static SERVER: OnceLock<Option<TestingServer>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            if !super::require_server() {
                return None;
            }
            match TestingServer::builder()
                .tls(true)
                .max_session_timeout(super::SHARED_MAX_SESSION_TIMEOUT)
                .start()
            {
                Ok(server) => Some(server),
                Err(e) => panic!("could not start the shared TLS ZooKeeper test server: {e}"),
            }
        })
        .as_ref()
}

/// The PEM files of a TLS test server.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA that signed the server and client certificates.
    pub ca: PathBuf,
    /// A CA that signed nothing here.
    pub other_ca: PathBuf,
    /// The client certificate.
    pub client_cert: PathBuf,
    /// The client's private key (PKCS#8).
    pub client_key: PathBuf,
    /// The server's key store: its PKCS#8 key, then its certificate (SAN `IP:127.0.0.1,
    /// DNS:localhost`), as ZooKeeper's PEM key store takes them; a scripted TLS server in a
    /// test reads both from it.
    pub server_store: PathBuf,
}

impl TlsFiles {
    /// Makes a new set of certificates in `dir` (which must exist) with the `openssl`
    /// command: for a scripted TLS server of a test, as [`TestingServer::start_tls`] does for
    /// a real one.
    pub fn generate(dir: &Path) -> Result<TlsFiles> {
        generate(dir)
    }
}

fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(io_err("running openssl (apt-get install openssl)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Io {
            context: format!("openssl {}", args.join(" ")),
            source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
        })
    }
}

const EC: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];

fn self_signed_ca(dir: &Path, name: &str) -> Result<()> {
    let (key, cert, subject) = (
        format!("{name}-key.pem"),
        format!("{name}.pem"),
        format!("/CN=zk-locks test {name}"),
    );
    let mut args = vec!["req", "-x509", "-nodes", "-days", "2"];
    args.extend(EC);
    args.extend([
        "-keyout",
        &key,
        "-out",
        &cert,
        "-subj",
        &subject,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &args)
}

fn signed(dir: &Path, name: &str, extensions: &str) -> Result<()> {
    let (key, csr, cert, ext) = (
        format!("{name}-key.pem"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
    );
    std::fs::write(dir.join(&ext), extensions).map_err(io_err("writing an openssl extfile"))?;
    let mut args = vec!["req", "-nodes"];
    args.extend(EC);
    args.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=localhost"]);
    openssl(dir, &args)?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &cert,
            "-extfile",
            &ext,
        ],
    )
}

/// Makes every file in `dir` (which must exist).
fn generate(dir: &Path) -> Result<TlsFiles> {
    self_signed_ca(dir, "ca")?;
    self_signed_ca(dir, "other-ca")?;
    signed(
        dir,
        "server",
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )?;
    signed(
        dir,
        "client",
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )?;
    let read =
        |name: &str| std::fs::read(dir.join(name)).map_err(io_err(format!("reading {name}")));
    let mut store = read("server-key.pem")?;
    store.extend(read("server.pem")?);
    std::fs::write(dir.join("server-store.pem"), store).map_err(io_err("writing the key store"))?;
    Ok(TlsFiles {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client-key.pem"),
        server_store: dir.join("server-store.pem"),
    })
}
