//! The TLS side of a scripted server on loopback (feature `tls`): certificates made once per
//! test process (`TlsFiles::generate`, the server's SAN covers 127.0.0.1), a rustls server
//! session over an accepted socket, and the client's `TlsOptions` that trust it. Included by
//! the scripted-server tests with `#[path]`, so that each can run its cases over TLS too.

use std::net::TcpStream;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use zk_locks::client::native::TlsOptions;
use zk_locks::testing::TlsFiles;

/// A server's end of a TLS connection; the handshake runs on its first read or write.
pub type TlsStream = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

/// This process's certificates.
pub fn files() -> &'static TlsFiles {
    static FILES: OnceLock<TlsFiles> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!(
            "zk-locks-scripted-tls-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TlsFiles::generate(&dir).unwrap()
    })
}

fn server_config() -> Arc<rustls::ServerConfig> {
    static CONFIG: OnceLock<Arc<rustls::ServerConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let store = std::fs::read(&files().server_store).unwrap();
            let chain = CertificateDer::pem_slice_iter(&store)
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(&store).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
            Arc::new(config)
        })
        .clone()
}

/// The server's end of TLS over `tcp`.
pub fn accept(tcp: TcpStream) -> TlsStream {
    rustls::StreamOwned::new(rustls::ServerConnection::new(server_config()).unwrap(), tcp)
}

/// What a client gives to trust this process's scripted servers.
pub fn client_options() -> TlsOptions {
    TlsOptions::from_ca_file(&files().ca).unwrap()
}
