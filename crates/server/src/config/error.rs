//! Why the configuration could not be loaded, with the file and key to fix.

use std::fmt;
use std::path::PathBuf;

use super::CONFIG_FILE_MAX_BYTES;

/// Why the configuration could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    TooLarge {
        path: PathBuf,
        len_bytes: u64,
    },
    /// Not TOML, an unknown key, or a value of the wrong type; the message from the TOML
    /// parser names the key and shows the line.
    Parse {
        path: Option<PathBuf>,
        message: String,
    },
    /// A value outside the range the node supports.
    Invalid {
        path: Option<PathBuf>,
        key: &'static str,
        value: String,
        reason: String,
    },
}

/// Where a setting came from, for messages: the file, or the defaults and flags.
struct Origin<'a>(&'a Option<PathBuf>);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "{}", path.display()),
            None => f.write_str("configuration (defaults and command-line flags)"),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, source } => write!(
                f,
                "cannot read the configuration file {}: {source} (check the --config path)",
                path.display()
            ),
            ConfigError::TooLarge { path, len_bytes } => write!(
                f,
                "{} is {len_bytes} bytes, too large for a configuration file (at most {CONFIG_FILE_MAX_BYTES}); \
                 check the --config path",
                path.display()
            ),
            ConfigError::Parse { path, message } => write!(
                f,
                "{}: {} (every key is listed, with its default, in hayate.toml.example)",
                Origin(path),
                message.trim_end()
            ),
            ConfigError::Invalid {
                path,
                key,
                value,
                reason,
            } => write!(f, "{}: {key} = {value}: {reason}", Origin(path)),
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
