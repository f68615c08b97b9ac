//! Loading: the file `--config` names (or the defaults), the flags on top, then validation;
//! and direct I/O turned off where the data directory is on a tmpfs.

use std::path::{Path, PathBuf};

use super::{Cli, Config, ConfigError, CONFIG_FILE_MAX_BYTES};

impl Config {
    /// Reads the file `--config` names, if any, applies the flags on top and validates the
    /// result. A relative `data_dir` stays relative to the working directory, as the flag's.
    pub fn load(cli: &Cli) -> Result<Config, ConfigError> {
        let mut config = match &cli.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        config.apply_flags(cli);
        config.validate()?;
        config.disable_direct_io_on_tmpfs();
        Ok(config)
    }

    /// Parses TOML text; `source` is only used in messages.
    pub fn from_toml(text: &str, source: Option<&Path>) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: source.map(Path::to_path_buf),
            message: e.to_string(),
        })?;
        config.source = source.map(Path::to_path_buf);
        Ok(config)
    }

    fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let read_error = |source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        };
        let len_bytes = std::fs::metadata(path).map_err(read_error)?.len();
        if len_bytes > CONFIG_FILE_MAX_BYTES {
            return Err(ConfigError::TooLarge {
                path: path.to_path_buf(),
                len_bytes,
            });
        }
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        Config::from_toml(&text, Some(path))
    }

    fn apply_flags(&mut self, cli: &Cli) {
        if let Some(name) = &cli.cluster_name {
            self.cluster_name = name.clone();
        }
        if let Some(dir) = &cli.data_dir {
            self.data_dir = dir.clone();
        }
        if let Some(address) = cli.listen_address {
            self.listen_address = address;
        }
        if let Some(port) = cli.cql_port {
            self.cql_port = port;
        }
        // A switch can only turn the setting on; the file is the place to turn it off.
        if cli.commit_to_device {
            self.storage.commit_to_device = true;
        }
        if let Some(port) = cli.metrics_port {
            self.metrics.port = port;
        }
        if let Some(level) = &cli.log_level {
            self.log_level = level.clone();
        }
        if let Some(seeds) = &cli.seeds {
            self.cluster.seeds = seeds.clone();
        }
        if let Some(port) = cli.storage_port {
            self.cluster.storage_port = port;
        }
        if let Some(dc) = &cli.data_center {
            self.cluster.data_center = dc.clone();
        }
        if let Some(rack) = &cli.rack {
            self.cluster.rack = rack.clone();
        }
        if let Some(n) = cli.num_tokens {
            self.cluster.num_tokens = n;
        }
        if let Some(ip) = cli.replace_address {
            self.cluster.replace_address = Some(ip);
        }
        if let Some(size) = cli.device_size {
            self.storage.device_size_bytes = size;
        }
    }

    /// tmpfs refuses `O_DIRECT`, so a node whose data is in RAM anyway (a test, or a
    /// `/dev/shm` directory) would fail to open its device. Rather than make the operator
    /// learn that, turn direct I/O off there and say so.
    fn disable_direct_io_on_tmpfs(&mut self) {
        if !self.storage.direct_io {
            return;
        }
        let paths: Vec<PathBuf> = if self.storage.devices.is_empty() {
            vec![self.data_dir.clone()]
        } else {
            self.storage.devices.iter().map(|d| d.path.clone()).collect()
        };
        if let Some(path) = paths.iter().find(|p| is_on_tmpfs(p)) {
            self.storage.direct_io = false;
            self.warnings.push(format!(
                "{} is on tmpfs, which refuses O_DIRECT: opening devices without it \
                 (set storage.direct_io = false to silence this)",
                path.display()
            ));
        }
    }
}

/// Whether `path` (or, if it does not exist yet, its nearest existing ancestor) is on a tmpfs,
/// from the mount table. Any doubt (no `/proc`, an unreadable path) answers no, which leaves
/// direct I/O on: the engine then reports the device it cannot open.
fn is_on_tmpfs(path: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let Some(existing) = path.ancestors().find_map(|p| {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        p.canonicalize().ok()
    }) else {
        return false;
    };
    filesystem_type(&mounts, &existing).is_some_and(|fs| fs == "tmpfs")
}

/// The file system type of the longest mount point that contains `path`, from text in the
/// format of `/proc/self/mounts` (`device mount_point type options dump pass`, spaces in
/// the mount point written `\040`).
pub(super) fn filesystem_type<'a>(mounts: &'a str, path: &Path) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for line in mounts.lines() {
        let mut fields = line.split(' ');
        let (Some(_device), Some(mount_point), Some(fs_type)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let mount_point = mount_point.replace("\\040", " ");
        let mount_point = Path::new(&mount_point);
        if path.starts_with(mount_point) {
            let depth = mount_point.components().count();
            if best.is_none_or(|(best_depth, _)| depth >= best_depth) {
                best = Some((depth, fs_type));
            }
        }
    }
    best.map(|(_, fs_type)| fs_type)
}
