//! The node's effective settings as `system_views.settings` lists them: one (name, value) per
//! setting, after the file, the flags and the adjustments `load` made.
//!
//! A setting that is Cassandra's goes by its cassandra.yaml name (`native_transport_port`,
//! `write_request_timeout`, `batch_size_warn_threshold`, ...), with its value in Cassandra 5.0's
//! form where it has units ("2000ms", "16MiB"); a setting of hayate's own goes by its key in
//! hayate.toml (`storage.write_block_size`).

use super::{ByteSize, Config};

impl Config {
    /// Every setting, sorted by name.
    pub fn settings(&self) -> Vec<(String, String)> {
        let ms = |v: u64| format!("{v}ms");
        let size = |v: ByteSize| v.to_string();
        let s = &self.storage;
        let l = &self.limits;
        let c = &self.cluster;
        let g = &self.guardrails;
        let tls = &self.client_encryption;
        let devices: Vec<String> = s.devices.iter().map(|d| d.path.display().to_string()).collect();
        let mut out: Vec<(&str, String)> = vec![
            // Cassandra's names.
            ("cluster_name", self.cluster_name.clone()),
            ("listen_address", self.listen_address.to_string()),
            ("rpc_address", self.listen_address.to_string()),
            ("native_transport_port", self.cql_port.to_string()),
            ("storage_port", c.storage_port.to_string()),
            ("num_tokens", c.num_tokens.to_string()),
            ("seed_provider.parameters.seeds", c.seeds.join(",")),
            (
                "authenticator",
                format!("{:?}Authenticator", self.auth.authenticator),
            ),
            ("authorizer", format!("{:?}Authorizer", self.auth.authorizer)),
            ("write_request_timeout", ms(c.write_request_timeout_ms)),
            ("read_request_timeout", ms(c.read_request_timeout_ms)),
            ("range_request_timeout", ms(c.range_request_timeout_ms)),
            ("cas_contention_timeout", ms(c.cas_contention_timeout_ms)),
            ("max_hint_window", ms(c.max_hint_window_ms)),
            ("hinted_handoff_throttle", size(c.hinted_handoff_throttle_bytes)),
            ("max_hints_size_per_host", size(c.max_hints_size_per_host_bytes)),
            (
                "stream_throughput_outbound",
                format!("{}/s", size(c.stream_throughput_bytes)),
            ),
            ("native_transport_max_frame_size", size(l.max_frame_bytes)),
            (
                "native_transport_max_concurrent_connections",
                l.max_connections.to_string(),
            ),
            (
                "native_transport_max_request_data_in_flight",
                size(l.max_request_data_in_flight_bytes),
            ),
            (
                "native_transport_max_request_data_in_flight_per_ip",
                size(l.max_request_data_in_flight_per_ip_bytes),
            ),
            ("client_encryption_options.enabled", tls.enabled.to_string()),
            ("client_encryption_options.optional", tls.optional.to_string()),
            (
                "client_encryption_options.require_client_auth",
                tls.require_client_auth.to_string(),
            ),
            (
                "batch_size_warn_threshold",
                size(g.batch_size_warn_threshold_bytes),
            ),
            (
                "batch_size_fail_threshold",
                size(g.batch_size_fail_threshold_bytes),
            ),
            (
                "partition_keys_in_select_warn_threshold",
                g.partition_keys_in_select_warn_threshold.to_string(),
            ),
            (
                "partition_keys_in_select_fail_threshold",
                g.partition_keys_in_select_fail_threshold.to_string(),
            ),
            (
                "in_select_cartesian_product_warn_threshold",
                g.in_select_cartesian_product_warn_threshold.to_string(),
            ),
            (
                "in_select_cartesian_product_fail_threshold",
                g.in_select_cartesian_product_fail_threshold.to_string(),
            ),
            // hayate's own.
            (
                "backup.s3_endpoint",
                self.backup.s3_endpoint.clone().unwrap_or_default(),
            ),
            (
                "backup.s3_region",
                self.backup.s3_region.clone().unwrap_or_default(),
            ),
            ("data_dir", self.data_dir.display().to_string()),
            ("log_level", self.log_level.clone()),
            ("cluster.data_center", c.data_center.clone()),
            ("cluster.rack", c.rack.clone()),
            ("cluster.formation_wait_ms", c.formation_wait_ms.to_string()),
            ("cluster.cleanup_delay_ms", c.cleanup_delay_ms.to_string()),
            (
                "cluster.replace_address",
                c.replace_address.map(|a| a.to_string()).unwrap_or_default(),
            ),
            (
                "limits.max_requests_in_flight_per_connection",
                l.max_requests_in_flight_per_connection.to_string(),
            ),
            ("limits.service_threads", l.service_threads.to_string()),
            ("metrics.port", self.metrics.port.to_string()),
            ("storage.devices", devices.join(",")),
            ("storage.device_size", size(s.device_size_bytes)),
            ("storage.write_block_size", size(s.write_block_size_bytes)),
            ("storage.commit_to_device", s.commit_to_device.to_string()),
            (
                "storage.write_buffer_dir",
                s.write_buffer_dir.display().to_string(),
            ),
            ("storage.write_buffer_blocks", s.write_buffer_blocks.to_string()),
            ("storage.io_uring", s.io_uring.to_string()),
            ("storage.read_page_cache", s.read_page_cache.to_string()),
            ("storage.flush_interval_ms", s.flush_interval_ms.to_string()),
            ("storage.post_write_cache", size(s.post_write_cache_bytes)),
            ("storage.delta_buffer", size(s.delta_buffer_bytes)),
            ("storage.data_in_memory", s.data_in_memory.to_string()),
            ("storage.defrag_lwm_pct", s.defrag_lwm_pct.to_string()),
            ("storage.defrag_sleep_us", s.defrag_sleep_us.to_string()),
            ("storage.stop_writes_free_pct", s.stop_writes_free_pct.to_string()),
            ("storage.tombstone_grace_s", s.tombstone_grace_s.to_string()),
            ("storage.expiry_period_ms", s.expiry_period_ms.to_string()),
            ("storage.direct_io", s.direct_io.to_string()),
            ("storage.index_snapshot", s.index_snapshot.to_string()),
        ];
        out.sort_by(|a, b| a.0.cmp(b.0));
        out.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_use_cassandras_names_and_forms() {
        let settings = Config::default().settings();
        let get = |name: &str| {
            settings
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("no setting {name}"))
        };
        assert_eq!(get("native_transport_port"), "9042");
        assert_eq!(get("write_request_timeout"), "2000ms");
        assert_eq!(get("batch_size_warn_threshold"), "5KiB");
        assert_eq!(get("batch_size_fail_threshold"), "50KiB");
        assert_eq!(get("authenticator"), "AllowAllAuthenticator");
        assert_eq!(get("storage.write_block_size"), "1MiB");
        let names: Vec<&str> = settings.iter().map(|(k, _)| k.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "sorted, each once");
    }
}
