//! [`TlsOptions`]: the CA certificates that verify the server, an optional client certificate,
//! and the rustls configuration built from them (ring provider, TLS 1.2 and 1.3).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};

/// TLS for [`NativeOptions::tls`](super::NativeOptions::tls): connect to a ZooKeeper
/// `secureClientPort`, verify its certificate against `ca_pem` (the server name is the host
/// of the connect string: a DNS name or an IP address in the certificate's SAN).
///
/// ```no_run
/// use zk_locks::client::native::{NativeOptions, TlsOptions};
/// let tls = TlsOptions::from_ca_file("/etc/zk/ca.pem")?
///     .client_cert_files("/etc/zk/client.pem", "/etc/zk/client-key.pem")?;
/// let options = NativeOptions::new("zk1:2281,zk2:2281").tls(tls);
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM certificates of the CAs that may sign the server's certificate.
    pub(crate) ca_pem: Vec<u8>,
    /// PEM certificate chain and PEM private key (PKCS#8, PKCS#1 or SEC1) of the client.
    pub(crate) client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca_pem_bytes", &self.ca_pem.len())
            .field("client_cert", &self.client_cert.is_some())
            .finish()
    }
}

fn read(name: &'static str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::InvalidArgument {
        name,
        reason: format!("cannot read {}: {e}", path.display()),
    })
}

fn invalid(reason: String) -> Error {
    Error::InvalidArgument {
        name: "tls",
        reason,
    }
}

impl TlsOptions {
    /// Verifies the server against these PEM CA certificates.
    pub fn new(ca_pem: impl Into<Vec<u8>>) -> TlsOptions {
        TlsOptions {
            ca_pem: ca_pem.into(),
            client_cert: None,
        }
    }

    /// [`TlsOptions::new`] with the CA certificates read from a PEM file.
    pub fn from_ca_file(path: impl AsRef<Path>) -> Result<TlsOptions> {
        Ok(TlsOptions::new(read("tls_ca", path.as_ref())?))
    }

    /// Presents this client certificate (PEM chain, PEM key).
    pub fn client_cert(mut self, chain_pem: Vec<u8>, key_pem: Vec<u8>) -> TlsOptions {
        self.client_cert = Some((chain_pem, key_pem));
        self
    }

    /// [`TlsOptions::client_cert`] read from PEM files.
    pub fn client_cert_files(
        self,
        chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsOptions> {
        let chain = read("tls_client_cert", chain.as_ref())?;
        let key = read("tls_client_key", key.as_ref())?;
        Ok(self.client_cert(chain, key))
    }

    /// The rustls configuration; bad PEM is [`Error::InvalidArgument`].
    pub(super) fn client_config(&self) -> Result<Arc<rustls::ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        let cas = CertificateDer::pem_slice_iter(&self.ca_pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("CA certificates: {e}")))?;
        if cas.is_empty() {
            return Err(invalid("no CA certificate in the CA PEM".into()));
        }
        for ca in cas {
            roots
                .add(ca)
                .map_err(|e| invalid(format!("CA certificate: {e}")))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("protocol versions: {e}")))?
            .with_root_certificates(roots);
        let config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let chain = CertificateDer::pem_slice_iter(chain)
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| invalid(format!("client certificate: {e}")))?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| invalid(format!("client key: {e}")))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| invalid(format!("client certificate: {e}")))?
            }
        };
        Ok(Arc::new(config))
    }
}
