//! Validation: every range the engine and the server rely on, checked with the key named.

use std::net::IpAddr;

use hayate_storage::config::{BLOCK_SIZE_MAX_BYTES, BLOCK_SIZE_MIN_BYTES};

use super::{
    AuthenticatorKind, AuthorizerKind, ByteSize, Config, ConfigError, CONNECTIONS_MAX, MAX_FRAME_MIN_BYTES,
    REQUESTS_IN_FLIGHT_PER_CONNECTION_MAX, REQUEST_DATA_IN_FLIGHT_MIN_BYTES, SERVICE_THREADS_MAX,
};

impl Config {
    /// Checks every range the engine and the server rely on, naming the key in the message.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, value: String, reason: String| ConfigError::Invalid {
            path: self.source.clone(),
            key,
            value,
            reason,
        };
        if self.cluster_name.is_empty() {
            return Err(invalid("cluster_name", "\"\"".into(), "must not be empty".into()));
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(invalid(
                "data_dir",
                "\"\"".into(),
                "must name a directory (\".\" for the working directory)".into(),
            ));
        }
        // Cassandra refuses to start with this pair: permissions need a logged-in role.
        if self.auth.authorizer == AuthorizerKind::Cassandra
            && self.auth.authenticator == AuthenticatorKind::AllowAll
        {
            return Err(invalid(
                "auth.authorizer",
                "\"CassandraAuthorizer\"".into(),
                "AllowAllAuthenticator can't be used with CassandraAuthorizer: set authenticator = \"PasswordAuthenticator\"".into(),
            ));
        }
        if self.log_level.trim().is_empty() {
            return Err(invalid(
                "log_level",
                "\"\"".into(),
                "must be a level such as \"info\" or a filter such as \"info,hayate_storage=debug\"".into(),
            ));
        }

        let s = &self.storage;
        let block_bytes = s.write_block_size_bytes.0;
        if !(u64::from(BLOCK_SIZE_MIN_BYTES)..=u64::from(BLOCK_SIZE_MAX_BYTES)).contains(&block_bytes)
            || !block_bytes.is_power_of_two()
        {
            return Err(invalid(
                "storage.write_block_size",
                s.write_block_size_bytes.to_string(),
                format!(
                    "must be a power of two from {} to {} (1MiB suits most devices)",
                    ByteSize(BLOCK_SIZE_MIN_BYTES.into()),
                    ByteSize(BLOCK_SIZE_MAX_BYTES.into())
                ),
            ));
        }
        // The engine needs at least four write blocks in all: one being filled, one being
        // defragmented into, and room to free one.
        let device_min_bytes = 4 * block_bytes;
        if s.devices.is_empty() && s.device_size_bytes.0 < device_min_bytes {
            return Err(invalid(
                "storage.device_size",
                s.device_size_bytes.to_string(),
                format!(
                    "must hold at least four write blocks ({})",
                    ByteSize(device_min_bytes)
                ),
            ));
        }
        for (i, device) in s.devices.iter().enumerate() {
            if device.path.as_os_str().is_empty() {
                return Err(invalid(
                    "storage.devices.path",
                    format!("\"\" (device {})", i + 1),
                    "must name a file or a block device".into(),
                ));
            }
            let size = device.size_bytes.unwrap_or(s.device_size_bytes);
            if size.0 < block_bytes {
                return Err(invalid(
                    "storage.devices.size",
                    format!("{size} (device {})", device.path.display()),
                    format!("must hold at least one write block ({})", ByteSize(block_bytes)),
                ));
            }
        }
        if !(1..=99).contains(&s.defrag_lwm_pct) {
            return Err(invalid(
                "storage.defrag_lwm_pct",
                s.defrag_lwm_pct.to_string(),
                "must be a percentage from 1 to 99 (50 is the default)".into(),
            ));
        }
        if s.stop_writes_free_pct > 50 {
            return Err(invalid(
                "storage.stop_writes_free_pct",
                s.stop_writes_free_pct.to_string(),
                "must be a percentage from 0 to 50 (5 is the default)".into(),
            ));
        }
        if s.flush_interval_ms == 0 {
            return Err(invalid(
                "storage.flush_interval_ms",
                "0".into(),
                "must be at least 1 (use commit_to_device for synchronous writes)".into(),
            ));
        }
        if s.expiry_period_ms == 0 {
            return Err(invalid(
                "storage.expiry_period_ms",
                "0".into(),
                "must be at least 1".into(),
            ));
        }

        let l = &self.limits;
        let frame_max_bytes = u64::from(hayate_cql::frame::FRAME_BODY_MAX_BYTES);
        if !(MAX_FRAME_MIN_BYTES..=frame_max_bytes).contains(&l.max_frame_bytes.0) {
            return Err(invalid(
                "limits.max_frame_bytes",
                l.max_frame_bytes.to_string(),
                format!(
                    "must be from {} to {}",
                    ByteSize(MAX_FRAME_MIN_BYTES),
                    ByteSize(frame_max_bytes)
                ),
            ));
        }
        if !(1..=CONNECTIONS_MAX).contains(&l.max_connections) {
            return Err(invalid(
                "limits.max_connections",
                l.max_connections.to_string(),
                format!("must be from 1 to {CONNECTIONS_MAX}"),
            ));
        }
        if !(1..=REQUESTS_IN_FLIGHT_PER_CONNECTION_MAX).contains(&l.max_requests_in_flight_per_connection) {
            return Err(invalid(
                "limits.max_requests_in_flight_per_connection",
                l.max_requests_in_flight_per_connection.to_string(),
                format!(
                    "must be from 1 to {REQUESTS_IN_FLIGHT_PER_CONNECTION_MAX} (the stream ids of protocol v4)"
                ),
            ));
        }

        for (key, value) in [
            (
                "limits.max_request_data_in_flight",
                l.max_request_data_in_flight_bytes,
            ),
            (
                "limits.max_request_data_in_flight_per_ip",
                l.max_request_data_in_flight_per_ip_bytes,
            ),
        ] {
            if value.0 < REQUEST_DATA_IN_FLIGHT_MIN_BYTES {
                return Err(invalid(
                    key,
                    value.to_string(),
                    format!("must be at least {}", ByteSize(REQUEST_DATA_IN_FLIGHT_MIN_BYTES)),
                ));
            }
        }

        if l.service_threads > SERVICE_THREADS_MAX {
            return Err(invalid(
                "limits.service_threads",
                l.service_threads.to_string(),
                format!("must be from 0 (five per core) to {SERVICE_THREADS_MAX}"),
            ));
        }

        if let Some((key, value, reason)) = self.cluster.check() {
            return Err(invalid(key, value, reason));
        }
        if let Some((key, value, reason)) = self.client_encryption.check() {
            return Err(invalid(key, value, reason));
        }
        if let Some((key, value, reason)) = self.guardrails.check() {
            return Err(invalid(key, value, reason));
        }
        if self.listen_address.is_unspecified() {
            return Err(invalid(
                "listen_address",
                self.listen_address.to_string(),
                "must be this node's own address: other nodes reach it there (use 127.0.0.1 for a node of one)".into(),
            ));
        }
        if self.cluster.storage_port == self.cql_port {
            return Err(invalid(
                "cluster.storage_port",
                self.cluster.storage_port.to_string(),
                "is cql_port too; give internode traffic its own port (7000 is the default)".into(),
            ));
        }
        if self.metrics.port != 0
            && self.metrics.port == self.cql_port
            && addresses_overlap(self.metrics_listen_address(), self.listen_address)
        {
            return Err(invalid(
                "metrics.port",
                self.metrics.port.to_string(),
                "is cql_port too; give the metrics endpoint its own port (9180 is the default) or 0 to disable it"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Two listeners conflict on a port if either is a wildcard or both are the same address.
fn addresses_overlap(a: IpAddr, b: IpAddr) -> bool {
    a == b || a.is_unspecified() || b.is_unspecified()
}
