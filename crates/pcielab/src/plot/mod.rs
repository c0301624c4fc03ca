//! Pictures of results: the one drawing layer of the tree. Every plot is drawn with the
//! `plotters` crate onto its SVG backend from the document a command prints with `--json`, in
//! the type that command writes (`report::document` reads a saved one back into it), so an old
//! result can be drawn again. This module owns the shared
//! pieces — a line chart with optional right axis, reference lines, event markers and a legend
//! laid out below the plot (so it never covers data), a coloured matrix, colours and axis
//! labels; one submodule per kind of result turns its document into one of them, and
//! [`svg`] of a [`Picture`] (picture.rs) is the one way in.

pub(crate) mod fit;
pub(crate) mod model;
mod picture;
pub(crate) mod scenario;
pub(crate) mod stat;
pub(crate) mod topology;

pub use picture::{svg, Picture};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{Error, Result};

/// Where one picture is drawn.
pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Line colours, told apart in print and by most colour-blind readers (the Tableau 10 set).
pub(crate) const COLOURS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];
/// Reference lines (ceilings) are drawn in greys, darkest first.
const REFERENCE_GREYS: [RGBColor; 3] = [
    RGBColor(0x33, 0x33, 0x33),
    RGBColor(0x77, 0x77, 0x77),
    RGBColor(0xaa, 0xaa, 0xaa),
];
pub(crate) const FONT: &str = "sans-serif";
/// Text sizes as plotters takes them (it writes `size / 1.24` as the SVG font-size).
pub(crate) const TITLE_SIZE: f64 = 20.0;
pub(crate) const TEXT_SIZE: f64 = 16.0;
/// The width one character takes at [`TEXT_SIZE`] in a sans-serif font, generously, in pixels:
/// what layouts reserve so labels do not run into each other.
pub(crate) const CHAR_WIDTH: f64 = 7.5;
pub(crate) const WIDTH: u32 = 900;
pub(crate) const HEIGHT: u32 = 520;

/// A drawing failure (the SVG backend writes into a string; this does not happen in practice).
pub(crate) fn drawing_failed(e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("drawing the plot failed: {e}"))
}

/// A standalone SVG document of `width` × `height` pixels on a white background.
pub(crate) fn svg_document(
    width: u32,
    height: u32,
    draw: impl FnOnce(&Area) -> Result<()>,
) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_failed)?;
        draw(&root)?;
        root.present().map_err(drawing_failed)?;
    }
    out.push('\n');
    Ok(out)
}

/// How x values are placed and labelled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum XScale {
    /// Evenly, labelled with round numbers.
    Linear,
    /// Transfer sizes in bytes: by log2, labelled 64, 4K, 1M.
    Bytes,
}

/// How a series is stroked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Stroke {
    Line,
    Dashed,
    /// Points only (measurements).
    Markers,
    LineWithMarkers,
}

/// One series of (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub(crate) label: String,
    pub(crate) points: Vec<(f64, f64)>,
    pub(crate) stroke: Stroke,
    /// Against the right axis ([`RightAxis::Own`]).
    pub(crate) right: bool,
    /// Index into `COLOURS`; by default the series' own position.
    pub(crate) colour: Option<usize>,
}

impl Series {
    pub(crate) fn new(label: impl Into<String>, points: Vec<(f64, f64)>, stroke: Stroke) -> Series {
        Series {
            label: label.into(),
            points,
            stroke,
            right: false,
            colour: None,
        }
    }
}

/// A horizontal line at a value of the left axis: a ceiling the series are read against.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reference {
    pub(crate) label: String,
    pub(crate) y: f64,
}

/// The right-hand axis.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RightAxis {
    /// Series marked `right` are drawn against it, with their own range.
    Own { label: String },
    /// The left axis in other units: right = left × `per_left_unit` (efficiency in % of a rate).
    Scaled { label: String, per_left_unit: f64 },
}

/// A line chart: what `draw_line_chart` draws.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LineChart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) x_scale: XScale,
    pub(crate) y_label: String,
    pub(crate) right: Option<RightAxis>,
    pub(crate) series: Vec<Series>,
    pub(crate) references: Vec<Reference>,
    /// Vertical markers: (x, what happened there).
    pub(crate) events: Vec<(f64, String)>,
    /// The left axis starts at zero (rates, counts) rather than at the smallest value.
    pub(crate) y_from_zero: bool,
}

/// `v` bytes as 64, 4K, 1M, 2G (1024-based, as `--sizes` takes them).
pub(crate) fn bytes_label(v: f64) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (suffix, unit) in units {
        let n = v / unit as f64;
        if n >= 1.0 {
            return if (n - n.round()).abs() < 1e-9 {
                format!("{}{suffix}", n.round())
            } else {
                format!("{n:.1}{suffix}")
            };
        }
    }
    format!("{}", v.round())
}

/// An axis tick: round numbers without float noise, 12k / 3.5M for large ones.
pub(crate) fn number_label(v: f64) -> String {
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
    let text = format!("{v:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

/// A value as tables and labels print it: whole above 100, else up to 2 decimals.
pub(crate) fn value_text(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        trim(v)
    }
}

fn text_style(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().color(&BLACK)
}

/// A tick step of 1, 2 or 5 × 10^k giving about `n` ticks over `span`.
fn tick_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// The most ticks one axis gets; more only happens for a range no chart means (a result file
/// whose values are infinite or whose step underflows), which then gets none.
const MAX_TICKS: f64 = 1000.0;

/// Round tick values inside `lo..=hi`, `step` apart; none when the range or step is not finite
/// or would give more than [`MAX_TICKS`].
fn ticks_every(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step).ceil();
    let last = (hi / step + 1e-9).floor();
    if !(first.is_finite() && last.is_finite()) || last - first > MAX_TICKS {
        return Vec::new();
    }
    (first as i64..=last as i64)
        .map(|i| i as f64 * step)
        .collect()
}

/// `(lo, hi)` when both are finite and `hi > lo`, else `(0, 1)`: an axis a crafted or degenerate
/// result (a ceiling of 0 scaling a right axis to infinity) can still be drawn on.
fn drawable_range((lo, hi): (f64, f64)) -> (f64, f64) {
    if lo.is_finite() && hi.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// About six round ticks over `lo..=hi`.
fn round_ticks(lo: f64, hi: f64) -> Vec<f64> {
    ticks_every(lo, hi, tick_step(hi - lo, 6.0))
}

/// Ticks of a log2 axis: whole powers of two, every one up to ten of them, else every k-th.
fn power_of_two_ticks(lo: f64, hi: f64) -> Vec<f64> {
    ticks_every(lo, hi, ((hi - lo) / 10.0).ceil().max(1.0))
}

/// A linear axis over `lo..hi` with its ticks chosen here (plotters' own choice of ticks on
/// a log2 axis lands on every fifth power of two).
struct TickedAxis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = (value - self.lo) / (self.hi - self.lo);
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// (min, max) of the values, padded so lines do not sit on the frame; (0, 1) when empty.
fn range_of(values: impl Iterator<Item = f64>, from_zero: bool, pad: f64) -> (f64, f64) {
    let (mut lo, mut hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
    }
    let span = hi - lo;
    let lo = if from_zero && lo >= 0.0 {
        lo
    } else {
        lo - span * pad
    };
    (lo, hi + span * pad)
}

/// One legend entry: how its swatch is stroked, its colour, its text.
struct LegendEntry {
    colour: RGBColor,
    stroke: Stroke,
    text: String,
}

/// Rows of legend entries that fit `width` pixels.
fn legend_rows(entries: &[LegendEntry], width: f64) -> Vec<Vec<&LegendEntry>> {
    let mut rows: Vec<Vec<&LegendEntry>> = Vec::new();
    let mut used = width;
    for e in entries {
        let w = legend_entry_width(e);
        if used + w > width {
            rows.push(Vec::new());
            used = 0.0;
        }
        used += w;
        if let Some(row) = rows.last_mut() {
            row.push(e);
        }
    }
    rows
}

fn legend_entry_width(e: &LegendEntry) -> f64 {
    44.0 + CHAR_WIDTH * e.text.chars().count() as f64 + 24.0
}

const LEGEND_ROW: i32 = 24;

/// Draws the legend entries in rows across `area`, left to right.
fn draw_legend(area: &Area, rows: &[Vec<&LegendEntry>], left: i32) -> Result<()> {
    for (r, row) in rows.iter().enumerate() {
        let y = 12 + r as i32 * LEGEND_ROW;
        let mut x = left;
        for e in row {
            swatch(area, e.colour, e.stroke, (x, y))?;
            area.draw(&Text::new(
                e.text.clone(),
                (x + 44, y - 8),
                text_style(TEXT_SIZE),
            ))
            .map_err(drawing_failed)?;
            x += legend_entry_width(e) as i32;
        }
    }
    Ok(())
}

fn swatch(area: &Area, colour: RGBColor, stroke: Stroke, (x, y): (i32, i32)) -> Result<()> {
    let style = colour.stroke_width(3);
    match stroke {
        Stroke::Line | Stroke::LineWithMarkers => area
            .draw(&PathElement::new(vec![(x, y), (x + 36, y)], style))
            .map_err(drawing_failed)?,
        Stroke::Dashed => {
            for k in 0..3 {
                area.draw(&PathElement::new(
                    vec![(x + k * 14, y), (x + k * 14 + 8, y)],
                    style,
                ))
                .map_err(drawing_failed)?;
            }
        }
        Stroke::Markers => {}
    }
    if matches!(stroke, Stroke::Markers | Stroke::LineWithMarkers) {
        area.draw(&Circle::new((x + 18, y), 4, colour.filled()))
            .map_err(drawing_failed)?;
    }
    Ok(())
}

fn series_colour(s: &Series, position: usize) -> RGBColor {
    COLOURS[s.colour.unwrap_or(position) % COLOURS.len()]
}

/// Draws `chart` into `area`: title, axes with units, series, reference lines, event markers,
/// and the legend in rows beneath the plot.
pub(crate) fn draw_line_chart(area: &Area, chart: &LineChart) -> Result<()> {
    let (width, height) = area.dim_in_pixel();
    let mut entries: Vec<LegendEntry> = chart
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| LegendEntry {
            colour: series_colour(s, i),
            stroke: s.stroke,
            text: if s.right && matches!(chart.right, Some(RightAxis::Own { .. })) {
                format!("{} (right axis)", s.label)
            } else {
                s.label.clone()
            },
        })
        .collect();
    entries.extend(
        chart
            .references
            .iter()
            .enumerate()
            .map(|(i, r)| LegendEntry {
                colour: REFERENCE_GREYS[i % REFERENCE_GREYS.len()],
                stroke: Stroke::Dashed,
                text: r.label.clone(),
            }),
    );
    let rows = legend_rows(&entries, f64::from(width) - 40.0);
    let legend_height = rows.len() as u32 * LEGEND_ROW as u32 + 8;
    let (plot_area, legend_area) = area.split_vertically(height.saturating_sub(legend_height));
    draw_legend(&legend_area, &rows, 20)?;

    let x_of = |x: f64| match chart.x_scale {
        XScale::Linear => x,
        XScale::Bytes => x.max(1.0).log2(),
    };
    let (x0, x1) = drawable_range(range_of(
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| x_of(p.0)))
            .chain(chart.events.iter().map(|e| x_of(e.0))),
        false,
        0.03,
    ));
    let (y0, y1) = drawable_range(range_of(
        chart
            .series
            .iter()
            .filter(|s| !s.right)
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(chart.references.iter().map(|r| r.y)),
        chart.y_from_zero,
        0.06,
    ));
    let (r0, r1) = match &chart.right {
        Some(RightAxis::Own { .. }) => range_of(
            chart
                .series
                .iter()
                .filter(|s| s.right)
                .flat_map(|s| s.points.iter().map(|p| p.1)),
            chart.y_from_zero,
            0.06,
        ),
        Some(RightAxis::Scaled { per_left_unit, .. }) => (y0 * per_left_unit, y1 * per_left_unit),
        None => (0.0, 1.0),
    };
    let (r0, r1) = drawable_range((r0, r1));

    let mut builder = ChartBuilder::on(&plot_area);
    builder
        .caption(
            &chart.title,
            (FONT, TITLE_SIZE).into_font().style(FontStyle::Bold),
        )
        .margin(12)
        .margin_right(24)
        .x_label_area_size(48)
        .y_label_area_size(78);
    if chart.right.is_some() {
        builder.right_y_label_area_size(78);
    }
    let x_ticks = match chart.x_scale {
        XScale::Linear => round_ticks(x0, x1),
        XScale::Bytes => power_of_two_ticks(x0, x1),
    };
    let mut ctx = builder
        .build_cartesian_2d(
            TickedAxis {
                lo: x0,
                hi: x1,
                ticks: x_ticks.clone(),
            },
            TickedAxis {
                lo: y0,
                hi: y1,
                ticks: round_ticks(y0, y1),
            },
        )
        .map_err(drawing_failed)?
        .set_secondary_coord(
            TickedAxis {
                lo: x0,
                hi: x1,
                ticks: x_ticks,
            },
            TickedAxis {
                lo: r0,
                hi: r1,
                ticks: round_ticks(r0, r1),
            },
        );
    let x_format = |v: &f64| match chart.x_scale {
        XScale::Linear => number_label(*v),
        XScale::Bytes => bytes_label(v.exp2()),
    };
    let y_format = |v: &f64| number_label(*v);
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .label_style(text_style(TEXT_SIZE))
        .axis_desc_style(text_style(TEXT_SIZE))
        .bold_line_style(RGBColor(0xe4, 0xe4, 0xe4))
        .draw()
        .map_err(drawing_failed)?;
    if let Some(right) = &chart.right {
        let label = match right {
            RightAxis::Own { label } | RightAxis::Scaled { label, .. } => label,
        };
        ctx.configure_secondary_axes()
            .y_desc(label.as_str())
            .y_label_formatter(&y_format)
            .label_style(text_style(TEXT_SIZE))
            .axis_desc_style(text_style(TEXT_SIZE))
            .draw()
            .map_err(drawing_failed)?;
    }

    for (i, r) in chart.references.iter().enumerate() {
        let colour = REFERENCE_GREYS[i % REFERENCE_GREYS.len()];
        ctx.draw_series(DashedLineSeries::new(
            [(x0, r.y), (x1, r.y)],
            10,
            6,
            colour.stroke_width(2),
        ))
        .map_err(drawing_failed)?;
    }
    for (i, s) in chart.series.iter().enumerate() {
        let colour = series_colour(s, i);
        let points: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x_of(x), y)).collect();
        let style = colour.stroke_width(2);
        macro_rules! draw_on {
            ($draw:ident) => {{
                match s.stroke {
                    Stroke::Line | Stroke::LineWithMarkers => {
                        ctx.$draw(LineSeries::new(points.clone(), style))
                            .map_err(drawing_failed)?;
                    }
                    Stroke::Dashed => {
                        ctx.$draw(DashedLineSeries::new(points.clone(), 8, 5, style))
                            .map_err(drawing_failed)?;
                    }
                    Stroke::Markers => {}
                }
                if matches!(s.stroke, Stroke::Markers | Stroke::LineWithMarkers) {
                    ctx.$draw(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                        .map_err(drawing_failed)?;
                }
            }};
        }
        if s.right && matches!(chart.right, Some(RightAxis::Own { .. })) {
            draw_on!(draw_secondary_series);
        } else {
            draw_on!(draw_series);
        }
    }
    for (i, (at, what)) in chart.events.iter().enumerate() {
        let x = x_of(*at);
        ctx.draw_series(DashedLineSeries::new(
            [(x, y0), (x, y1)],
            4,
            4,
            RGBColor(0x55, 0x55, 0x55).stroke_width(1),
        ))
        .map_err(drawing_failed)?;
        let (px, py) = ctx.backend_coord(&(x, y1));
        let label_top = py + 2 + 18 * i as i32;
        let label_width = (CHAR_WIDTH * 0.9 * what.chars().count() as f64) as i32 + 6;
        plot_area
            .draw(&Rectangle::new(
                [(px + 2, label_top), (px + 2 + label_width, label_top + 17)],
                WHITE.mix(0.85).filled(),
            ))
            .map_err(drawing_failed)?;
        plot_area
            .draw(&Text::new(
                what.clone(),
                (px + 4, py + 4 + 18 * i as i32),
                text_style(TEXT_SIZE * 0.85).color(&RGBColor(0x44, 0x44, 0x44)),
            ))
            .map_err(drawing_failed)?;
    }
    Ok(())
}

/// A line chart as a standalone SVG document of the default size.
pub(crate) fn line_chart_svg(chart: &LineChart) -> Result<String> {
    svg_document(WIDTH, HEIGHT, |area| draw_line_chart(area, chart))
}

/// One cell of a [`Matrix`]: its text and which class (legend entry) colours it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cell {
    pub(crate) text: String,
    pub(crate) class: usize,
}

/// A grid of coloured cells with row and column headings: the P2P verdicts, `lab check`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Matrix {
    pub(crate) title: String,
    /// What the rows and columns are ("provider", "client").
    pub(crate) row_heading: String,
    pub(crate) column_heading: String,
    pub(crate) rows: Vec<String>,
    pub(crate) columns: Vec<String>,
    /// `cells[row][column]`; `None` is left blank.
    pub(crate) cells: Vec<Vec<Option<Cell>>>,
    /// (name, fill colour) of each class, in legend order.
    pub(crate) classes: Vec<(String, RGBColor)>,
}

const CELL_HEIGHT: i32 = 30;

/// The matrix as a standalone SVG document, sized to fit its labels.
pub(crate) fn matrix_svg(m: &Matrix) -> Result<String> {
    let chars = |texts: &mut dyn Iterator<Item = &String>| {
        texts.map(|t| t.chars().count()).max().unwrap_or(0) as f64
    };
    let row_label_width =
        (CHAR_WIDTH * chars(&mut m.rows.iter().chain([&m.row_heading])) + 24.0).max(80.0) as i32;
    let cell_texts = m.cells.iter().flatten().flatten().map(|c| &c.text);
    let cell_width = (CHAR_WIDTH * chars(&mut cell_texts.into_iter()) + 20.0).max(56.0) as i32;
    // Column headings wider than a cell stand on end, so a wide matrix still fits a page.
    let heading_width = CHAR_WIDTH * chars(&mut m.columns.iter()) + 12.0;
    let upright = heading_width > f64::from(cell_width);
    let top = 66 + if upright { heading_width as i32 } else { 20 };
    let grid_width = cell_width * m.columns.len() as i32;
    let grid_height = CELL_HEIGHT * m.rows.len() as i32;
    let entries: Vec<LegendEntry> = m
        .classes
        .iter()
        .map(|(name, colour)| LegendEntry {
            colour: *colour,
            stroke: Stroke::Markers,
            text: name.clone(),
        })
        .collect();
    let title_width = (CHAR_WIDTH * 1.3 * m.title.chars().count() as f64) as i32 + 40;
    let width = (row_label_width + grid_width + 40)
        .max(title_width)
        .max(520);
    let rows = legend_rows(&entries, f64::from(width) - 40.0);
    let height = top + grid_height + 24 + rows.len() as i32 * LEGEND_ROW + 16;
    svg_document(width as u32, height as u32, |area| {
        area.draw(&Text::new(
            m.title.clone(),
            (20, 12),
            (FONT, TITLE_SIZE).into_font().style(FontStyle::Bold),
        ))
        .map_err(drawing_failed)?;
        let x0 = 20 + row_label_width;
        area.draw(&Text::new(
            format!("{} \u{2193}   {} \u{2192}", m.row_heading, m.column_heading),
            (20, 44),
            text_style(TEXT_SIZE * 0.9),
        ))
        .map_err(drawing_failed)?;
        for (c, name) in m.columns.iter().enumerate() {
            let x = x0 + c as i32 * cell_width + cell_width / 2;
            let style = if upright {
                text_style(TEXT_SIZE)
                    .transform(FontTransform::Rotate270)
                    .pos(Pos::new(HPos::Left, VPos::Center))
            } else {
                text_style(TEXT_SIZE).pos(Pos::new(HPos::Center, VPos::Bottom))
            };
            area.draw(&Text::new(name.clone(), (x, top - 8), style))
                .map_err(drawing_failed)?;
        }
        for (r, name) in m.rows.iter().enumerate() {
            let y = top + r as i32 * CELL_HEIGHT;
            area.draw(&Text::new(
                name.clone(),
                (x0 - 10, y + CELL_HEIGHT / 2),
                text_style(TEXT_SIZE).pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(drawing_failed)?;
            for c in 0..m.columns.len() {
                let x = x0 + c as i32 * cell_width;
                let cell = m
                    .cells
                    .get(r)
                    .and_then(|row| row.get(c))
                    .and_then(|c| c.as_ref());
                let fill = cell
                    .and_then(|cell| m.classes.get(cell.class))
                    .map_or(WHITE, |(_, colour)| *colour);
                area.draw(&Rectangle::new(
                    [(x, y), (x + cell_width, y + CELL_HEIGHT)],
                    fill.mix(0.35).filled(),
                ))
                .map_err(drawing_failed)?;
                area.draw(&Rectangle::new(
                    [(x, y), (x + cell_width, y + CELL_HEIGHT)],
                    RGBColor(0x99, 0x99, 0x99).stroke_width(1),
                ))
                .map_err(drawing_failed)?;
                if let Some(cell) = cell {
                    area.draw(&Text::new(
                        cell.text.clone(),
                        (x + cell_width / 2, y + CELL_HEIGHT / 2),
                        text_style(TEXT_SIZE).pos(Pos::new(HPos::Center, VPos::Center)),
                    ))
                    .map_err(drawing_failed)?;
                }
            }
        }
        draw_legend(&area.margin(top + grid_height + 20, 0, 0, 0), &rows, 20)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_labels_are_1024_based() {
        assert_eq!(bytes_label(64.0), "64");
        assert_eq!(bytes_label(4096.0), "4K");
        assert_eq!(bytes_label(1536.0), "1.5K");
        assert_eq!(bytes_label(4.0 * 1048576.0), "4M");
        assert_eq!(bytes_label(1073741824.0), "1G");
    }

    #[test]
    fn number_labels_have_no_float_noise() {
        assert_eq!(number_label(0.30000000000000004), "0.3");
        assert_eq!(number_label(-0.0), "0");
        assert_eq!(number_label(2500.0), "2500");
        assert_eq!(number_label(12000.0), "12k");
        assert_eq!(number_label(3_500_000.0), "3.5M");
    }

    #[test]
    fn legend_rows_wrap_at_the_width() {
        let entry = |text: &str| LegendEntry {
            colour: BLACK,
            stroke: Stroke::Line,
            text: text.into(),
        };
        let entries = [
            entry("write"),
            entry("read"),
            entry("a long reference line"),
        ];
        assert_eq!(legend_rows(&entries, 2000.0).len(), 1);
        let narrow = legend_rows(&entries, 250.0);
        assert_eq!(narrow.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
    }

    #[test]
    fn a_chart_is_an_svg_with_its_title_axes_and_legend() {
        let chart = LineChart {
            title: "A & B".into(),
            x_label: "size (bytes)".into(),
            x_scale: XScale::Bytes,
            y_label: "MB/s".into(),
            right: Some(RightAxis::Scaled {
                label: "efficiency (%)".into(),
                per_left_unit: 0.1,
            }),
            series: vec![Series::new(
                "write",
                vec![(64.0, 10.0), (4096.0, 900.0)],
                Stroke::Line,
            )],
            references: vec![Reference {
                label: "line rate 1000 MB/s".into(),
                y: 1000.0,
            }],
            events: vec![],
            y_from_zero: true,
        };
        let svg = line_chart_svg(&chart).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::trim))
            .collect();
        for wanted in [
            "A & B",
            "size (bytes)",
            "MB/s",
            "efficiency (%)",
            "write",
            "line rate 1000 MB/s",
            "4K",
        ] {
            assert!(texts.contains(&wanted), "{wanted} not in {texts:?}");
        }
    }
}
