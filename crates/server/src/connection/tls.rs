//! Client TLS: the `[client_encryption]` section made into a rustls acceptor, and the first
//! moments of a connection on a port that speaks TLS.
//!
//! The files are read once, at start, and every fault in them (missing, not PEM, a key that
//! does not belong to the certificate) stops the node with a message that names the setting,
//! the file and what to do: a node that started without the TLS its operator asked for would
//! be worse than one that did not start.
//!
//! On a TLS port the first byte of a connection tells what the client speaks: a TLS record
//! of a ClientHello starts with 0x16 (the handshake content type), a CQL frame with its
//! protocol version (1 to 5, with the response bit clear). In optional mode a plain client is
//! served as on a plain port; in required mode it is answered with a CQL protocol error that
//! says the node wants TLS, so that the driver reports that rather than a bare reset.

use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hayate_cql::error::WireError;
use hayate_cql::frame::HEADER_BYTES;
use hayate_cql::response::Response;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::config::{ClientEncryptionConfig, TlsMode};

/// The first byte of a TLS record that carries a handshake message (RFC 8446, 5.1).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// How long a client has, from connecting, to finish its TLS handshake (or, in optional mode,
/// to send its first byte). A client that connects and says nothing holds a connection slot.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a plain client on a TLS-only port has to send its first frame and read the error.
const PLAIN_REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);
/// A plain client's first frame is read (and dropped) up to this size before it is answered,
/// so that closing the socket does not reset the connection over unread bytes and lose the
/// answer. A driver's first frame (OPTIONS or STARTUP) is far smaller.
const PLAIN_FIRST_FRAME_MAX_BYTES: usize = 64 << 10;

/// The node's TLS settings, ready to accept connections.
pub struct Tls {
    acceptor: TlsAcceptor,
    mode: TlsMode,
}

/// What the start of a connection turned out to be.
pub enum Accepted {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// A finished handshake's protocol and cipher suite, named as Java names them
/// (`TLSv1.3`, `TLS_AES_256_GCM_SHA384`), for `system_views.clients`.
pub fn session_info(connection: &rustls::ServerConnection) -> crate::requests::TlsInfo {
    let protocol = connection.protocol_version().map(|v| match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_owned(),
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_owned(),
        other => format!("{other:?}"),
    });
    let cipher_suite = connection.negotiated_cipher_suite().map(|s| {
        let name = format!("{:?}", s.suite());
        // rustls prefixes TLS 1.3 suites with TLS13_; their standard names start TLS_.
        match name.strip_prefix("TLS13_") {
            Some(rest) => format!("TLS_{rest}"),
            None => name,
        }
    });
    crate::requests::TlsInfo {
        protocol,
        cipher_suite,
    }
}

impl Tls {
    /// Reads the files `config` names; `None` if TLS is off.
    pub fn load(config: &ClientEncryptionConfig) -> Result<Option<Tls>, String> {
        let Some(mode) = config.mode() else {
            return Ok(None);
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs = read_certificates("client_encryption.certificate", &config.certificate)?;
        let key = read_private_key(&config.private_key)?;
        check_key_matches(&provider, &certs, &key, config)?;

        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        let clients = if config.ca.as_os_str().is_empty() {
            "client certificates not requested".to_owned()
        } else if config.require_client_auth {
            format!("client certificates required, signed by {}", config.ca.display())
        } else {
            format!(
                "client certificates checked when presented, against {}",
                config.ca.display()
            )
        };
        let builder = if config.ca.as_os_str().is_empty() {
            builder.with_no_client_auth()
        } else {
            let mut roots = RootCertStore::empty();
            for cert in read_certificates("client_encryption.ca", &config.ca)? {
                roots.add(cert).map_err(|e| {
                    format!(
                        "client_encryption.ca {}: a certificate in it cannot be used as a CA: {e}",
                        config.ca.display()
                    )
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if config.require_client_auth {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier.build().map_err(|e| {
                format!(
                    "client_encryption.ca {}: cannot verify clients with it: {e}",
                    config.ca.display()
                )
            })?;
            builder.with_client_cert_verifier(verifier)
        };
        let chain_length = certs.len();
        let server = builder.with_single_cert(certs, key).map_err(|e| {
            format!(
                "client_encryption.certificate {} with private_key {}: {e}",
                config.certificate.display(),
                config.private_key.display()
            )
        })?;
        tracing::info!(
            "client TLS on ({}): certificate {} ({chain_length} in its chain), {clients}",
            match mode {
                TlsMode::Required => "required",
                TlsMode::Optional => "optional: plain connections are accepted too",
            },
            config.certificate.display(),
        );
        Ok(Some(Tls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            mode,
        }))
    }

    /// Tells TLS from plain by the first byte and shakes hands; `None` when the connection is
    /// over (a failed handshake, a plain client refused, or a client gone), which is logged.
    pub async fn accept(&self, stream: TcpStream, peer: SocketAddr) -> Option<Accepted> {
        let mut first = [0u8; 1];
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
            Ok(Ok(1..)) => {}
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Err(_) => {
                tracing::debug!(%peer, "closing a connection that sent nothing for {HANDSHAKE_TIMEOUT:?}");
                return None;
            }
        }
        if first[0] != TLS_HANDSHAKE_RECORD {
            return match self.mode {
                TlsMode::Optional => Some(Accepted::Plain(stream)),
                TlsMode::Required => {
                    tracing::info!(
                        %peer,
                        "refused a plain connection: this node requires TLS ([client_encryption] enabled)"
                    );
                    refuse_plain(stream).await;
                    None
                }
            };
        }
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Some(Accepted::Tls(Box::new(tls))),
            Ok(Err(e)) => {
                tracing::info!(%peer, "TLS handshake failed: {e}");
                None
            }
            Err(_) => {
                tracing::info!(%peer, "TLS handshake not finished within {HANDSHAKE_TIMEOUT:?}");
                None
            }
        }
    }
}

/// Answers a plain client's first frame with a protocol error saying that TLS is required,
/// on the client's stream and in its protocol version, then closes.
async fn refuse_plain(mut stream: TcpStream) {
    let answer = async {
        let mut head = [0u8; HEADER_BYTES];
        stream.read_exact(&mut head).await.ok()?;
        let version = head[0] & 0x7f;
        let stream_id = i16::from_be_bytes([head[2], head[3]]);
        let body_bytes = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
        if body_bytes <= PLAIN_FIRST_FRAME_MAX_BYTES {
            let mut body = vec![0u8; body_bytes];
            stream.read_exact(&mut body).await.ok()?;
        }
        let error = Response::Error(WireError::protocol(
            "This node requires TLS for client connections ([client_encryption] enabled): \
             connect with SSL/TLS (cqlsh --ssl, the driver's SSL options)",
        ));
        let mut out = Vec::new();
        // Versions 3 to 5 share the 9-byte header (v5 frames in segments only after STARTUP);
        // answer in the client's, so that it reads the message instead of complaining about
        // the version.
        let answer_version = if (3..=5).contains(&version) {
            version
        } else {
            hayate_cql::frame::PROTOCOL_V4
        };
        error.encode_frame(stream_id, answer_version, &mut out).ok()?;
        stream.write_all(&out).await.ok()?;
        stream.shutdown().await.ok()?;
        // Wait for the client to close, so that the answer is not lost to a reset.
        let mut rest = [0u8; 512];
        while stream.read(&mut rest).await.ok()? > 0 {}
        Some(())
    };
    let _ = tokio::time::timeout(PLAIN_REFUSAL_TIMEOUT, answer).await;
}

fn read_file(key: &str, path: &Path, holds: &str) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| {
        format!(
            "cannot read {key} {}: {e}; point it at a PEM file with {holds}",
            path.display()
        )
    })
}

/// The certificates of a PEM file, in order.
fn read_certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = read_file(key, path, "certificates (-----BEGIN CERTIFICATE-----)")?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{key} {}: not a valid PEM file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{key} {} holds no certificate: it must be PEM, with -----BEGIN CERTIFICATE----- blocks",
            path.display()
        ));
    }
    Ok(certs)
}

fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let key = "client_encryption.private_key";
    let text = read_file(key, path, "a private key (-----BEGIN PRIVATE KEY-----)")?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        pem::Error::NoItemsFound => format!(
            "{key} {} holds no private key: it must be PEM, with a -----BEGIN PRIVATE KEY----- \
             (PKCS#8), -----BEGIN RSA PRIVATE KEY----- or -----BEGIN EC PRIVATE KEY----- block",
            path.display()
        ),
        other => format!("{key} {}: not a valid PEM private key: {other}", path.display()),
    })
}

/// Refuses a key that is not the certificate's: rustls would otherwise find out only during
/// the first handshake, where clients see a failure and the operator a puzzle.
fn check_key_matches(
    provider: &CryptoProvider,
    certs: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    config: &ClientEncryptionConfig,
) -> Result<(), String> {
    let signing_key = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| {
            format!(
                "client_encryption.private_key {}: not a usable private key: {e}",
                config.private_key.display()
            )
        })?;
    CertifiedKey::new(certs.to_vec(), signing_key)
        .keys_match()
        .map_err(|e| {
            format!(
                "client_encryption.private_key {} is not the key of the first certificate in \
                 client_encryption.certificate {} ({e}): give the key the certificate was issued \
                 for, and put the node's own certificate first in the chain",
                config.private_key.display(),
                config.certificate.display()
            )
        })
}
