//! Helpers for the metrics' unit tests: render a registry, read a sample, check the format.

use hayate_storage::StatsSnapshot;
use std::collections::BTreeMap;

use super::Metrics;

pub fn rendered(metrics: &Metrics) -> String {
    let mut out = String::new();
    metrics.render(&StatsSnapshot::default(), &mut out);
    out
}

/// The value of the sample line that starts with `prefix` (name and labels).
pub fn value(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no sample {prefix} in\n{text}"))
        .parse()
        .expect("a number")
}

/// Checks every line against the text format: comments are HELP or TYPE, each family's
/// TYPE comes once and before its samples, samples are `name{labels} value`.
pub fn check_format(text: &str) {
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (Some(keyword), Some(name), Some(tail)) = (words.next(), words.next(), words.next()) else {
                panic!("bad comment line {line:?}");
            };
            match keyword {
                "HELP" => assert!(!tail.is_empty()),
                "TYPE" => {
                    assert!(["counter", "gauge", "histogram"].contains(&tail), "{line}");
                    assert!(
                        typed.insert(name.to_string(), tail.to_string()).is_none(),
                        "TYPE twice: {line}"
                    );
                }
                _ => panic!("bad comment line {line:?}"),
            }
            continue;
        }
        let (series, number) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line:?}"));
        number
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let name = series.split('{').next().unwrap_or_default();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty(),
            "bad name in {line:?}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                for pair in labels[1..labels.len() - 1].split("\",") {
                    let (label, quoted) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                    assert!(
                        label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                        "{line}"
                    );
                    assert!(quoted.starts_with('"'), "{line}");
                }
            }
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|f| typed.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(typed.contains_key(family), "sample before its TYPE: {line:?}");
    }
}
