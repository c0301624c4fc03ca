//! SVG line plots of a scenario's [`Outcome`], written by hand: title, axes with round ticks,
//! one coloured line with markers per metric, an optional right-hand axis, and a legend — a
//! picture a person reads instead of the table.

use super::scenario::Outcome;

const W: f64 = 860.0;
const H: f64 = 500.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 90.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// A tick step of 1, 2 or 5 × 10^k giving about `n` ticks over `span`.
fn tick_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn label(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

struct Axis {
    min: f64,
    max: f64,
    step: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, from_zero: bool) -> Axis {
        let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if from_zero {
            lo = lo.min(0.0);
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        let step = tick_step(hi - lo, 6.0);
        Axis {
            min: (lo / step).floor() * step,
            max: (hi / step).ceil() * step,
            step,
        }
    }

    fn ticks(&self) -> Vec<f64> {
        let n = ((self.max - self.min) / self.step).round() as usize;
        (0..=n).map(|i| self.min + i as f64 * self.step).collect()
    }

    fn map(&self, v: f64, from: f64, to: f64) -> f64 {
        from + (v - self.min) / (self.max - self.min) * (to - from)
    }
}

/// Render the outcome as a standalone SVG document.
pub fn svg(outcome: &Outcome) -> String {
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
    let xs = Axis::new(
        outcome
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0)),
        false,
    );
    let left = Axis::new(
        outcome
            .lines
            .iter()
            .filter(|l| !l.right_axis)
            .flat_map(|l| l.points.iter().map(|p| p.1)),
        true,
    );
    let has_right = outcome.lines.iter().any(|l| l.right_axis);
    let right = Axis::new(
        outcome
            .lines
            .iter()
            .filter(|l| l.right_axis)
            .flat_map(|l| l.points.iter().map(|p| p.1)),
        true,
    );
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    s += &format!(
        "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        W / 2.0,
        escape(&outcome.title)
    );
    for t in xs.ticks() {
        let x = xs.map(t, x0, x1);
        s += &format!(
            "<line x1=\"{x:.1}\" y1=\"{y0}\" x2=\"{x:.1}\" y2=\"{y1}\" stroke=\"#eee\"/>\n"
        );
        s += &format!(
            "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            y0 + 18.0,
            label(t)
        );
    }
    for t in left.ticks() {
        let y = left.map(t, y0, y1);
        s += &format!(
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\n"
        );
        s += &format!(
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            x0 - 6.0,
            y + 4.0,
            label(t)
        );
    }
    if has_right {
        for t in right.ticks() {
            let y = right.map(t, y0, y1);
            s += &format!(
                "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"start\" fill=\"#555\">{}</text>\n",
                x1 + 6.0,
                y + 4.0,
                label(t)
            );
        }
        if let Some(l) = &outcome.y2_label {
            s += &format!(
                "<text transform=\"translate({},{}) rotate(90)\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
                W - 20.0,
                (y0 + y1) / 2.0,
                escape(l)
            );
        }
    }
    s += &format!(
        "<rect x=\"{x0}\" y=\"{y1}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n",
        x1 - x0,
        y0 - y1
    );
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        (x0 + x1) / 2.0,
        H - 18.0,
        escape(&outcome.x_label)
    );
    s += &format!(
        "<text transform=\"translate(20,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        (y0 + y1) / 2.0,
        escape(&outcome.y_label)
    );
    for (i, line) in outcome.lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let axis = if line.right_axis { &right } else { &left };
        let dash = if line.right_axis {
            " stroke-dasharray=\"6 3\""
        } else {
            ""
        };
        let pts: Vec<String> = line
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", xs.map(*x, x0, x1), axis.map(*y, y0, y1)))
            .collect();
        s += &format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
            pts.join(" ")
        );
        if line.points.len() <= 40 {
            for p in &pts {
                let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
                s += &format!("<circle cx=\"{cx}\" cy=\"{cy}\" r=\"3\" fill=\"{colour}\"/>\n");
            }
        }
    }
    for (i, (at, what)) in outcome.markers.iter().enumerate() {
        let x = xs.map(*at, x0, x1);
        s += &format!(
            "<line x1=\"{x:.1}\" y1=\"{y0}\" x2=\"{x:.1}\" y2=\"{y1}\" stroke=\"#555\" stroke-dasharray=\"2 3\"/>\n"
        );
        s += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\">{}</text>\n",
            x + 4.0,
            y1 + 12.0 + 12.0 * i as f64,
            escape(what)
        );
    }
    s += &legend(outcome, &xs, &left, &right, (x0, x1, y0, y1));
    s += "</svg>\n";
    s
}

/// The legend, in whichever corner of the plot area covers the fewest data points.
fn legend(
    outcome: &Outcome,
    xs: &Axis,
    left: &Axis,
    right: &Axis,
    area: (f64, f64, f64, f64),
) -> String {
    let (x0, x1, y0, y1) = area;
    let label_of = |l: &super::scenario::Line| {
        format!(
            "{}{}",
            l.label,
            if l.right_axis { " (right axis)" } else { "" }
        )
    };
    let width = 60.0
        + 7.0
            * outcome
                .lines
                .iter()
                .map(|l| label_of(l).chars().count())
                .max()
                .unwrap_or(0) as f64;
    let height = 10.0 + 18.0 * outcome.lines.len() as f64;
    let points: Vec<(f64, f64)> = outcome
        .lines
        .iter()
        .flat_map(|l| {
            let axis = if l.right_axis { right } else { left };
            l.points
                .iter()
                .map(move |(x, y)| (xs.map(*x, x0, x1), axis.map(*y, y0, y1)))
        })
        .collect();
    let corners = [
        (x0 + 8.0, y1 + 8.0),
        (x1 - width - 8.0, y1 + 8.0),
        (x0 + 8.0, y0 - height - 8.0),
        (x1 - width - 8.0, y0 - height - 8.0),
    ];
    let covered = |(lx, ly): (f64, f64)| {
        points
            .iter()
            .filter(|(px, py)| *px >= lx && *px <= lx + width && *py >= ly && *py <= ly + height)
            .count()
    };
    let (lx, ly) = corners
        .into_iter()
        .min_by_key(|c| covered(*c))
        .unwrap_or(corners[0]);
    let mut s = format!(
        "<rect x=\"{lx:.1}\" y=\"{ly:.1}\" width=\"{width:.1}\" height=\"{height:.1}\" fill=\"white\" \
         fill-opacity=\"0.85\" stroke=\"#999\"/>\n"
    );
    for (i, line) in outcome.lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let dash = if line.right_axis {
            " stroke-dasharray=\"6 3\""
        } else {
            ""
        };
        let y = ly + 14.0 + i as f64 * 18.0;
        s += &format!(
            "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"3\"{dash}/>\n",
            lx + 8.0,
            lx + 32.0
        );
        s += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            lx + 38.0,
            y + 4.0,
            escape(&label_of(line))
        );
    }
    s
}
