//! The node's log filter, changeable while it runs (`hayate setlogginglevel`, as `nodetool
//! setlogginglevel`; `hayate getlogginglevels`).
//!
//! The filter is a `tracing_subscriber` [`EnvFilter`] behind a reload layer. Its directives are
//! kept here as an ordered list, one per target (the one without a target is the default
//! level, nodetool's ROOT), so that setting one target's level keeps the others, and a reset
//! goes back to what the node started with.

use std::sync::{Mutex, OnceLock};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// The levels a directive may name.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

struct Logging {
    handle: reload::Handle<EnvFilter, Registry>,
    started_with: Vec<Directive>,
    now: Mutex<Vec<Directive>>,
}

/// One directive: `target=level`, or the default `level` (target `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Directive {
    target: Option<String>,
    level: String,
}

static LOGGING: OnceLock<Logging> = OnceLock::new();

/// Sets up logging to stderr with `directives` (falling back to `fallback` if they do not
/// parse); colours only where `ansi`.
pub fn init(directives: &str, fallback: &str, ansi: bool) {
    let (filter, text) = match EnvFilter::try_new(directives) {
        Ok(f) => (f, directives),
        Err(_) => (EnvFilter::new(fallback), fallback),
    };
    let (layer, handle) = reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(layer)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(ansi)
                .with_writer(std::io::stderr),
        )
        .init();
    let parsed = parse(text);
    let _ = LOGGING.set(Logging {
        handle,
        started_with: parsed.clone(),
        now: Mutex::new(parsed),
    });
}

fn parse(text: &str) -> Vec<Directive> {
    text.split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| match d.rsplit_once('=') {
            Some((target, level)) => Directive {
                target: Some(target.to_owned()),
                level: level.to_owned(),
            },
            None => Directive {
                target: None,
                level: d.to_owned(),
            },
        })
        .collect()
}

fn render(directives: &[Directive]) -> String {
    directives
        .iter()
        .map(|d| match &d.target {
            Some(t) => format!("{t}={}", d.level),
            None => d.level.clone(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `directives` with `target`'s level set to `level` (the default level for `None`), replacing
/// the directive it had; the default level comes first, as the filter's text shows it.
fn with_level(directives: &[Directive], target: Option<&str>, level: &str) -> Vec<Directive> {
    let mut out: Vec<Directive> = directives
        .iter()
        .filter(|d| d.target.as_deref() != target)
        .cloned()
        .collect();
    let directive = Directive {
        target: target.map(str::to_owned),
        level: level.to_owned(),
    };
    match target {
        None => out.insert(0, directive),
        Some(_) => out.push(directive),
    }
    out
}

fn logging() -> Result<&'static Logging, String> {
    LOGGING
        .get()
        .ok_or_else(|| "logging was not set up with a reloadable filter".to_owned())
}

/// Sets `target`'s level (the default level where `target` is `None`); both `None` go back to
/// the filter the node started with. Returns the filter now in force.
pub fn set_level(target: Option<&str>, level: Option<&str>) -> Result<String, String> {
    let logging = logging()?;
    let mut now = logging
        .now
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let next = match (target, level) {
        (None, None) => logging.started_with.clone(),
        (_, None) => return Err("name a level: off, error, warn, info, debug or trace".to_owned()),
        (target, Some(level)) => {
            let level = level.to_ascii_lowercase();
            if !LEVELS.contains(&level.as_str()) {
                return Err(format!(
                    "unknown level {level:?}: use off, error, warn, info, debug or trace"
                ));
            }
            if target.is_some_and(|t| t.is_empty() || t.contains([',', '=', ' '])) {
                return Err(format!(
                    "{:?} is not a log target (a module path such as hayate_storage::defrag)",
                    target.unwrap_or_default()
                ));
            }
            with_level(&now, target, &level)
        }
    };
    let text = render(&next);
    let filter = EnvFilter::try_new(&text).map_err(|e| format!("the filter {text:?} does not parse: {e}"))?;
    logging
        .handle
        .reload(filter)
        .map_err(|e| format!("could not change the log filter: {e}"))?;
    *now = next;
    tracing::info!(filter = %text, "log filter changed");
    Ok(text)
}

/// Each directive in force: (target, level), the default level's target being `ROOT`, as
/// nodetool names it.
pub fn levels() -> Result<Vec<(String, String)>, String> {
    let logging = logging()?;
    let now = logging
        .now
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(now
        .iter()
        .map(|d| {
            (
                d.target.clone().unwrap_or_else(|| "ROOT".to_owned()),
                d.level.to_uppercase(),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_replaces_its_targets_directive_and_keeps_the_others() {
        let started = parse("info,openraft=error,chitchat=error");
        assert_eq!(render(&started), "info,openraft=error,chitchat=error");
        let debug_storage = with_level(&started, Some("hayate_storage"), "debug");
        assert_eq!(
            render(&debug_storage),
            "info,openraft=error,chitchat=error,hayate_storage=debug"
        );
        let quiet = with_level(&debug_storage, None, "warn");
        assert_eq!(
            render(&quiet),
            "warn,openraft=error,chitchat=error,hayate_storage=debug"
        );
        let again = with_level(&quiet, Some("openraft"), "info");
        assert_eq!(
            render(&again),
            "warn,chitchat=error,hayate_storage=debug,openraft=info"
        );
    }
}
