//! ACT's `act_storage` configuration file: the same keys, defaults and derived rates, so that a
//! config written for Aerospike's ACT runs here unchanged.
//!
//! The format is one `key: value` per line, `#` starts a comment. Unlike ACT, which prints
//! "ignoring unknown config item" and then stops, and which reads a malformed number as 0, every
//! error here names the line and the key.

use std::fmt;
use std::path::PathBuf;

/// ACT's limit on devices in one test.
pub const DEVICE_COUNT_MAX: usize = 32;
/// Threads are cheap, but not free: a typo such as `service-threads: 40000` must not fork a
/// small machine to death.
pub const SERVICE_THREADS_MAX: u32 = 1024;
/// As in the Aerospike server (and ACT): the largest write block, which bounds record and
/// large-block sizes.
pub const WRITE_BLOCK_BYTES_MAX: u32 = 8 * 1024 * 1024;
/// Records are stored in 16-byte units ("rblocks") in the Aerospike server.
pub const RBLOCK_BYTES: u32 = 16;

/// The keys ACT's `act_storage` knows, in the order its sample config lists them.
pub const KEYS: &[&str] = &[
    "device-names",
    "file-size-mbytes",
    "service-threads",
    "test-duration-sec",
    "report-interval-sec",
    "microsecond-histograms",
    "read-reqs-per-sec",
    "write-reqs-per-sec",
    "record-bytes",
    "record-bytes-range-max",
    "large-block-op-kbytes",
    "replication-factor",
    "update-pct",
    "defrag-lwm-pct",
    "no-defrag-reads",
    "compress-pct",
    "disable-odsync",
    "commit-to-device",
    "tomb-raider",
    "tomb-raider-sleep-usec",
    "max-lag-sec",
];

/// A parsed configuration, with ACT's defaults for the keys the file leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub device_names: Vec<PathBuf>,
    /// Non-zero: the devices are files, created and filled to this size. Zero: raw devices.
    pub file_size_bytes: u64,
    /// Zero means "5 per CPU", ACT's default, resolved by [`Config::service_threads_resolved`].
    pub service_threads: u32,
    pub test_duration_sec: u64,
    pub report_interval_sec: u64,
    pub microsecond_histograms: bool,
    pub read_reqs_per_sec: u32,
    pub write_reqs_per_sec: u32,
    pub record_bytes: u32,
    /// Zero: every record is `record_bytes`. Otherwise sizes are uniform in
    /// `record_bytes..=record_bytes_range_max`.
    pub record_bytes_range_max: u32,
    pub large_block_op_bytes: u32,
    pub replication_factor: u32,
    pub update_pct: u32,
    pub defrag_lwm_pct: u32,
    pub no_defrag_reads: bool,
    pub compress_pct: u32,
    pub disable_odsync: bool,
    pub commit_to_device: bool,
    pub tomb_raider: bool,
    pub tomb_raider_sleep_us: u32,
    /// Zero: never stop, however far behind the schedule the device falls.
    pub max_lag_sec: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            device_names: Vec::new(),
            file_size_bytes: 0,
            service_threads: 0,
            test_duration_sec: 0,
            report_interval_sec: 1,
            microsecond_histograms: false,
            read_reqs_per_sec: 0,
            write_reqs_per_sec: 0,
            record_bytes: 1536,
            record_bytes_range_max: 0,
            large_block_op_bytes: 128 * 1024,
            replication_factor: 1,
            update_pct: 0,
            defrag_lwm_pct: 50,
            no_defrag_reads: false,
            compress_pct: 100,
            disable_odsync: false,
            commit_to_device: false,
            tomb_raider: false,
            tomb_raider_sleep_us: 0,
            max_lag_sec: 10,
        }
    }
}

/// Request rates that follow from the configuration, computed as ACT computes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    /// `record-bytes` rounded up to 16 bytes, and the same for the range maximum.
    pub record_stored_bytes: u32,
    pub record_stored_bytes_max: u32,
    /// Client reads plus the reads that updates cause (`update-pct` of the writes).
    pub internal_read_reqs_per_sec: u32,
    /// Individual record writes: only with `commit-to-device`, otherwise writes are all done
    /// through large blocks.
    pub internal_write_reqs_per_sec: u32,
    pub large_block_reads_per_sec: f64,
    pub large_block_writes_per_sec: f64,
}

#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    UnknownKey {
        line: usize,
        key: String,
    },
    MissingValue {
        line: usize,
        key: &'static str,
    },
    BadValue {
        line: usize,
        key: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A value that parsed but that the test cannot run with, alone or with another key.
    Invalid {
        key: &'static str,
        reason: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, source } => {
                write!(f, "cannot read config file {}: {source}", path.display())
            }
            ConfigError::UnknownKey { line, key } => write!(
                f,
                "config line {line}: unknown key '{key}'; act_storage's keys are: {}",
                KEYS.join(", ")
            ),
            ConfigError::MissingValue { line, key } => {
                write!(f, "config line {line}: '{key}' has no value")
            }
            ConfigError::BadValue {
                line,
                key,
                value,
                expected,
            } => write!(
                f,
                "config line {line}: '{key}: {value}' is not valid; expected {expected}"
            ),
            ConfigError::Invalid { key, reason } => write!(f, "config '{key}': {reason}"),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Config {
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&text)
    }

    /// Parses the text of a config file and checks it, as ACT does before it starts.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.split('#').next().unwrap_or("");
            let content = content.trim();
            if content.is_empty() {
                continue;
            }
            // ACT splits the tag at the first ':' or white space.
            let (tag, rest) = match content.find(|c: char| c == ':' || c.is_whitespace()) {
                Some(at) => (&content[..at], &content[at + 1..]),
                None => (content, ""),
            };
            let value = rest.trim_start_matches(|c: char| c == ':' || c.is_whitespace());
            let value = value.trim();
            let Some(&key) = KEYS.iter().find(|k| **k == tag) else {
                return Err(ConfigError::UnknownKey {
                    line,
                    key: tag.to_string(),
                });
            };
            if value.is_empty() {
                return Err(ConfigError::MissingValue { line, key });
            }
            config.set(line, key, value)?;
        }
        config.check()?;
        Ok(config)
    }

    fn set(&mut self, line: usize, key: &'static str, value: &str) -> Result<(), ConfigError> {
        let uint = || parse_u32(line, key, value);
        let yes_no = || parse_yes_no(line, key, value);
        match key {
            "device-names" => {
                self.device_names = value
                    .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
                    .filter(|name| !name.is_empty())
                    .map(PathBuf::from)
                    .collect();
            }
            "file-size-mbytes" => self.file_size_bytes = u64::from(uint()?) << 20,
            "service-threads" => self.service_threads = uint()?,
            "test-duration-sec" => self.test_duration_sec = u64::from(uint()?),
            "report-interval-sec" => self.report_interval_sec = u64::from(uint()?),
            "microsecond-histograms" => self.microsecond_histograms = yes_no()?,
            "read-reqs-per-sec" => self.read_reqs_per_sec = uint()?,
            "write-reqs-per-sec" => self.write_reqs_per_sec = uint()?,
            "record-bytes" => self.record_bytes = uint()?,
            "record-bytes-range-max" => self.record_bytes_range_max = uint()?,
            "large-block-op-kbytes" => {
                self.large_block_op_bytes = uint()?.checked_mul(1024).ok_or(ConfigError::BadValue {
                    line,
                    key,
                    value: value.to_string(),
                    expected: "a size in KiB of at most 8192",
                })?
            }
            "replication-factor" => self.replication_factor = uint()?,
            "update-pct" => self.update_pct = uint()?,
            "defrag-lwm-pct" => self.defrag_lwm_pct = uint()?,
            "no-defrag-reads" => self.no_defrag_reads = yes_no()?,
            "compress-pct" => self.compress_pct = uint()?,
            "disable-odsync" => self.disable_odsync = yes_no()?,
            "commit-to-device" => self.commit_to_device = yes_no()?,
            "tomb-raider" => self.tomb_raider = yes_no()?,
            "tomb-raider-sleep-usec" => self.tomb_raider_sleep_us = uint()?,
            "max-lag-sec" => self.max_lag_sec = u64::from(uint()?),
            _ => unreachable!("key {key} is in KEYS but has no setter"),
        }
        Ok(())
    }

    /// ACT's own checks, in its order, plus the bounds this implementation needs.
    fn check(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, reason: &str| {
            Err(ConfigError::Invalid {
                key,
                reason: reason.to_string(),
            })
        };
        if self.device_names.is_empty() {
            return invalid("device-names", "at least one device or file is required");
        }
        if self.device_names.len() > DEVICE_COUNT_MAX {
            return invalid("device-names", "at most 32 devices");
        }
        if self.service_threads > SERVICE_THREADS_MAX {
            return invalid("service-threads", "at most 1024");
        }
        if self.test_duration_sec == 0 {
            return invalid("test-duration-sec", "must be set and non-zero");
        }
        if self.report_interval_sec == 0 {
            return invalid("report-interval-sec", "must be non-zero");
        }
        if self.record_bytes == 0 || self.record_bytes > WRITE_BLOCK_BYTES_MAX {
            return invalid("record-bytes", "must be 1 to 8388608");
        }
        if self.record_bytes_range_max != 0
            && (self.record_bytes_range_max <= self.record_bytes
                || self.record_bytes_range_max > WRITE_BLOCK_BYTES_MAX)
        {
            return invalid(
                "record-bytes-range-max",
                "must be 0 (off) or above record-bytes and at most 8388608",
            );
        }
        if self.large_block_op_bytes == 0
            || self.large_block_op_bytes > WRITE_BLOCK_BYTES_MAX
            || !self.large_block_op_bytes.is_power_of_two()
        {
            return invalid("large-block-op-kbytes", "must be a power of 2 from 1 to 8192");
        }
        if self.record_stored_bytes_max() > self.large_block_op_bytes {
            return invalid(
                "record-bytes",
                "records must fit in a large block (large-block-op-kbytes)",
            );
        }
        if self.replication_factor == 0 {
            return invalid("replication-factor", "must be at least 1");
        }
        if self.update_pct > 100 {
            return invalid("update-pct", "must be 0 to 100");
        }
        if self.defrag_lwm_pct >= 100 {
            return invalid("defrag-lwm-pct", "must be below 100");
        }
        if self.compress_pct > 100 {
            return invalid("compress-pct", "must be 0 to 100");
        }
        if self.disable_odsync && self.commit_to_device {
            return invalid(
                "disable-odsync",
                "cannot be combined with commit-to-device, which needs O_DSYNC",
            );
        }
        if self.read_reqs_per_sec == 0 && self.write_reqs_per_sec == 0 {
            return invalid(
                "read-reqs-per-sec",
                "read-reqs-per-sec and write-reqs-per-sec can't both be zero",
            );
        }
        Ok(())
    }

    pub fn record_stored_bytes(&self) -> u32 {
        round_up_to_rblock(self.record_bytes)
    }

    pub fn record_stored_bytes_max(&self) -> u32 {
        if self.record_bytes_range_max == 0 {
            self.record_stored_bytes()
        } else {
            round_up_to_rblock(self.record_bytes_range_max)
        }
    }

    /// `service-threads`, or ACT's default of five per CPU.
    pub fn service_threads_resolved(&self, cpu_count: usize) -> u32 {
        if self.service_threads != 0 {
            return self.service_threads;
        }
        let threads = u32::try_from(cpu_count.saturating_mul(5)).unwrap_or(SERVICE_THREADS_MAX);
        threads.clamp(1, SERVICE_THREADS_MAX)
    }

    /// The rates ACT derives: updates add reads, replication multiplies writes, and each written
    /// large block is, on average, read and written again by defrag once it falls below
    /// `defrag-lwm-pct` live, which makes the write amplification `100 / (100 - lwm)`.
    pub fn derive(&self) -> Derived {
        let internal_read_reqs_per_sec = self
            .read_reqs_per_sec
            .saturating_add((u64::from(self.write_reqs_per_sec) * u64::from(self.update_pct) / 100) as u32);
        let replica_write_reqs_per_sec = self.replication_factor.saturating_mul(self.write_reqs_per_sec);
        let record_stored_bytes = self.record_stored_bytes();
        let record_stored_bytes_max = self.record_stored_bytes_max();
        // ACT assumes sizes are spread evenly over the range, and counts whole records per block.
        let record_stored_bytes_avg = (record_stored_bytes + record_stored_bytes_max) / 2;
        let records_per_large_block = self.large_block_op_bytes / record_stored_bytes_avg;
        assert!(
            records_per_large_block >= 1,
            "check() keeps records within a large block"
        );
        let original_large_block_writes_per_sec =
            f64::from(replica_write_reqs_per_sec) / f64::from(records_per_large_block);
        let defrag_write_amplification = 100.0 / f64::from(100 - self.defrag_lwm_pct);
        let mut large_block_reads_per_sec = original_large_block_writes_per_sec * defrag_write_amplification;
        let (large_block_writes_per_sec, internal_write_reqs_per_sec) = if self.commit_to_device {
            // Each record is written on its own; only defrag writes go through large blocks.
            (
                original_large_block_writes_per_sec * (defrag_write_amplification - 1.0),
                replica_write_reqs_per_sec,
            )
        } else {
            (large_block_reads_per_sec, 0)
        };
        if self.no_defrag_reads {
            large_block_reads_per_sec = 0.0;
        }
        Derived {
            record_stored_bytes,
            record_stored_bytes_max,
            internal_read_reqs_per_sec,
            internal_write_reqs_per_sec,
            large_block_reads_per_sec,
            large_block_writes_per_sec,
        }
    }

    /// The configuration echoed in ACT's layout, so that a reader (or ACT's `act_latency.py`)
    /// finds the keys where it expects them.
    pub fn echo(&self, service_threads: u32) -> String {
        use fmt::Write as _;
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        let names: Vec<String> = self
            .device_names
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let mut out = String::new();
        let _ = writeln!(out, "ACT-STORAGE CONFIGURATION");
        let _ = writeln!(out, "device-names: {}", names.join(" "));
        let _ = writeln!(out, "num-devices: {}", self.device_names.len());
        if self.file_size_bytes != 0 {
            let _ = writeln!(out, "file-size-mbytes: {}", self.file_size_bytes >> 20);
        }
        let _ = writeln!(out, "service-threads: {service_threads}");
        let _ = writeln!(out, "test-duration-sec: {}", self.test_duration_sec);
        let _ = writeln!(out, "report-interval-sec: {}", self.report_interval_sec);
        let _ = writeln!(
            out,
            "microsecond-histograms: {}",
            yes_no(self.microsecond_histograms)
        );
        let _ = writeln!(out, "read-reqs-per-sec: {}", self.read_reqs_per_sec);
        let _ = writeln!(out, "write-reqs-per-sec: {}", self.write_reqs_per_sec);
        let _ = writeln!(out, "record-bytes: {}", self.record_bytes);
        let _ = writeln!(out, "record-bytes-range-max: {}", self.record_bytes_range_max);
        let _ = writeln!(out, "large-block-op-kbytes: {}", self.large_block_op_bytes / 1024);
        let _ = writeln!(out, "replication-factor: {}", self.replication_factor);
        let _ = writeln!(out, "update-pct: {}", self.update_pct);
        let _ = writeln!(out, "defrag-lwm-pct: {}", self.defrag_lwm_pct);
        let _ = writeln!(out, "no-defrag-reads: {}", yes_no(self.no_defrag_reads));
        let _ = writeln!(out, "compress-pct: {}", self.compress_pct);
        let _ = writeln!(out, "disable-odsync: {}", yes_no(self.disable_odsync));
        let _ = writeln!(out, "commit-to-device: {}", yes_no(self.commit_to_device));
        let _ = writeln!(out, "tomb-raider: {}", yes_no(self.tomb_raider));
        let _ = writeln!(out, "tomb-raider-sleep-usec: {}", self.tomb_raider_sleep_us);
        let _ = writeln!(out, "max-lag-sec: {}", self.max_lag_sec);
        let derived = self.derive();
        let _ = writeln!(out);
        let _ = writeln!(out, "DERIVED CONFIGURATION");
        let _ = writeln!(
            out,
            "record-stored-bytes: {} ... {}",
            derived.record_stored_bytes, derived.record_stored_bytes_max
        );
        let _ = writeln!(
            out,
            "internal-read-reqs-per-sec: {}",
            derived.internal_read_reqs_per_sec
        );
        let _ = writeln!(
            out,
            "internal-write-reqs-per-sec: {}",
            derived.internal_write_reqs_per_sec
        );
        let _ = writeln!(
            out,
            "large-block-reads-per-sec: {:.2}",
            derived.large_block_reads_per_sec
        );
        let _ = writeln!(
            out,
            "large-block-writes-per-sec: {:.2}",
            derived.large_block_writes_per_sec
        );
        out
    }
}

fn round_up_to_rblock(bytes: u32) -> u32 {
    bytes.div_ceil(RBLOCK_BYTES) * RBLOCK_BYTES
}

fn parse_u32(line: usize, key: &'static str, value: &str) -> Result<u32, ConfigError> {
    value.parse::<u32>().map_err(|_| ConfigError::BadValue {
        line,
        key,
        value: value.to_string(),
        expected: "an unsigned 32-bit integer",
    })
}

fn parse_yes_no(line: usize, key: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        _ => Err(ConfigError::BadValue {
            line,
            key,
            value: value.to_string(),
            expected: "yes or no",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "device-names: /dev/sdc\ntest-duration-sec: 60\n\
                           read-reqs-per-sec: 2000\nwrite-reqs-per-sec: 1000\n";

    fn parse_ok(text: &str) -> Config {
        match Config::parse(text) {
            Ok(config) => config,
            Err(error) => panic!("config should parse: {error}"),
        }
    }

    #[test]
    fn the_sample_config_takes_acts_defaults() {
        let config = parse_ok(&format!("# ACT sample\n{MINIMAL}# record-bytes: 9\n"));
        assert_eq!(config.device_names, vec![PathBuf::from("/dev/sdc")]);
        assert_eq!(config.record_bytes, 1536);
        assert_eq!(config.large_block_op_bytes, 128 * 1024);
        assert_eq!(config.defrag_lwm_pct, 50);
        assert_eq!(config.report_interval_sec, 1);
        assert_eq!(config.max_lag_sec, 10);
        assert_eq!(config.service_threads_resolved(2), 10);
    }

    #[test]
    fn keys_accept_acts_separators_and_comments() {
        let config = parse_ok(
            "device-names: /dev/a,/dev/b;/dev/c  # three\nfile-size-mbytes 64\n\
             test-duration-sec:30\nread-reqs-per-sec: 10\nmicrosecond-histograms: yes\n",
        );
        assert_eq!(config.device_names.len(), 3);
        assert_eq!(config.file_size_bytes, 64 << 20);
        assert_eq!(config.test_duration_sec, 30);
        assert!(config.microsecond_histograms);
    }

    #[test]
    fn an_unknown_key_names_itself_and_its_line() {
        let text = format!("{MINIMAL}\nread-reqs-per-second: 5\n");
        let error = Config::parse(&text).err().map(|e| e.to_string());
        let error = error.unwrap_or_default();
        assert!(error.contains("line 6"), "{error}");
        assert!(error.contains("'read-reqs-per-second'"), "{error}");
    }

    #[test]
    fn a_malformed_number_is_an_error_not_zero() {
        let error = Config::parse(&format!("{MINIMAL}record-bytes: 1k5\n"));
        assert!(matches!(
            error,
            Err(ConfigError::BadValue {
                line: 5,
                key: "record-bytes",
                ..
            })
        ));
        let error = Config::parse(&format!("{MINIMAL}tomb-raider: maybe\n"));
        assert!(matches!(error, Err(ConfigError::BadValue { .. })));
    }

    #[test]
    fn acts_checks_reject_impossible_settings() {
        for (extra, key) in [
            ("large-block-op-kbytes: 100\n", "large-block-op-kbytes"),
            ("defrag-lwm-pct: 100\n", "defrag-lwm-pct"),
            ("record-bytes-range-max: 100\n", "record-bytes-range-max"),
            ("disable-odsync: yes\ncommit-to-device: yes\n", "disable-odsync"),
        ] {
            match Config::parse(&format!("{MINIMAL}{extra}")) {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{extra:?} should be invalid, got {other:?}"),
            }
        }
        assert!(matches!(
            Config::parse("device-names: /dev/a\nread-reqs-per-sec: 1\n"),
            Err(ConfigError::Invalid {
                key: "test-duration-sec",
                ..
            })
        ));
    }

    #[test]
    fn the_1x_load_derives_acts_large_block_rates() {
        // 128 KiB / 1536 B = 85 whole records per block; 1000 writes/s fill 11.76 blocks/s,
        // and defrag at 50% doubles that.
        let derived = parse_ok(MINIMAL).derive();
        assert_eq!(derived.record_stored_bytes, 1536);
        assert_eq!(derived.internal_read_reqs_per_sec, 2000);
        assert_eq!(derived.internal_write_reqs_per_sec, 0);
        let expected = 1000.0 / 85.0 * 2.0;
        assert!((derived.large_block_writes_per_sec - expected).abs() < 1e-9);
        assert!((derived.large_block_reads_per_sec - expected).abs() < 1e-9);
    }

    #[test]
    fn updates_replication_and_commit_to_device_change_the_rates() {
        let config = parse_ok(&format!(
            "{MINIMAL}record-bytes: 1500\nupdate-pct: 50\nreplication-factor: 2\n\
             defrag-lwm-pct: 60\ncommit-to-device: yes\n"
        ));
        let derived = config.derive();
        // 1500 rounds up to 1504; 131072 / 1504 = 87 records per block.
        assert_eq!(derived.record_stored_bytes, 1504);
        assert_eq!(derived.internal_read_reqs_per_sec, 2500);
        assert_eq!(derived.internal_write_reqs_per_sec, 2000);
        let original = 2000.0 / 87.0;
        assert!((derived.large_block_reads_per_sec - original * 2.5).abs() < 1e-9);
        assert!((derived.large_block_writes_per_sec - original * 1.5).abs() < 1e-9);
        let no_defrag_reads = parse_ok(&format!("{MINIMAL}no-defrag-reads: yes\n")).derive();
        assert_eq!(no_defrag_reads.large_block_reads_per_sec, 0.0);
    }

    #[test]
    fn a_size_range_uses_the_average_record() {
        let config = parse_ok(&format!(
            "{MINIMAL}record-bytes: 1000\nrecord-bytes-range-max: 3000\n"
        ));
        let derived = config.derive();
        assert_eq!(derived.record_stored_bytes, 1008);
        assert_eq!(derived.record_stored_bytes_max, 3008);
        // Average 2008 bytes: 65 records per 128 KiB block.
        let expected = 1000.0 / 65.0 * 2.0;
        assert!((derived.large_block_writes_per_sec - expected).abs() < 1e-9);
    }
}
