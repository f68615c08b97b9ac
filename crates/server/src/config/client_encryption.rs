//! The `[client_encryption]` section: TLS between clients and the node, as Cassandra's
//! `client_encryption_options`.
//!
//! Cassandra takes a Java keystore; hayate takes PEM files, as most tools that make
//! certificates (openssl, cfssl, step, cert-manager) write them: `certificate` holds the node's
//! certificate chain, leaf first, and `private_key` its key (PKCS#8, PKCS#1 or SEC1). `ca`
//! holds the certificates that client certificates must chain to, Cassandra's truststore.
//!
//! `enabled` serves TLS on the CQL port; with `optional` too, the port takes plain connections
//! as well, told apart by their first byte (as Cassandra's optional mode does), which is how a
//! cluster moves its clients to TLS one at a time. `optional` without `enabled` is the same
//! mixed mode, as in Cassandra.

use std::path::PathBuf;

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientEncryptionConfig {
    pub enabled: bool,
    pub optional: bool,
    /// A PEM file with the node's certificate chain; "" is unset.
    pub certificate: PathBuf,
    /// A PEM file with the private key of the certificate; "" is unset.
    pub private_key: PathBuf,
    /// A PEM file with the certificates client certificates must chain to; "" is unset.
    pub ca: PathBuf,
    /// Refuse clients that present no certificate signed by `ca`. Without it, a client
    /// certificate is checked against `ca` when one is presented (and `ca` is set).
    pub require_client_auth: bool,
}

/// Whether the CQL port speaks TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Every connection must start a TLS handshake.
    Required,
    /// TLS and plain connections on the same port.
    Optional,
}

impl ClientEncryptionConfig {
    /// `None` when the port speaks plain CQL only.
    pub fn mode(&self) -> Option<TlsMode> {
        match (self.enabled, self.optional) {
            (true, false) => Some(TlsMode::Required),
            (_, true) => Some(TlsMode::Optional),
            (false, false) => None,
        }
    }

    pub(super) fn check(&self) -> Option<(&'static str, String, String)> {
        let unset = |p: &PathBuf| p.as_os_str().is_empty();
        if self.mode().is_none() {
            if self.require_client_auth {
                return Some((
                    "client_encryption.require_client_auth",
                    "true".into(),
                    "needs TLS: set client_encryption.enabled = true as well".into(),
                ));
            }
            return None;
        }
        if unset(&self.certificate) {
            return Some((
                "client_encryption.certificate",
                "\"\"".into(),
                "must name a PEM file with the node's certificate chain when TLS is on".into(),
            ));
        }
        if unset(&self.private_key) {
            return Some((
                "client_encryption.private_key",
                "\"\"".into(),
                "must name a PEM file with the certificate's private key when TLS is on".into(),
            ));
        }
        if self.require_client_auth && unset(&self.ca) {
            return Some((
                "client_encryption.ca",
                "\"\"".into(),
                "must name a PEM file with the CA certificates that sign client certificates \
                 when require_client_auth is true"
                    .into(),
            ));
        }
        None
    }
}
