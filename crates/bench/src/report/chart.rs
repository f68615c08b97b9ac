//! A line chart over time drawn as SVG by hand: title, legend, axes with ticks and labels, grid,
//! one line per system. The PNG is this same SVG rasterized, so the two never disagree.

use std::fmt::Write as _;

use super::ticks::{self, Axis, TimeUnit};

pub const WIDTH: f64 = 960.0;
pub const HEIGHT: f64 = 540.0;
const PLOT_LEFT: f64 = 84.0;
const PLOT_RIGHT: f64 = WIDTH - 28.0;
const PLOT_TOP: f64 = 76.0;
const PLOT_BOTTOM: f64 = HEIGHT - 60.0;
/// The bundled font; a browser without it falls back to any sans-serif.
pub const FONT_FAMILY: &str = "DejaVu Sans";
/// Red and blue first, as in the reference benchmark's figures, then well-separated hues.
const PALETTE: [&str; 8] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// `(seconds since start, value)`; `None` is a gap (a second without operations).
    pub points: Vec<(f64, Option<f64>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub y_label: String,
    pub log_y: bool,
    pub series: Vec<Series>,
}

impl Chart {
    pub fn render_svg(&self) -> String {
        let values = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter_map(|(x, y)| y.map(|y| (*x, y)))
                .filter(|(_, y)| !self.log_y || *y > 0.0)
        };
        let x_max = values().map(|(x, _)| x).fold(0.0f64, f64::max);
        let unit = TimeUnit::for_span(x_max);
        let x_axis = ticks::linear(0.0, x_max / unit.seconds(), 8);
        let y_axis = if self.log_y {
            let min = values().map(|(_, y)| y).fold(f64::INFINITY, f64::min);
            let max = values().map(|(_, y)| y).fold(0.0f64, f64::max);
            ticks::logarithmic(min, max)
        } else {
            let max = values().map(|(_, y)| y).fold(0.0f64, f64::max);
            ticks::linear(0.0, max, 6)
        };
        let map_x = |x_s: f64| {
            PLOT_LEFT
                + (x_s / unit.seconds() - x_axis.min) / (x_axis.max - x_axis.min) * (PLOT_RIGHT - PLOT_LEFT)
        };
        let log_y = self.log_y;
        let map_y = |y: f64| {
            let fraction = if log_y {
                (y.log10() - y_axis.min.log10()) / (y_axis.max.log10() - y_axis.min.log10())
            } else {
                (y - y_axis.min) / (y_axis.max - y_axis.min)
            };
            PLOT_BOTTOM - fraction * (PLOT_BOTTOM - PLOT_TOP)
        };

        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT_FAMILY}, sans-serif">"#
        );
        let _ = writeln!(svg, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="30" font-size="19" text-anchor="middle" fill="#222">{}</text>"##,
            WIDTH / 2.0,
            escape(&self.title)
        );
        self.legend(&mut svg);
        grid_and_axes(&mut svg, &x_axis, &y_axis, log_y, &map_x, &map_y, unit);
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" font-size="14" text-anchor="middle" fill="#222">time since start ({})</text>"##,
            (PLOT_LEFT + PLOT_RIGHT) / 2.0,
            HEIGHT - 16.0,
            unit.name()
        );
        let _ = writeln!(
            svg,
            r##"<text transform="translate(22 {}) rotate(-90)" font-size="14" text-anchor="middle" fill="#222">{}</text>"##,
            (PLOT_TOP + PLOT_BOTTOM) / 2.0,
            escape(&self.y_label)
        );
        let _ = writeln!(
            svg,
            r#"<clipPath id="plot"><rect x="{PLOT_LEFT}" y="{PLOT_TOP}" width="{}" height="{}"/></clipPath>"#,
            PLOT_RIGHT - PLOT_LEFT,
            PLOT_BOTTOM - PLOT_TOP
        );
        let _ = writeln!(
            svg,
            r#"<g clip-path="url(#plot)" fill="none" stroke-width="1.6" stroke-linejoin="round">"#
        );
        for (index, series) in self.series.iter().enumerate() {
            let color = PALETTE[index % PALETTE.len()];
            for run in segments(&series.points, log_y) {
                if run.len() == 1 {
                    let (x, y) = run[0];
                    let _ = writeln!(
                        svg,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="1.6" fill="{color}" stroke="none"/>"#,
                        map_x(x),
                        map_y(y)
                    );
                    continue;
                }
                let mut path = String::new();
                for (i, (x, y)) in run.iter().enumerate() {
                    let _ = write!(
                        path,
                        "{}{:.1},{:.1}",
                        if i == 0 { "M" } else { " L" },
                        map_x(*x),
                        map_y(*y)
                    );
                }
                let _ = writeln!(svg, r#"<path d="{path}" stroke="{color}"/>"#);
            }
        }
        let _ = writeln!(svg, "</g>");
        let _ = writeln!(svg, "</svg>");
        svg
    }

    fn legend(&self, svg: &mut String) {
        // DejaVu Sans averages about 0.6 em per character; close enough to centre the row.
        let font_size = 13.0;
        let item_width = |name: &str| 30.0 + name.chars().count() as f64 * font_size * 0.6 + 18.0;
        let total: f64 = self.series.iter().map(|s| item_width(&s.name)).sum();
        let mut x = (WIDTH - total).max(PLOT_LEFT) / 2.0;
        let y = 54.0;
        for (index, series) in self.series.iter().enumerate() {
            let color = PALETTE[index % PALETTE.len()];
            let _ = writeln!(
                svg,
                r#"<line x1="{x:.1}" y1="{y}" x2="{:.1}" y2="{y}" stroke="{color}" stroke-width="3"/>"#,
                x + 24.0
            );
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{}" font-size="{font_size}" fill="#222">{}</text>"##,
                x + 30.0,
                y + 4.5,
                escape(&series.name)
            );
            x += item_width(&series.name);
        }
    }
}

fn grid_and_axes(
    svg: &mut String,
    x_axis: &Axis,
    y_axis: &Axis,
    log_y: bool,
    map_x: &dyn Fn(f64) -> f64,
    map_y: &dyn Fn(f64) -> f64,
    unit: TimeUnit,
) {
    let _ = writeln!(svg, r##"<g stroke="#e3e3e3" stroke-width="1">"##);
    for tick in &y_axis.ticks {
        let y = map_y(*tick);
        let _ = writeln!(
            svg,
            r#"<line x1="{PLOT_LEFT}" y1="{y:.1}" x2="{PLOT_RIGHT}" y2="{y:.1}"/>"#
        );
    }
    for tick in &x_axis.ticks {
        let x = map_x(tick * unit.seconds());
        let _ = writeln!(
            svg,
            r#"<line x1="{x:.1}" y1="{PLOT_TOP}" x2="{x:.1}" y2="{PLOT_BOTTOM}"/>"#
        );
    }
    let _ = writeln!(svg, "</g>");
    let _ = writeln!(
        svg,
        r##"<rect x="{PLOT_LEFT}" y="{PLOT_TOP}" width="{}" height="{}" fill="none" stroke="#444" stroke-width="1"/>"##,
        PLOT_RIGHT - PLOT_LEFT,
        PLOT_BOTTOM - PLOT_TOP
    );
    let _ = writeln!(svg, r##"<g font-size="12" fill="#333">"##);
    for tick in &y_axis.ticks {
        let y = map_y(*tick);
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            PLOT_LEFT - 7.0,
            y + 4.0,
            ticks::label(*tick)
        );
        let _ = writeln!(
            svg,
            r##"<line x1="{}" y1="{y:.1}" x2="{PLOT_LEFT}" y2="{y:.1}" stroke="#444"/>"##,
            PLOT_LEFT - 4.0
        );
    }
    for tick in &x_axis.ticks {
        let x = map_x(tick * unit.seconds());
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
            PLOT_BOTTOM + 18.0,
            ticks::label(*tick)
        );
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{PLOT_BOTTOM}" x2="{x:.1}" y2="{}" stroke="#444"/>"##,
            PLOT_BOTTOM + 4.0
        );
    }
    if log_y {
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" font-size="11" text-anchor="end" fill="#777">log scale</text>"##,
            PLOT_RIGHT - 4.0,
            PLOT_TOP - 6.0
        );
    }
    let _ = writeln!(svg, "</g>");
}

/// The unbroken runs of a series: a gap, or a value a log axis cannot show, ends a run.
pub fn segments(points: &[(f64, Option<f64>)], log_y: bool) -> Vec<Vec<(f64, f64)>> {
    let mut runs = Vec::new();
    let mut run = Vec::new();
    for (x, y) in points {
        match y {
            Some(y) if y.is_finite() && (!log_y || *y > 0.0) => run.push((*x, *y)),
            _ => {
                if !run.is_empty() {
                    runs.push(std::mem::take(&mut run));
                }
            }
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_split_lines() {
        let points = [
            (1.0, Some(1.0)),
            (2.0, None),
            (3.0, Some(3.0)),
            (4.0, Some(0.0)),
            (5.0, Some(5.0)),
        ];
        assert_eq!(segments(&points, false).len(), 2);
        // Zero cannot be drawn on a log axis.
        assert_eq!(segments(&points, true).len(), 3);
    }

    #[test]
    fn the_svg_names_every_series_and_escapes_text() {
        let chart = Chart {
            title: "p95 <read> & more".to_string(),
            y_label: "µs".to_string(),
            log_y: false,
            series: vec![
                Series {
                    name: "hayate".to_string(),
                    points: vec![(1.0, Some(10.0)), (2.0, Some(12.0))],
                },
                Series {
                    name: "cassandra".to_string(),
                    points: vec![(1.0, Some(400.0)), (2.0, None), (3.0, Some(420.0))],
                },
            ],
        };
        let svg = chart.render_svg();
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("p95 &lt;read&gt; &amp; more"));
        assert!(svg.contains(">hayate</text>"));
        assert!(svg.contains(">cassandra</text>"));
        assert_eq!(svg.matches("<path ").count(), 1);
        assert_eq!(svg.matches("<circle ").count(), 2);
    }
}
