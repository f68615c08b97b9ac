//! Axis ticks a reader can use: steps of 1, 2 or 5 times a power of ten on linear axes, powers
//! of ten (with 2 and 5 between when the range is short) on logarithmic ones.

/// A linear axis: `ticks` are the labelled values and `min..max` is widened to the outer ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub min: f64,
    pub max: f64,
    pub ticks: Vec<f64>,
}

/// About `target` ticks covering `min..=max`, on round values.
pub fn linear(min: f64, max: f64, target: usize) -> Axis {
    assert!(target >= 2);
    let (min, max) = if !(min.is_finite() && max.is_finite()) {
        (0.0, 1.0)
    } else if max - min <= f64::EPSILON * max.abs().max(1.0) {
        // A flat line still needs a scale around it.
        if min == 0.0 {
            (0.0, 1.0)
        } else {
            (min - min.abs() * 0.5, max + max.abs() * 0.5)
        }
    } else {
        (min, max)
    };
    let step = nice_step((max - min) / (target - 1) as f64);
    let first = (min / step).floor();
    let last = (max / step).ceil();
    let ticks: Vec<f64> = (0..=((last - first) as usize))
        .map(|i| clean((first + i as f64) * step))
        .collect();
    Axis {
        min: first * step,
        max: last * step,
        ticks,
    }
}

/// The round step nearest above `raw`: 1, 2, 2.5 or 5 times a power of ten.
pub fn nice_step(raw: f64) -> f64 {
    assert!(raw > 0.0 && raw.is_finite());
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 2.5 {
        2.5
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// A logarithmic axis over positive values: whole decades, with 2 and 5 added when fewer than
/// three decades are shown so that the axis has enough labels.
pub fn logarithmic(min: f64, max: f64) -> Axis {
    let min = if min > 0.0 && min.is_finite() { min } else { 1.0 };
    let max = if max > min && max.is_finite() {
        max
    } else {
        min * 10.0
    };
    let low = min.log10().floor() as i32;
    let high = (max.log10().ceil() as i32).max(low + 1);
    let mut ticks = Vec::new();
    for exponent in low..=high {
        let decade = 10f64.powi(exponent);
        ticks.push(clean(decade));
        if high - low < 3 && exponent < high {
            ticks.push(clean(decade * 2.0));
            ticks.push(clean(decade * 5.0));
        }
    }
    Axis {
        min: 10f64.powi(low),
        max: 10f64.powi(high),
        ticks,
    }
}

/// Removes the float noise of `i × step` (0.30000000000000004 → 0.3).
fn clean(value: f64) -> f64 {
    if value == 0.0 {
        return 0.0;
    }
    let digits = 12 - value.abs().log10().ceil() as i32;
    let scale = 10f64.powi(digits.clamp(-300, 300));
    (value * scale).round() / scale
}

/// A tick label: no trailing zeros, thousands as "k" and millions as "M" beyond 10,000.
pub fn label(value: f64) -> String {
    let abs = value.abs();
    if abs >= 10_000_000.0 {
        return format!("{}M", trim(value / 1_000_000.0));
    }
    if abs >= 10_000.0 {
        return format!("{}k", trim(value / 1_000.0));
    }
    trim(value)
}

fn trim(value: f64) -> String {
    let text = format!("{:.3}", value);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A time axis in the unit that suits its span: seconds, minutes or hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Minutes,
    Hours,
}

impl TimeUnit {
    pub fn for_span(span_s: f64) -> TimeUnit {
        if span_s > 3.0 * 3600.0 {
            TimeUnit::Hours
        } else if span_s > 5.0 * 60.0 {
            TimeUnit::Minutes
        } else {
            TimeUnit::Seconds
        }
    }

    pub fn seconds(self) -> f64 {
        match self {
            TimeUnit::Seconds => 1.0,
            TimeUnit::Minutes => 60.0,
            TimeUnit::Hours => 3600.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "s",
            TimeUnit::Minutes => "min",
            TimeUnit::Hours => "h",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round_and_cover_the_data() {
        let axis = linear(0.0, 97.3, 6);
        assert_eq!(axis.ticks, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!((axis.min, axis.max), (0.0, 100.0));
        let axis = linear(0.0, 0.7, 8);
        assert_eq!(axis.ticks, vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]);
        let axis = linear(0.0, 43_200.0, 6);
        assert_eq!(axis.ticks.last(), Some(&50_000.0));
        let axis = linear(1234.0, 1234.0, 5);
        assert!(axis.min < 1234.0 && axis.max > 1234.0);
        assert_eq!(linear(0.0, 0.0, 5).ticks.first(), Some(&0.0));
    }

    #[test]
    fn steps_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(13.0), 20.0);
        assert_eq!(nice_step(2.2), 2.5);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(0.0031), 0.005);
    }

    #[test]
    fn log_ticks_are_decades_with_subdivisions_on_short_ranges() {
        let axis = logarithmic(150.0, 90_000.0);
        assert_eq!(axis.ticks, vec![100.0, 1_000.0, 10_000.0, 100_000.0]);
        let axis = logarithmic(300.0, 4_000.0);
        assert_eq!(
            axis.ticks,
            vec![100.0, 200.0, 500.0, 1_000.0, 2_000.0, 5_000.0, 10_000.0]
        );
        assert_eq!((axis.min, axis.max), (100.0, 10_000.0));
        assert_eq!(logarithmic(0.0, 0.0).ticks.first(), Some(&1.0));
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(label(0.30000000000000004), "0.3");
        assert_eq!(label(2000.0), "2000");
        assert_eq!(label(25_000.0), "25k");
        assert_eq!(label(12_500_000.0), "12.5M");
        assert_eq!(label(-0.0), "0");
        assert_eq!(TimeUnit::for_span(43_200.0), TimeUnit::Hours);
        assert_eq!(TimeUnit::for_span(600.0), TimeUnit::Minutes);
        assert_eq!(TimeUnit::for_span(60.0), TimeUnit::Seconds);
    }
}
