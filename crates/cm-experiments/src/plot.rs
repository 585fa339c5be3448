//! A small SVG line/scatter plot: linear axes with ticks and labels, a
//! legend, one colour per series. Plain text, no dependencies.

use std::fmt::Write;

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Connected points.
    Line,
    /// Dots.
    Scatter,
}

/// One data series.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points `(x, y)`.
    pub points: Vec<(f64, f64)>,
    /// Line or dots.
    pub style: Style,
}

/// A plot.
#[derive(Clone, Debug, Default)]
pub struct Plot {
    /// Title.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The series.
    pub series: Vec<Series>,
}

const W: f64 = 720.0;
const H: f64 = 460.0;
const L: f64 = 80.0;
const R: f64 = 170.0;
const T: f64 = 40.0;
const B: f64 = 60.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// About five "nice" tick values covering `[lo, hi]`.
pub fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut v = Vec::new();
    let mut x = (lo / step).ceil() * step;
    while x <= hi + step * 1e-9 {
        v.push(if x.abs() < step * 1e-9 { 0.0 } else { x });
        x += step;
    }
    v
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Plot {
    /// The plot as an SVG document.
    pub fn to_svg(&self) -> String {
        let pts = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
        for &(x, y) in pts.filter(|(x, y)| x.is_finite() && y.is_finite()) {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x0 > x1 {
            (x0, x1, y1) = (0.0, 1.0, 1.0);
        }
        if x1 - x0 < 1e-12 {
            x1 = x0 + 1.0;
        }
        if y1 - y0 < 1e-12 {
            y1 = y0 + 1.0;
        }
        let y1 = y1 * 1.05;
        let (pw, ph) = (W - L - R, H - T - B);
        let sx = |x: f64| L + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| T + ph - (y - y0) / (y1 - y0) * ph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            L + pw / 2.0,
            esc(&self.title)
        );
        let _ = writeln!(
            s,
            r#"<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
        );
        for t in ticks(x0, x1) {
            let x = sx(t);
            let _ = writeln!(
                s,
                r#"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="black"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
                T + ph,
                T + ph + 5.0,
                T + ph + 19.0,
                fmt_tick(t)
            );
        }
        for t in ticks(y0, y1) {
            let y = sy(t);
            let _ = writeln!(
                s,
                r##"<line x1="{}" y1="{y:.1}" x2="{L}" y2="{y:.1}" stroke="black"/><line x1="{L}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                L - 5.0,
                L + pw,
                L - 8.0,
                y + 4.0,
                fmt_tick(t)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            L + pw / 2.0,
            H - 15.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">{}</text>"#,
            T + ph / 2.0,
            T + ph / 2.0,
            esc(&self.y_label)
        );
        for (i, ser) in self.series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            let good = ser
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite());
            match ser.style {
                Style::Line => {
                    let d: Vec<String> = good
                        .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
                        .collect();
                    let _ = writeln!(
                        s,
                        r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#,
                        d.join(" ")
                    );
                }
                Style::Scatter => {
                    for &(x, y) in good {
                        let _ = writeln!(
                            s,
                            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}" fill-opacity="0.7"/>"#,
                            sx(x),
                            sy(y)
                        );
                    }
                }
            }
            let ly = T + 10.0 + 18.0 * i as f64;
            let lx = L + pw + 12.0;
            let _ = writeln!(
                s,
                r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
                ly - 10.0,
                lx + 18.0,
                ly,
                esc(&ser.label)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.0, 0.07);
        assert!(t.len() >= 4 && t[0] == 0.0 && *t.last().expect("ticks") <= 0.07 + 1e-9);
    }

    #[test]
    fn svg_has_axes_and_legend() {
        let p = Plot {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                label: "a<b".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
                style: Style::Line,
            }],
        };
        let s = p.to_svg();
        assert!(s.starts_with("<svg") && s.contains("polyline") && s.contains("a&lt;b"));
    }
}
