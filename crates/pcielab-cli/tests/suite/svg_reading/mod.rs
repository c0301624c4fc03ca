//! Reads back what a pcielab SVG shows, for tests: its texts with positions, its polylines and
//! markers by colour, and the axes' tick labels, so a test can turn a drawn point back into the
//! value it stands for and compare it with the JSON the plot was drawn from.

use std::collections::BTreeMap;

/// A text element: its content (trimmed), anchor position and alignment.
#[derive(Debug, Clone)]
pub struct Label {
    pub text: String,
    pub x: f64,
    pub y: f64,
    pub anchor: String,
    pub rotated: bool,
}

#[derive(Debug, Clone)]
pub struct Polyline {
    pub stroke: String,
    pub width: f64,
    pub points: Vec<(f64, f64)>,
}

pub struct Svg {
    pub width: f64,
    pub height: f64,
    pub labels: Vec<Label>,
    pub polylines: Vec<Polyline>,
    /// (fill colour, cx, cy)
    pub circles: Vec<(String, f64, f64)>,
}

fn number(node: &roxmltree::Node, attribute: &str) -> f64 {
    node.attribute(attribute)
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Parses `text` as XML (panicking with the parser's message if it is not) and collects
/// what it draws.
pub fn read(text: &str) -> Svg {
    let doc = roxmltree::Document::parse(text)
        .unwrap_or_else(|e| panic!("the SVG is not well-formed XML: {e}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let mut svg = Svg {
        width: number(&root, "width"),
        height: number(&root, "height"),
        labels: Vec::new(),
        polylines: Vec::new(),
        circles: Vec::new(),
    };
    for node in doc.descendants() {
        match node.tag_name().name() {
            "text" => svg.labels.push(Label {
                text: node.text().unwrap_or("").trim().to_string(),
                x: number(&node, "x"),
                y: number(&node, "y"),
                anchor: node.attribute("text-anchor").unwrap_or("").to_string(),
                rotated: node.attribute("transform").is_some(),
            }),
            "polyline" => svg.polylines.push(Polyline {
                stroke: node.attribute("stroke").unwrap_or("").to_uppercase(),
                width: number(&node, "stroke-width"),
                points: node
                    .attribute("points")
                    .unwrap_or("")
                    .split_whitespace()
                    .filter_map(|p| {
                        let (x, y) = p.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect(),
            }),
            "circle" => svg.circles.push((
                node.attribute("fill").unwrap_or("").to_uppercase(),
                number(&node, "cx"),
                number(&node, "cy"),
            )),
            _ => {}
        }
    }
    svg
}

/// A linear map from pixels to values, fitted to an axis's tick labels.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    pub pixel0: f64,
    pub value0: f64,
    /// Value per pixel.
    pub scale: f64,
}

impl Axis {
    pub fn value(&self, pixel: f64) -> f64 {
        self.value0 + (pixel - self.pixel0) * self.scale
    }
    pub fn pixel(&self, value: f64) -> f64 {
        self.pixel0 + (value - self.value0) / self.scale
    }
    /// How much one pixel is worth.
    pub fn per_pixel(&self) -> f64 {
        self.scale.abs()
    }
}

/// A tick label as plotted by `plot::number_label`: 950, 0.5, 12k, 3.5M.
pub fn parse_number(text: &str) -> Option<f64> {
    if let Some(v) = text.strip_suffix('k') {
        return v.parse::<f64>().ok().map(|v| v * 1e3);
    }
    if let Some(v) = text.strip_suffix('M') {
        return v.parse::<f64>().ok().map(|v| v * 1e6);
    }
    text.parse().ok()
}

/// A byte-size tick label (`plot::bytes_label`): 64, 4K, 1M, 1G, as log2 of the size.
pub fn parse_log2_bytes(text: &str) -> Option<f64> {
    let (digits, unit) = match text.chars().last()? {
        'K' => (&text[..text.len() - 1], 1024.0),
        'M' => (&text[..text.len() - 1], 1048576.0),
        'G' => (&text[..text.len() - 1], 1073741824.0),
        _ => (text, 1.0),
    };
    digits.parse::<f64>().ok().map(|v| (v * unit).log2())
}

fn fit(ticks: &[(f64, f64)]) -> Axis {
    assert!(ticks.len() >= 2, "an axis needs two tick labels: {ticks:?}");
    let (p0, v0) = ticks[0];
    let (p1, v1) = ticks[ticks.len() - 1];
    let axis = Axis {
        pixel0: p0,
        value0: v0,
        scale: (v1 - v0) / (p1 - p0),
    };
    // Every tick in between must sit where the map puts it (a linear axis).
    for (p, v) in ticks {
        assert!(
            (axis.pixel(*v) - p).abs() <= 1.0,
            "tick {v} at {p} is off the line of {ticks:?}"
        );
    }
    axis
}

impl Svg {
    pub fn has_text(&self, text: &str) -> bool {
        self.labels.iter().any(|l| l.text == text)
    }

    pub fn texts(&self) -> Vec<&str> {
        self.labels.iter().map(|l| l.text.as_str()).collect()
    }

    /// Tick labels with `anchor` whose text `parse` reads, grouped by their x (vertical axes)
    /// or y (horizontal axes) position.
    fn tick_groups(
        &self,
        anchor: &str,
        vertical: bool,
        parse: fn(&str) -> Option<f64>,
    ) -> BTreeMap<i64, Vec<(f64, f64)>> {
        let mut groups: BTreeMap<i64, Vec<(f64, f64)>> = BTreeMap::new();
        for l in self
            .labels
            .iter()
            .filter(|l| l.anchor == anchor && !l.rotated)
        {
            if let Some(v) = parse(&l.text) {
                let (key, pixel) = if vertical { (l.x, l.y) } else { (l.y, l.x) };
                groups.entry(key as i64).or_default().push((pixel, v));
            }
        }
        groups.retain(|_, g| g.len() >= 2);
        groups
    }

    /// The left y axis of the chart whose top edge is at or below `top` pixels (charts stack).
    pub fn left_axis_below(&self, top: f64) -> Axis {
        let labels = Svg {
            labels: self.labels.iter().filter(|l| l.y >= top).cloned().collect(),
            ..self.empty()
        };
        let groups = labels.tick_groups("end", true, parse_number);
        let (_, ticks) = groups.into_iter().next().expect("no left axis tick labels");
        let ticks: Vec<(f64, f64)> = take_first_run(ticks);
        fit(&ticks)
    }

    pub fn left_axis(&self) -> Axis {
        self.left_axis_below(0.0)
    }

    /// The right y axis (labels anchored at their start, right of the plot).
    pub fn right_axis(&self) -> Axis {
        let groups = self.tick_groups("start", true, parse_number);
        let (_, ticks) = groups
            .into_iter()
            .max_by_key(|(_, g)| g.len())
            .expect("no right axis tick labels");
        fit(&ticks)
    }

    /// The x axis of the chart whose top edge is at or below `top`.
    pub fn bottom_axis_below(&self, top: f64, parse: fn(&str) -> Option<f64>) -> Axis {
        let groups = self.tick_groups("middle", false, parse);
        let (_, ticks) = groups
            .into_iter()
            .find(|(y, _)| *y as f64 >= top)
            .expect("no x axis tick labels");
        fit(&ticks)
    }

    pub fn bottom_axis(&self, parse: fn(&str) -> Option<f64>) -> Axis {
        self.bottom_axis_below(0.0, parse)
    }

    /// Data lines (stroke width 2) of `colour` (`#1F77B4`).
    pub fn lines_of(&self, colour: &str) -> Vec<&Polyline> {
        self.polylines
            .iter()
            .filter(|p| p.stroke == colour && p.width == 2.0 && p.points.len() >= 2)
            .collect()
    }

    fn empty(&self) -> Svg {
        Svg {
            width: self.width,
            height: self.height,
            labels: Vec::new(),
            polylines: Vec::new(),
            circles: Vec::new(),
        }
    }
}

/// Ticks of one axis, top to bottom, up to where a second chart's ticks start again.
fn take_first_run(mut ticks: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut run = vec![ticks[0]];
    for t in ticks.into_iter().skip(1) {
        let last = run[run.len() - 1];
        if t.1 >= last.1 {
            break;
        }
        run.push(t);
    }
    run
}
