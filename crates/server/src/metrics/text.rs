//! The text exposition format's lines: a family's HELP and TYPE, a sample with its labels,
//! and numbers of seconds written as decimals.

use std::fmt::Write as _;

pub(super) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

pub(super) fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (label, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(label);
            out.push_str("=\"");
            escape_label_value(value, out);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Label values escape backslash, double quote and newline, per the format.
fn escape_label_value(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Microseconds as a decimal number of seconds ("0.00005", not "5e-5").
pub(super) fn seconds(us: u64) -> String {
    let whole = us / 1_000_000;
    let fraction = us % 1_000_000;
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_written_as_decimals() {
        assert_eq!(seconds(50), "0.00005");
        assert_eq!(seconds(2_500), "0.0025");
        assert_eq!(seconds(1_000_000), "1");
        assert_eq!(seconds(1_500_001), "1.500001");
        assert_eq!(seconds(0), "0");
    }
}
