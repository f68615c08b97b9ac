use std::path::Path;

use super::load::filesystem_type;
use super::*;

fn cli(args: &[&str]) -> Cli {
    let mut argv = vec!["hayate"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).expect("the test's flags parse")
}

#[test]
fn no_arguments_give_the_embedded_defaults() {
    let config = Config::load(&cli(&[])).expect("defaults are valid");
    assert_eq!(config.cluster_name, "hayate");
    assert_eq!(config.cql_address(), "127.0.0.1:9042".parse().expect("address"));
    assert_eq!(config.data_dir, PathBuf::from("./data"));
    assert_eq!(config.storage.device_size_bytes, ByteSize(4 << 30));
    assert_eq!(config.storage.write_block_size_bytes, ByteSize(1 << 20));
    assert!(!config.storage.commit_to_device);
    assert_eq!(config.limits.max_frame_bytes, ByteSize(16 << 20));
    assert_eq!(config.auth.authenticator, AuthenticatorKind::AllowAll);
    assert_eq!(
        config.metrics_address(),
        Some("127.0.0.1:9180".parse().expect("address"))
    );
    assert_eq!(config.roles_path(), PathBuf::from("./data/roles.json"));

    let ns = config.namespace_config();
    assert_eq!(ns.name, NAMESPACE_NAME);
    assert_eq!(ns.devices.len(), 1);
    assert_eq!(ns.devices[0].path, PathBuf::from("./data/hayate.dat"));
    assert_eq!(ns.devices[0].size_bytes, 4 << 30);
    assert_eq!(ns.index_snapshot_path, Some(PathBuf::from("./data/hayate.index")));
    assert_eq!(ns.block_size_bytes, 1 << 20);
    assert!(!ns.data_in_memory);
    assert_eq!(ns.tombstone_grace_s, 864_000);
}

#[test]
fn the_example_file_is_the_defaults() {
    // The example documents every key with its default: if the two disagree, one is wrong.
    let text = include_str!("../../../../hayate.toml.example");
    let uncommented: String = text
        .lines()
        .filter_map(|l| {
            // Settings are commented out as `#key = value` and `#[section]`; prose is
            // `# text`, and the device list example is indented prose.
            l.strip_prefix('#')
                .filter(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '['))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let example = Config::from_toml(&uncommented, None).expect("the example parses");
    let defaults = Config::default();
    assert_eq!(format!("{example:?}"), format!("{defaults:?}"));
}

#[test]
fn a_full_file_sets_everything() {
    let text = r#"
            cluster_name = "test cluster"
            listen_address = "10.1.2.3"
            cql_port = 19042
            data_dir = "/var/lib/hayate"
            log_level = "debug"

            [storage]
            device_size = "1GiB"
            write_block_size = "128KiB"
            commit_to_device = true
            write_buffer_dir = "/run/hayate"
            write_buffer_blocks = 16
            flush_interval_ms = 250
            post_write_cache = "64MiB"
            delta_buffer = "32MiB"
            read_page_cache = true
            data_in_memory = true
            defrag_lwm_pct = 40
            defrag_sleep_us = 500
            stop_writes_free_pct = 10
            tombstone_grace_s = 3600
            expiry_period_ms = 5000
            direct_io = false
            index_snapshot = false

            [[storage.devices]]
            path = "/dev/nvme0n1"

            [[storage.devices]]
            path = "/mnt/b/hayate.dat"
            size = 268435456

            [limits]
            max_frame_bytes = "1MiB"
            max_connections = 100
            max_requests_in_flight_per_connection = 64
            max_request_data_in_flight = "32MiB"
            max_request_data_in_flight_per_ip = "8MiB"

            [auth]
            authenticator = "PasswordAuthenticator"

            [metrics]
            listen_address = "::1"
            port = 0

            [cluster]
            seeds = ["10.1.2.3", "10.1.2.4:7001"]
            data_center = "dc2"
            rack = "r7"
            num_tokens = 8
            storage_port = 7001
            write_request_timeout_ms = 1000
            read_request_timeout_ms = 3000
            range_request_timeout_ms = 6000
            max_hint_window_ms = 60000
            hinted_handoff_throttle = "2MiB"
            max_hints_size_per_host = "100MiB"
            formation_wait_ms = 500

            [client_encryption]
            enabled = true
            optional = true
            certificate = "/etc/hayate/node.crt"
            private_key = "/etc/hayate/node.key"
            ca = "/etc/hayate/clients-ca.crt"
            require_client_auth = true

            [guardrails]
            batch_size_warn_threshold = "1KiB"
            batch_size_fail_threshold = "2KiB"
            partition_keys_in_select_warn_threshold = 10
            partition_keys_in_select_fail_threshold = 20
            in_select_cartesian_product_warn_threshold = 25
            in_select_cartesian_product_fail_threshold = -1
        "#;
    let config = Config::from_toml(text, Some(Path::new("full.toml"))).expect("parses");
    config.validate().expect("valid");
    assert_eq!(config.cluster_name, "test cluster");
    assert_eq!(config.cql_address(), "10.1.2.3:19042".parse().expect("address"));
    assert_eq!(
        config.storage_address(),
        "10.1.2.3:7001".parse().expect("address")
    );
    assert_eq!(
        config.cluster.seed_addresses(config.storage_address()),
        Ok(vec![
            "10.1.2.3:7001".parse().expect("address"),
            "10.1.2.4:7001".parse().expect("address")
        ])
    );
    assert_eq!(
        (config.cluster.data_center.as_str(), config.cluster.rack.as_str()),
        ("dc2", "r7")
    );
    assert_eq!(config.cluster.num_tokens, 8);
    assert_eq!(config.cluster.write_timeout(), std::time::Duration::from_secs(1));
    assert_eq!(config.cluster.hinted_handoff_throttle_bytes, ByteSize(2 << 20));
    assert_eq!(config.log_level, "debug");
    assert_eq!(config.limits.max_frame_bytes, ByteSize(1 << 20));
    assert_eq!(config.limits.max_connections, 100);
    assert_eq!(config.limits.max_requests_in_flight_per_connection, 64);
    assert_eq!(config.limits.max_request_data_in_flight_bytes, ByteSize(32 << 20));
    assert_eq!(config.client_encryption.mode(), Some(TlsMode::Optional));
    assert_eq!(
        config.client_encryption.ca,
        Path::new("/etc/hayate/clients-ca.crt")
    );
    assert!(config.client_encryption.require_client_auth);
    assert_eq!(
        config.limits.max_request_data_in_flight_per_ip_bytes,
        ByteSize(8 << 20)
    );
    assert_eq!(config.auth.authenticator, AuthenticatorKind::Password);
    assert_eq!(config.metrics_address(), None);
    let g = &config.guardrails;
    assert_eq!(
        (
            g.batch_size_warn_threshold_bytes,
            g.batch_size_fail_threshold_bytes
        ),
        (ByteSize(1 << 10), ByteSize(2 << 10))
    );
    assert_eq!(
        (
            g.partition_keys_in_select_warn_threshold,
            g.partition_keys_in_select_fail_threshold,
            g.in_select_cartesian_product_warn_threshold,
            g.in_select_cartesian_product_fail_threshold
        ),
        (10, 20, 25, -1)
    );

    let ns = config.namespace_config();
    assert_eq!(ns.devices.len(), 2);
    assert_eq!(ns.devices[0].path, PathBuf::from("/dev/nvme0n1"));
    assert_eq!(
        ns.devices[0].size_bytes,
        1 << 30,
        "a device without a size takes device_size"
    );
    assert_eq!(ns.devices[1].size_bytes, 256 << 20);
    assert_eq!(ns.block_size_bytes, 128 << 10);
    assert!(ns.commit_to_device);
    assert_eq!(ns.write_buffer_dir, Some(PathBuf::from("/run/hayate")));
    assert_eq!(ns.write_buffer_blocks, 16);
    assert_eq!(ns.flush_interval_ms, 250);
    assert_eq!(ns.post_write_cache_bytes, 64 << 20);
    assert_eq!(ns.delta_buffer_bytes, 32 << 20);
    assert!(ns.read_page_cache);
    assert!(ns.data_in_memory);
    assert_eq!(ns.defrag_lwm_pct, 40);
    assert_eq!(ns.defrag_sleep_us, 500);
    assert_eq!(ns.stop_writes_free_pct, 10);
    assert_eq!(ns.tombstone_grace_s, 3600);
    assert_eq!(ns.expiry_period_ms, 5000);
    assert!(!ns.direct_io);
    assert_eq!(ns.index_snapshot_path, None);
}

#[test]
fn cassandra_class_names_are_accepted_for_the_authenticator() {
    let text = "[auth]\nauthenticator = \"org.apache.cassandra.auth.PasswordAuthenticator\"\n";
    let config = Config::from_toml(text, None).expect("parses");
    assert_eq!(config.auth.authenticator, AuthenticatorKind::Password);
}

#[test]
fn the_authorizer_is_allow_all_unless_configured_and_needs_a_password_authenticator() {
    let config = Config::from_toml("", None).expect("empty config");
    assert_eq!(config.auth.authorizer, AuthorizerKind::AllowAll);
    let text = "[auth]\nauthenticator = \"PasswordAuthenticator\"\nauthorizer = \"org.apache.cassandra.auth.CassandraAuthorizer\"\n";
    let config = Config::from_toml(text, None).expect("parse");
    assert_eq!(config.auth.authorizer, AuthorizerKind::Cassandra);
    config.validate().expect("valid");
    let config = Config::from_toml("[auth]\nauthorizer = \"CassandraAuthorizer\"\n", None).expect("parse");
    let err = config.validate().expect_err("needs a password authenticator");
    assert!(
        err.to_string()
            .contains("AllowAllAuthenticator can't be used with CassandraAuthorizer"),
        "{err}"
    );
}

#[test]
fn flags_override_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("hayate.toml");
    std::fs::write(
        &path,
        "cql_port = 9043\ndata_dir = \"/from/file\"\nlog_level = \"warn\"\n[metrics]\nport = 9999\n",
    )
    .expect("write config");
    let path_arg = path.to_str().expect("utf-8 temp path");

    let from_file = Config::load(&cli(&["--config", path_arg])).expect("loads");
    assert_eq!(from_file.cql_port, 9043);
    assert_eq!(from_file.data_dir, PathBuf::from("/from/file"));
    assert!(!from_file.storage.commit_to_device);

    let data_dir = dir.path().join("data");
    let data_dir_arg = data_dir.to_str().expect("utf-8 temp path");
    let config = Config::load(&cli(&[
        "--config",
        path_arg,
        "--data-dir",
        data_dir_arg,
        "--listen-address",
        "10.0.0.1",
        "--cql-port",
        "9044",
        "--commit-to-device",
        "--metrics-port",
        "0",
        "--log-level",
        "debug",
    ]))
    .expect("loads");
    assert_eq!(config.cql_address(), "10.0.0.1:9044".parse().expect("address"));
    assert_eq!(config.data_dir, data_dir);
    assert!(config.storage.commit_to_device);
    assert_eq!(config.metrics_address(), None);
    assert_eq!(config.log_level, "debug");
    assert_eq!(config.source.as_deref(), Some(path.as_path()));
}

#[test]
fn an_unknown_key_is_refused_by_name() {
    let err = Config::from_toml("[storage]\ncomit_to_device = true\n", Some(Path::new("x.toml")))
        .expect_err("misspelt key");
    let message = err.to_string();
    assert!(message.contains("comit_to_device"), "{message}");
    assert!(message.contains("x.toml"), "{message}");

    let err = Config::from_toml("colour = 1\n", None).expect_err("unknown top-level key");
    assert!(err.to_string().contains("colour"), "{err}");
}

#[test]
fn a_bad_size_is_refused() {
    let err = Config::from_toml("[storage]\ndevice_size = \"4 gigs\"\n", Some(Path::new("x.toml")))
        .expect_err("not a size");
    let message = err.to_string();
    assert!(message.contains("4 gigs") && message.contains("GiB"), "{message}");
    assert!(message.contains("device_size"), "{message}");

    let err = Config::from_toml("[storage]\ndevice_size = \"4GB\"\n", None).expect_err("decimal unit");
    assert!(err.to_string().contains("4GB"), "{err}");

    let err = Config::from_toml("[storage]\ndevice_size = -1\n", None).expect_err("negative");
    assert!(err.to_string().contains("negative"), "{err}");

    let err =
        Config::from_toml("[storage]\ndevice_size = \"99999999999TiB\"\n", None).expect_err("overflows u64");
    assert!(err.to_string().contains("too large"), "{err}");
}

#[test]
fn sizes_parse_in_every_unit() {
    assert_eq!(ByteSize::parse("4GiB"), Ok(ByteSize(4 << 30)));
    assert_eq!(ByteSize::parse("512MiB"), Ok(ByteSize(512 << 20)));
    assert_eq!(ByteSize::parse("128KiB"), Ok(ByteSize(128 << 10)));
    assert_eq!(ByteSize::parse("1 TiB"), Ok(ByteSize(1 << 40)));
    assert_eq!(ByteSize::parse("1000"), Ok(ByteSize(1000)));
    assert_eq!(ByteSize::parse("1000B"), Ok(ByteSize(1000)));
    assert!(ByteSize::parse("").is_err());
    assert!(ByteSize::parse("MiB").is_err());
    assert!(ByteSize::parse("1.5GiB").is_err());
    assert_eq!(ByteSize(1 << 20).to_string(), "1MiB");
    assert_eq!(ByteSize(1000).to_string(), "1000");
}

#[test]
fn out_of_range_values_name_their_key_and_file() {
    let cases = [
            (
                "[storage]\nwrite_block_size = \"3MiB\"\n",
                "storage.write_block_size = 3MiB",
            ),
            (
                "[storage]\nwrite_block_size = \"64KiB\"\n",
                "storage.write_block_size = 64KiB",
            ),
            (
                "[storage]\nwrite_block_size = \"16MiB\"\n",
                "storage.write_block_size = 16MiB",
            ),
            (
                "[storage]\ndevice_size = \"1MiB\"\n",
                "storage.device_size = 1MiB",
            ),
            (
                "[storage]\ndefrag_lwm_pct = 100\n",
                "storage.defrag_lwm_pct = 100",
            ),
            ("[storage]\ndefrag_lwm_pct = 0\n", "storage.defrag_lwm_pct = 0"),
            (
                "[storage]\nstop_writes_free_pct = 60\n",
                "storage.stop_writes_free_pct = 60",
            ),
            (
                "[storage]\nflush_interval_ms = 0\n",
                "storage.flush_interval_ms = 0",
            ),
            (
                "[limits]\nmax_frame_bytes = \"32MiB\"\n",
                "limits.max_frame_bytes = 32MiB",
            ),
            (
                "[limits]\nmax_frame_bytes = 100\n",
                "limits.max_frame_bytes = 100",
            ),
            ("[limits]\nmax_connections = 0\n", "limits.max_connections = 0"),
            (
                "[client_encryption]\nenabled = true\n",
                "client_encryption.certificate = \"\"",
            ),
            (
                "[client_encryption]\noptional = true\ncertificate = \"a.pem\"\n",
                "client_encryption.private_key = \"\"",
            ),
            (
                "[client_encryption]\nrequire_client_auth = true\n",
                "client_encryption.require_client_auth = true",
            ),
            (
                "[client_encryption]\nenabled = true\ncertificate = \"a.pem\"\nprivate_key = \"k.pem\"\nrequire_client_auth = true\n",
                "client_encryption.ca = \"\"",
            ),
            (
                "[limits]\nmax_request_data_in_flight = 100\n",
                "limits.max_request_data_in_flight = 100",
            ),
            (
                "[limits]\nmax_request_data_in_flight_per_ip = 0\n",
                "limits.max_request_data_in_flight_per_ip = 0",
            ),
            (
                "[limits]\nservice_threads = 5000\n",
                "limits.service_threads = 5000",
            ),
            (
                "[limits]\nmax_requests_in_flight_per_connection = 40000\n",
                "limits.max_requests_in_flight_per_connection = 40000",
            ),
            ("[metrics]\nport = 9042\n", "metrics.port = 9042"),
            ("data_dir = \"\"\n", "data_dir"),
        ];
    for (text, expected) in cases {
        let config = Config::from_toml(text, Some(Path::new("/etc/hayate.toml"))).expect(text);
        let err = config.validate().expect_err(text).to_string();
        assert!(err.starts_with("/etc/hayate.toml: "), "{err}");
        assert!(err.contains(expected), "{text} gave {err}");
    }
}

#[test]
fn ports_out_of_range_and_bad_addresses_are_refused_by_the_parser() {
    let err = Config::from_toml("cql_port = 70000\n", None).expect_err("port > u16");
    assert!(err.to_string().contains("cql_port"), "{err}");
    let err = Config::from_toml("listen_address = \"localhost:9042\"\n", None).expect_err("not an IP");
    assert!(err.to_string().contains("listen_address"), "{err}");
}

#[test]
fn a_missing_file_says_which() {
    let err = Config::load(&cli(&["--config", "/nonexistent/hayate.toml"])).expect_err("missing file");
    assert!(err.to_string().contains("/nonexistent/hayate.toml"), "{err}");
}

#[test]
fn the_file_system_of_a_path_is_its_longest_mount_point() {
    let mounts = "sysfs /sys sysfs rw 0 0\n\
                      /dev/sda1 / ext4 rw 0 0\n\
                      tmpfs /dev/shm tmpfs rw 0 0\n\
                      tmpfs /mnt/my\\040disk tmpfs rw 0 0\n\
                      /dev/sdb1 /dev/shm/inner xfs rw 0 0\n";
    assert_eq!(
        filesystem_type(mounts, Path::new("/var/lib/hayate")),
        Some("ext4")
    );
    assert_eq!(
        filesystem_type(mounts, Path::new("/dev/shm/hayate")),
        Some("tmpfs")
    );
    assert_eq!(
        filesystem_type(mounts, Path::new("/dev/shm/inner/x")),
        Some("xfs")
    );
    assert_eq!(
        filesystem_type(mounts, Path::new("/mnt/my disk/x")),
        Some("tmpfs")
    );
    assert_eq!(filesystem_type(mounts, Path::new("/dev/shmx")), Some("ext4"));
}
