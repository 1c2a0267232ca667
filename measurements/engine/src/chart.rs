//! Bar charts as SVG, drawn by the measurement programs beside their markdown tables (no
//! dependency: the file is written by hand). A chart is groups of horizontal bars, one group per
//! scenario and one bar per library; a bar's length is its value (a median, a rate) and an
//! optional whisker reaches to a high percentile, so a picture shows where the tail is.

use std::fmt::Write;

/// One bar: a library's value in one group.
#[derive(Debug, Clone)]
pub struct Bar {
    /// The library (the legend; its colour is fixed per name).
    pub series: &'static str,
    /// The bar's length (NaN: drawn as "not measured").
    pub value: f64,
    /// The whisker's end (a high percentile), if any.
    pub high: Option<f64>,
}

/// One scenario's bars.
#[derive(Debug, Clone)]
pub struct Group {
    /// The scenario, left of its bars.
    pub label: String,
    /// Its bars, top to bottom.
    pub bars: Vec<Bar>,
}

/// A whole chart.
#[derive(Debug, Clone)]
pub struct Bars {
    /// The heading.
    pub title: String,
    /// What the axis counts ("ms", "acquisitions/s").
    pub unit: String,
    /// A line under the chart: what the bar and the whisker are, the machine, the command.
    pub note: String,
    /// The scenarios, top to bottom.
    pub groups: Vec<Group>,
}

const WIDTH: f64 = 900.0;
const LABEL: f64 = 300.0;
const PLOT: f64 = 470.0;
const BAR: f64 = 14.0;
const GAP: f64 = 12.0;
const TOP: f64 = 56.0;
/// The note's line length, in characters (11 px sans-serif fits about this many in the width).
const NOTE_CHARS: usize = 140;

/// The colour of a library's bars: ours blue (our blocking API beside our async one light
/// blue), Curator orange, anything else grey.
fn colour(series: &str) -> &'static str {
    match series {
        "zk-locks" | "zk-locks async" => "#2563eb",
        s if s.starts_with("zk-locks") => "#93c5fd",
        s if s.starts_with("Curator") => "#ea580c",
        _ => "#6b7280",
    }
}

/// A round axis end at or above `max` (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten:
/// its fifths stay round and the longest bar fills most of the width).
fn axis_end(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(max.log10().floor());
    [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|end| *end >= max)
        .unwrap_or(10.0 * power)
}

/// A number as the chart prints it: no more digits than it needs.
fn short(v: f64) -> String {
    match v.abs() {
        0.0 => "0".into(),
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// XML's special characters escaped, for labels taken from scenario names.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart as a standalone SVG document.
pub fn render(chart: &Bars) -> String {
    let max = chart
        .groups
        .iter()
        .flat_map(|g| &g.bars)
        .flat_map(|b| [b.value, b.high.unwrap_or(f64::NAN)])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let end = axis_end(max);
    let x = |v: f64| LABEL + PLOT * (v / end).clamp(0.0, 1.0);
    let rows: usize = chart.groups.iter().map(|g| g.bars.len()).sum();
    let plot_height = rows as f64 * (BAR + 3.0) + chart.groups.len() as f64 * GAP;
    let note_lines = wrap(&chart.note, NOTE_CHARS).len() as f64;
    let height = TOP + plot_height + 52.0 + 14.0 * note_lines;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        escape(&chart.title)
    );
    // Grid lines and their values, every fifth of the axis.
    for i in 0..=5 {
        let v = end * i as f64 / 5.0;
        let gx = x(v);
        let _ = write!(
            svg,
            "<line x1=\"{gx:.1}\" y1=\"{TOP}\" x2=\"{gx:.1}\" y2=\"{:.1}\" stroke=\"#e5e7eb\"/>\n\
             <text x=\"{gx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#374151\">{}</text>\n",
            TOP + plot_height,
            TOP + plot_height + 14.0,
            short(v)
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#374151\">{}</text>",
        LABEL + PLOT / 2.0,
        TOP + plot_height + 30.0,
        escape(&chart.unit)
    );
    let mut y = TOP + GAP / 2.0;
    for group in &chart.groups {
        let mid = y + group.bars.len() as f64 * (BAR + 3.0) / 2.0;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LABEL - 8.0,
            mid + 4.0,
            escape(&group.label)
        );
        for bar in &group.bars {
            let fill = colour(bar.series);
            if bar.value.is_finite() {
                let _ = writeln!(
                    svg,
                    "<rect x=\"{LABEL}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{BAR}\" \
                     fill=\"{fill}\"><title>{}: {}</title></rect>",
                    x(bar.value) - LABEL,
                    bar.series,
                    short(bar.value)
                );
            }
            let mut text_at = x(if bar.value.is_finite() {
                bar.value
            } else {
                0.0
            });
            if let Some(high) = bar.high.filter(|h| h.is_finite()) {
                let (x0, x1, cy) = (x(bar.value.max(0.0)), x(high), y + BAR / 2.0);
                let _ = writeln!(
                    svg,
                    "<line x1=\"{x0:.1}\" y1=\"{cy:.1}\" x2=\"{x1:.1}\" y2=\"{cy:.1}\" \
                     stroke=\"#111827\"/><line x1=\"{x1:.1}\" y1=\"{:.1}\" x2=\"{x1:.1}\" \
                     y2=\"{:.1}\" stroke=\"#111827\"/>",
                    y + 2.0,
                    y + BAR - 2.0
                );
                text_at = text_at.max(x1);
            }
            let label = match (bar.value.is_finite(), bar.high) {
                (false, _) => "not measured".to_string(),
                (true, Some(h)) if h.is_finite() => format!("{} … {}", short(bar.value), short(h)),
                (true, _) => short(bar.value),
            };
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#111827\">{label}</text>",
                text_at + 5.0,
                y + BAR - 3.0
            );
            y += BAR + 3.0;
        }
        y += GAP;
    }
    // The legend: every library once, in order of appearance.
    let mut seen: Vec<&str> = Vec::new();
    for bar in chart.groups.iter().flat_map(|g| &g.bars) {
        if !seen.contains(&bar.series) {
            seen.push(bar.series);
        }
    }
    // Each entry as wide as its name needs (about 7 px a character), at least 140 px.
    let mut lx = LABEL - 140.0;
    let mut width = 140.0;
    for series in &seen {
        lx += width;
        width = (16.0 + 7.0 * series.chars().count() as f64 + 16.0).max(140.0);
        let _ = writeln!(
            svg,
            "<rect x=\"{lx:.1}\" y=\"32\" width=\"12\" height=\"12\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"42\">{}</text>",
            colour(series),
            lx + 16.0,
            escape(series)
        );
    }
    for (i, line) in wrap(&chart.note, NOTE_CHARS).iter().enumerate() {
        let _ = writeln!(
            svg,
            "<text x=\"10\" y=\"{:.1}\" fill=\"#4b5563\" font-size=\"11\">{}</text>",
            TOP + plot_height + 52.0 + 14.0 * i as f64,
            escape(line)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Writes `chart` to `dir/name` (the directory made if missing).
pub fn write(dir: &std::path::Path, name: &str, chart: &Bars) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(name);
    std::fs::write(&path, render(chart)).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ends_are_round_and_cover_the_maximum() {
        assert_eq!(axis_end(0.0), 1.0);
        assert_eq!(axis_end(f64::NAN), 1.0);
        assert_eq!(axis_end(3.2), 4.0);
        assert_eq!(axis_end(2.46), 2.5);
        assert_eq!(axis_end(10.0), 10.0);
        assert_eq!(axis_end(1234.0), 1500.0);
        assert_eq!(axis_end(16672.0), 20000.0);
    }

    #[test]
    fn notes_wrap_between_words() {
        assert_eq!(wrap("ab cd ef", 5), vec!["ab cd", "ef"]);
        assert_eq!(wrap("", 5), Vec::<String>::new());
        assert_eq!(wrap("abcdefgh ij", 5), vec!["abcdefgh", "ij"]);
    }

    #[test]
    fn a_chart_names_every_library_and_scenario_once_escaped() {
        let chart = Bars {
            title: "hand-off <p50>".into(),
            unit: "µs".into(),
            note: "median, whisker p99".into(),
            groups: vec![Group {
                label: "mutex & 4 sessions".into(),
                bars: vec![
                    Bar {
                        series: "zk-locks",
                        value: 120.0,
                        high: Some(400.0),
                    },
                    Bar {
                        series: "Curator 5.4",
                        value: f64::NAN,
                        high: None,
                    },
                ],
            }],
        };
        let svg = render(&chart);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("hand-off &lt;p50&gt;"));
        assert!(svg.contains("mutex &amp; 4 sessions"));
        assert!(svg.contains("120 … 400"));
        assert!(svg.contains("not measured"));
        assert_eq!(svg.matches(">zk-locks</text>").count(), 1);
    }
}
