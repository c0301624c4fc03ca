//! The view behind `pcielab top`, kept apart from the terminal so it can be tested without one:
//! [`View`] holds what the user chose (sort key, filter, tree or flat, pause, help, scroll) and
//! changes only through [`View::handle`] with a terminal-independent [`Key`]; [`TopFrame::build`]
//! turns three [`Sample`]s (the first one, for AER deltas since start, and the two latest, for
//! rates) into the rows the view selects, in its order; [`TopFrame::text`] prints a frame as
//! `top -b` does; the CLI paints it on a terminal. A view refreshed in a loop keeps a [`Frames`],
//! which gives the same frames and text and reuses its buffers, the tree's shape and unchanged
//! rows' text from frame to frame. All figures come from `observe`'s per-function rate (what
//! [`super::rates`] gives for every function); nothing here computes a rate.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::{interval_us, rate, union, FunctionSample, Sample};
use crate::pcie::Bdf;
use crate::text::{printable, Escaped};
use crate::topology::health::AerCounts;

mod row;
#[cfg(test)]
mod tests;
mod view;

use row::{link_percent, short_kind};
pub use row::{FunctionRow, LinkState, COLUMNS};
pub use view::{Action, Key, SortKey, View, KEY_HELP};

/// One screen (or one batch frame): header facts and the rows the view selects, in its order.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TopFrame {
    pub(crate) machine: String,
    /// Wall-clock time of the latest sample, HH:MM:SS UTC.
    pub(crate) utc: String,
    /// Seconds since the observer opened (on `sim:`, the simulated time played to).
    pub(crate) t_s: f64,
    /// Seconds between the two samples the rates come from.
    pub(crate) interval_s: f64,
    pub(crate) sort: SortKey,
    pub(crate) tree: bool,
    pub(crate) filter: String,
    /// Functions in the latest sample, before filtering.
    pub(crate) functions: usize,
    /// One row per function shown, in the view's order.
    pub rows: Vec<FunctionRow>,
}

impl TopFrame {
    /// Rates between `prev` and `latest`, AER increments since `first`, selected and ordered by
    /// `view`; `now` is the wall-clock time shown in the header. A view refreshed again and
    /// again keeps a [`Frames`] instead, which reuses this work between frames.
    pub fn build(
        view: &View,
        first: &Sample,
        prev: &Sample,
        latest: &Sample,
        now: SystemTime,
    ) -> TopFrame {
        let mut frames = Frames::default();
        frames.build(view, first, prev, latest, now);
        frames.frame
    }

    /// The one-line header: machine, wall time, time since start, interval, what is shown.
    pub fn header(&self) -> String {
        let mut line = format!(
            "pcielab top - {} - {} UTC - up {:.1} s - interval {:.1} s - {} of {} functions - sort {} - {}",
            printable(&self.machine),
            self.utc,
            self.t_s,
            self.interval_s,
            self.rows.len(),
            self.functions,
            self.sort.name(),
            if self.tree { "tree" } else { "flat" },
        );
        if !self.filter.is_empty() {
            line.push_str(&format!(" - filter \"{}\"", printable(&self.filter)));
        }
        line
    }

    /// The frame as plain text: the header, the column names, one line per row; columns are
    /// separated by at least two spaces and every cell but NAME is one word.
    pub fn text(&self) -> String {
        let mut printed = Printed::default();
        printed.print(self, &[]);
        printed.out
    }
}

/// The frames of one view refreshed again and again (`top`'s loop): [`Frames::build`] and
/// [`Frames::text`] give what [`TopFrame::build`] and [`TopFrame::text`] give, but keep their
/// buffers, the tree's shape and each row's text from one frame to the next, so a refresh of a
/// host whose functions did not change re-does only the rates of functions with counters and a
/// comparison of each row with the one it replaces; in address order without a filter, only
/// the rows of the functions that can vary are looked at. Rows whose figures changed are
/// formatted again and written over their old lines, and all lines are padded and copied again
/// when a column's width changed.
#[derive(Debug, Default)]
pub struct Frames {
    frame: TopFrame,
    /// The functions and parents `parents` and `children` were made from.
    shape: Vec<(Bdf, Option<Bdf>)>,
    /// The [`Sample::layout`] `shape` was last found to match.
    shape_layout: u64,
    /// Per function of the latest sample: its parent's index.
    parents: Vec<Option<usize>>,
    /// Per function: its children's indices (in address order) are
    /// `child_list[child_start[i]..child_start[i + 1]]`.
    child_start: Vec<usize>,
    child_list: Vec<usize>,
    /// Per function, when rows are sorted by a figure: the figures its row shows.
    figures: Vec<Figures>,
    shown: Vec<bool>,
    /// The frame's rows as (function index, depth), in display order.
    order: Vec<(usize, usize)>,
    stack: Vec<(usize, usize)>,
    siblings: Vec<usize>,
    /// Per row: it differs from the row at its place when the text was last printed.
    changed: Vec<bool>,
    /// Per row: the function (index) and [`Sample::layout`] its name was last taken from. A
    /// sample's names are those of its layout's topology, so a row showing the same function
    /// of the same layout again has its name already, and the names (strings elsewhere in
    /// memory, one cache miss each) are not compared.
    named_from: Vec<(usize, u64)>,
    /// What the latest build's rows were made from, when its sample listed the functions whose
    /// records can vary ([`Sample::varying`]).
    kept: Option<Kept>,
    /// Per function: the row showing it in the latest build; `usize::MAX` when none does.
    row_of: Vec<usize>,
    printed: Printed,
}

/// What a build of rows in address order without a filter depends on besides the latest
/// sample's records: a later build with the same makes rows again only for the functions whose
/// records can differ between the two latest samples (the rest show the same figures in the
/// same place: with no traffic a function has no rates, and its AER increments since the same
/// first sample are those of the same counters).
#[derive(Debug)]
struct Kept {
    /// The latest sample's [`Sample::layout`] and [`Sample::varying`].
    layout: u64,
    varying: Vec<usize>,
    /// The first sample's layout and time, and whether the latest was later.
    first: (u64, u64),
    since_start: bool,
    tree: bool,
}

impl Default for TopFrame {
    fn default() -> TopFrame {
        TopFrame {
            machine: String::new(),
            utc: String::new(),
            t_s: 0.0,
            interval_s: 0.0,
            sort: SortKey::Bdf,
            tree: true,
            filter: String::new(),
            functions: 0,
            rows: Vec::new(),
        }
    }
}

/// What a row shows that comes from the rates and AER increments, and what rows sort by.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    rx_mbps: Option<f64>,
    tx_mbps: Option<f64>,
    rx_percent: Option<f64>,
    tx_percent: Option<f64>,
    aer: AerCounts,
}

impl Figures {
    fn sort_value(&self, key: SortKey) -> Option<f64> {
        match key {
            SortKey::Bdf => None,
            SortKey::Rx => self.rx_mbps,
            SortKey::Tx => self.tx_mbps,
            SortKey::Link => link_percent(self.rx_percent, self.tx_percent),
        }
    }
}

impl Frames {
    /// The frame [`TopFrame::build`] gives for these arguments.
    pub fn build(
        &mut self,
        view: &View,
        first: &Sample,
        prev: &Sample,
        latest: &Sample,
        now: SystemTime,
    ) -> &TopFrame {
        let functions = &latest.functions;
        self.shape_of(latest);
        // A row's rates since `prev` and AER increments since `first`. The earlier samples are
        // only looked at for a function with counters: a function without traffic has no rates
        // and one without AER counters no increments, whatever they held.
        let recent_us = interval_us(prev, latest);
        let since_start = interval_us(first, latest).is_some();
        let figures_of = |i: usize, f: &FunctionSample| {
            let recent = match (recent_us, f.traffic) {
                (Some(us), Some(_)) => prev.counterpart(i, f.bdf).map(|p| rate(p, f, us)),
                _ => None,
            };
            let aer = if since_start && f.link.aer != AerCounts::default() {
                first
                    .counterpart(i, f.bdf)
                    .map(|s| f.link.aer.since(&s.link.aer))
                    .unwrap_or_default()
            } else {
                AerCounts::default()
            };
            Figures {
                rx_mbps: recent.as_ref().and_then(|r| r.rx_mbps),
                tx_mbps: recent.as_ref().and_then(|r| r.tx_mbps),
                rx_percent: recent.as_ref().and_then(|r| r.rx_percent),
                tx_percent: recent.as_ref().and_then(|r| r.tx_percent),
                aer,
            }
        };
        // Rows in address order without a filter keep their places while the layout does;
        // after a build of the same, only the functions that can vary are looked at.
        let in_place = view.sort == SortKey::Bdf && view.filter.is_empty();
        let kept = self.kept.take().filter(|k| {
            in_place
                && latest.layout != 0
                && k.layout == latest.layout
                && k.first == (first.layout, first.t_ns)
                && k.since_start == since_start
                && k.tree == view.tree
                && self.frame.rows.len() == self.order.len()
        });
        match (kept, &latest.varying) {
            (Some(mut kept), Some(varying)) => {
                for i in union(&kept.varying, varying) {
                    let (Some(&k), Some(f)) = (self.row_of.get(i), functions.get(i)) else {
                        continue;
                    };
                    if k == usize::MAX {
                        continue;
                    }
                    let new = row(f, &figures_of(i, f), self.order[k].1);
                    self.changed[k] |= update_row(&mut self.frame.rows[k], new, f, true);
                }
                kept.varying.clone_from(varying);
                self.kept = Some(kept);
            }
            _ => {
                self.rows_afresh(view, latest, figures_of);
                self.kept = latest
                    .varying
                    .as_ref()
                    .filter(|_| in_place)
                    .map(|varying| Kept {
                        layout: latest.layout,
                        varying: varying.clone(),
                        first: (first.layout, first.t_ns),
                        since_start,
                        tree: view.tree,
                    });
            }
        }
        let frame = &mut self.frame;
        frame.machine.clone_from(&latest.machine);
        frame.utc = utc_clock(now);
        frame.t_s = latest.t_ns as f64 / 1e9;
        frame.interval_s = latest.t_ns.saturating_sub(prev.t_ns) as f64 / 1e9;
        frame.sort = view.sort;
        frame.tree = view.tree;
        frame.filter.clone_from(&view.filter);
        frame.functions = functions.len();
        &self.frame
    }

    /// Every row selected, ordered and made again (each written over the previous frame's row
    /// at its place, noting what changed), with `figures_of` a function's figures.
    fn rows_afresh(
        &mut self,
        view: &View,
        latest: &Sample,
        figures_of: impl Fn(usize, &FunctionSample) -> Figures,
    ) {
        let functions = &latest.functions;
        // Sorting by a figure needs every function's before the order; in address order each
        // row's are worked out as the row is, while its function is in the cache.
        let sorted_by_figure = view.sort != SortKey::Bdf;
        self.figures.clear();
        if sorted_by_figure {
            self.figures
                .extend(functions.iter().enumerate().map(|(i, f)| figures_of(i, f)));
        }
        self.select(view, latest);
        self.order(view, latest);
        // Each row in place of the previous frame's row at its position, noting what changed.
        let rows = &mut self.frame.rows;
        rows.truncate(self.order.len());
        self.named_from.truncate(self.order.len());
        // Changes add up until the text is printed (a paused view builds without printing).
        self.changed.resize(self.order.len(), true);
        for (k, &(i, depth)) in self.order.iter().enumerate() {
            let figures = match self.figures.get(i) {
                Some(figures) => *figures,
                None => figures_of(i, &functions[i]),
            };
            let new = row(&functions[i], &figures, depth);
            let source = (i, latest.layout);
            let named = latest.layout != 0 && self.named_from.get(k) == Some(&source);
            match self.named_from.get_mut(k) {
                Some(was) => *was = source,
                None => self.named_from.push(source),
            }
            let changed = match rows.get_mut(k) {
                Some(old) => update_row(old, new, &functions[i], named),
                None => {
                    rows.push(FunctionRow {
                        name: functions[i].name.clone(),
                        devices: functions[i].devices.clone(),
                        ..new
                    });
                    true
                }
            };
            self.changed[k] |= changed;
        }
        self.row_of.clear();
        self.row_of.resize(functions.len(), usize::MAX);
        for (k, &(i, _)) in self.order.iter().enumerate() {
            self.row_of[i] = k;
        }
    }

    /// The latest frame built.
    #[cfg(test)]
    pub(crate) fn frame(&self) -> &TopFrame {
        &self.frame
    }

    /// The latest frame as [`TopFrame::text`] prints it; only rows that changed since the
    /// previous call are formatted again. Every name in it went in escaped
    /// ([`crate::text::printable`]), so it is printed as it is.
    pub fn text(&mut self) -> Escaped<'_> {
        self.printed.print(&self.frame, &self.changed);
        // Printed now: the next call formats only what the next build changes.
        self.changed.iter_mut().for_each(|c| *c = false);
        Escaped::new(&self.printed.out)
    }

    /// Parents and children by index, made again only when the functions or their parents
    /// differ from the previous sample's (hotplug). A sample of the function list the shape was
    /// last checked against ([`Sample::layout`]) is not compared again.
    fn shape_of(&mut self, latest: &Sample) {
        let functions = &latest.functions;
        if latest.layout != 0
            && latest.layout == self.shape_layout
            && self.shape.len() == functions.len()
        {
            return;
        }
        self.shape_layout = latest.layout;
        let same = self.shape.len() == functions.len()
            && self
                .shape
                .iter()
                .zip(functions)
                .all(|(s, f)| *s == (f.bdf, f.parent));
        if same {
            return;
        }
        self.shape.clear();
        self.shape
            .extend(functions.iter().map(|f| (f.bdf, f.parent)));
        self.parents.clear();
        self.parents.extend(functions.iter().map(|f| {
            let parent = f.parent?;
            functions.binary_search_by_key(&parent, |p| p.bdf).ok()
        }));
        // Children in address order, as counts turned into starts.
        let n = functions.len();
        self.child_start.clear();
        self.child_start.resize(n + 1, 0);
        for p in self.parents.iter().flatten() {
            self.child_start[p + 1] += 1;
        }
        for i in 0..n {
            self.child_start[i + 1] += self.child_start[i];
        }
        self.child_list.clear();
        self.child_list.resize(self.child_start[n], 0);
        let mut next = self.child_start.clone();
        for (i, p) in self.parents.iter().enumerate() {
            if let Some(p) = *p {
                self.child_list[next[p]] = i;
                next[p] += 1;
            }
        }
    }

    /// Which functions show. A function shows when it or an ancestor matches (a matched port
    /// brings its subtree); in tree mode its ancestors show too, so it keeps its place. No
    /// filter shows all.
    fn select(&mut self, view: &View, latest: &Sample) {
        let functions = &latest.functions;
        self.shown.clear();
        if view.filter.is_empty() {
            self.shown.resize(functions.len(), true);
            return;
        }
        let needle = view.filter.to_lowercase();
        let parents = &self.parents;
        self.shown.extend((0..functions.len()).map(|i| {
            let mut at = Some(i);
            while let Some(j) = at {
                if matches(&functions[j], &needle) {
                    return true;
                }
                at = parents[j];
            }
            false
        }));
        if view.tree {
            for i in 0..functions.len() {
                if self.shown[i] {
                    let mut at = parents[i];
                    while let Some(j) = at {
                        self.shown[j] = true;
                        at = parents[j];
                    }
                }
            }
        }
    }

    /// The shown functions in display order: in tree mode each under its parent (functions
    /// without a shown parent are roots), siblings by the sort key; flat, all by the sort key.
    fn order(&mut self, view: &View, latest: &Sample) {
        let functions = &latest.functions;
        let figures = &self.figures;
        let by_key = |a: &usize, b: &usize| {
            compare(
                (functions[*a].bdf, &figures[*a]),
                (functions[*b].bdf, &figures[*b]),
                view.sort,
            )
        };
        self.order.clear();
        let shown = &self.shown;
        if !view.tree {
            self.order
                .extend((0..functions.len()).filter(|&i| shown[i]).map(|i| (i, 0)));
            // In address order already: only a rate key reorders.
            if view.sort != SortKey::Bdf {
                self.order.sort_by(|a, b| by_key(&a.0, &b.0));
            }
            return;
        }
        // Roots: shown functions whose parent is absent or not shown, pushed last first.
        self.siblings.clear();
        self.siblings.extend(
            (0..functions.len()).filter(|&i| shown[i] && self.parents[i].is_none_or(|p| !shown[p])),
        );
        if view.sort != SortKey::Bdf {
            self.siblings.sort_by(by_key);
        }
        self.stack.clear();
        self.stack
            .extend(self.siblings.iter().rev().map(|&i| (i, 0)));
        while let Some((i, depth)) = self.stack.pop() {
            self.order.push((i, depth));
            let children = &self.child_list[self.child_start[i]..self.child_start[i + 1]];
            self.siblings.clear();
            self.siblings
                .extend(children.iter().copied().filter(|&k| shown[k]));
            if view.sort != SortKey::Bdf {
                self.siblings.sort_by(by_key);
            }
            self.stack
                .extend(self.siblings.iter().rev().map(|&k| (k, depth + 1)));
        }
    }
}

/// The needle is in the name, kind or a device name, or starts a field of the BDF (so
/// "00:02" finds 0000:00:02.0 and not 0000:02:00.0).
fn matches(f: &FunctionSample, needle: &str) -> bool {
    let bdf = f.bdf.to_string();
    let in_bdf = bdf
        .match_indices(needle)
        .any(|(at, _)| at == 0 || matches!(bdf.as_bytes()[at - 1], b':' | b'.'));
    in_bdf
        || [f.kind.name(), short_kind(f.kind)]
            .into_iter()
            .chain(f.name.as_deref())
            .chain(f.devices.iter().map(String::as_str))
            .any(|text| text.to_lowercase().contains(needle))
}

/// Each printed row's text, kept between frames; see [`Frames`].
#[derive(Debug, Default)]
struct Printed {
    rows: Vec<PrintedRow>,
    /// The column widths the kept lines are padded to.
    widths: [usize; 11],
    /// Per column, how many rows have a cell of each width in characters: the widths follow
    /// the rows formatted again without a pass over all rows.
    cell_widths: CellWidths,
    /// The header line, the column names and every row's line.
    out: String,
    /// Where the column names start in `out` (just after the header line).
    body_start: usize,
}

#[derive(Debug, Default)]
struct PrintedRow {
    /// The row's cells, one after the other, and where each ends.
    cells: String,
    ends: [usize; 11],
    /// Each cell's width in characters.
    chars: [usize; 11],
    /// The row's padded line, newline included; empty when it is to be made again.
    line: String,
    /// Where the line starts in the body of [`Printed::out`] (after the header line).
    at: usize,
}

impl PrintedRow {
    /// Pads the cells into `line`.
    fn pad(&mut self, widths: &[usize; 11]) {
        let (cells, ends, chars) = (&self.cells, &self.ends, &self.chars);
        let cell = std::array::from_fn(|c| {
            let start = if c == 0 { 0 } else { ends[c - 1] };
            (&cells[start..ends[c]], chars[c])
        });
        push_line(&mut self.line, widths, cell);
    }
}

impl Printed {
    /// Prints `frame` into `out`. `changed[k]` true (or missing) formats row `k` again;
    /// false keeps its cells from the previous print. When the rows and widths are those of
    /// the previous print, only the header and the lines of rows formatted again are written
    /// over (in place, where a line keeps its length); otherwise every line is copied again.
    fn print(&mut self, frame: &TopFrame, changed: &[bool]) {
        let fresh = self.rows.len();
        let mut whole = fresh != frame.rows.len() || self.out.is_empty();
        for printed in self.rows.iter().skip(frame.rows.len()) {
            self.cell_widths.forget(&printed.chars);
        }
        self.rows.truncate(frame.rows.len());
        self.rows.resize_with(frame.rows.len(), PrintedRow::default);
        let mut formatted = Vec::new();
        for (k, (row, printed)) in frame.rows.iter().zip(&mut self.rows).enumerate() {
            if k < fresh {
                if !changed.get(k).copied().unwrap_or(true) {
                    continue;
                }
                self.cell_widths.forget(&printed.chars);
            }
            printed.cells.clear();
            row.write_cells(&mut printed.cells, &mut printed.ends);
            let mut start = 0;
            for (chars, &end) in printed.chars.iter_mut().zip(&printed.ends) {
                *chars = printed.cells[start..end].chars().count();
                start = end;
            }
            self.cell_widths.count(&printed.chars);
            printed.line.clear();
            formatted.push(k);
        }
        let widths = self.cell_widths.widest();
        if widths != self.widths {
            self.widths = widths;
            self.rows.iter_mut().for_each(|r| r.line.clear());
            whole = true;
        }
        let header = frame.header();
        if !whole {
            self.out.replace_range(..self.body_start - 1, &header);
            self.body_start = header.len() + 1;
            for &k in &formatted {
                let end = self
                    .rows
                    .get(k + 1)
                    .map_or(self.out.len(), |r| r.at + self.body_start);
                let printed = &mut self.rows[k];
                printed.pad(&widths);
                let at = printed.at + self.body_start;
                if printed.line.len() != end - at {
                    whole = true;
                    break;
                }
                self.out.replace_range(at..end, &printed.line);
            }
            if !whole {
                return;
            }
        }
        let line_width: usize = widths.iter().sum::<usize>() + 2 * widths.len();
        let out = &mut self.out;
        out.clear();
        out.reserve((self.rows.len() + 2) * line_width);
        out.push_str(&header);
        out.push('\n');
        self.body_start = out.len();
        push_line(out, &widths, COLUMNS.map(|c| (c, c.len())));
        for printed in &mut self.rows {
            if printed.line.is_empty() {
                printed.pad(&widths);
            }
            printed.at = out.len() - self.body_start;
            out.push_str(&printed.line);
        }
    }
}

/// Per column, the number of printed cells of each width in characters.
#[derive(Debug, Default)]
struct CellWidths([Vec<usize>; 11]);

impl CellWidths {
    fn count(&mut self, chars: &[usize; 11]) {
        for (column, &c) in self.0.iter_mut().zip(chars) {
            if column.len() <= c {
                column.resize(c + 1, 0);
            }
            column[c] += 1;
        }
    }

    fn forget(&mut self, chars: &[usize; 11]) {
        for (column, &c) in self.0.iter_mut().zip(chars) {
            column[c] -= 1;
        }
    }

    /// Each column's width: its widest cell, or its name where that is wider.
    fn widest(&self) -> [usize; 11] {
        std::array::from_fn(|c| {
            let cells = self.0[c].iter().rposition(|&n| n > 0).unwrap_or(0);
            cells.max(COLUMNS[c].len())
        })
    }
}

/// Appends one line of cells (text, width in characters) padded to `widths`: the rate columns
/// right-aligned, the rest left-aligned, NAME unpadded, trailing spaces trimmed.
fn push_line(out: &mut String, widths: &[usize; 11], cells: [(&str, usize); 11]) {
    let begin = out.len();
    for (i, ((cell, chars), w)) in cells.iter().zip(widths).enumerate() {
        let pad = w.saturating_sub(*chars);
        if i + 1 == cells.len() {
            out.push_str(cell);
        } else if (2..=4).contains(&i) {
            push_spaces(out, pad);
            out.push_str(cell);
            out.push_str("  ");
        } else {
            out.push_str(cell);
            push_spaces(out, pad + 2);
        }
    }
    let kept = begin + out[begin..].trim_end().len();
    out.truncate(kept);
    out.push('\n');
}

/// Appends `n` spaces.
fn push_spaces(out: &mut String, n: usize) {
    const SPACES: &str = "                                ";
    let mut left = n;
    while left > 0 {
        let now = left.min(SPACES.len());
        out.push_str(&SPACES[..now]);
        left -= now;
    }
}

/// The row of `f` at `depth`, without its name and devices (the caller sets those, so that an
/// unchanged row copies no strings).
fn row(f: &FunctionSample, figures: &Figures, depth: usize) -> FunctionRow {
    let link_state = if f.link_down {
        LinkState::Down
    } else if f.downgraded {
        LinkState::Downgraded
    } else if f.link.current_width.is_some_and(|w| w > 0) {
        LinkState::Ok
    } else {
        LinkState::None
    };
    FunctionRow {
        bdf: f.bdf,
        depth,
        kind: f.kind,
        name: None,
        devices: Vec::new(),
        source: f.traffic.map(|t| t.source),
        rx_mbps: figures.rx_mbps,
        tx_mbps: figures.tx_mbps,
        rx_percent: figures.rx_percent,
        tx_percent: figures.tx_percent,
        current_gts: f.link.current_gts,
        current_width: f.link.current_width,
        capable_gts: f.link.capable_gts,
        capable_width: f.link.capable_width,
        link_state,
        aer: figures.aer,
    }
}

/// Makes `old` the row `new` (made by [`row`], no name or devices) with `f`'s name and devices,
/// reusing `old`'s strings; true when anything differs from what `old` was. `named`: `old`
/// holds `f`'s name already (see `Frames::named_from`).
fn update_row(old: &mut FunctionRow, new: FunctionRow, f: &FunctionSample, named: bool) -> bool {
    // Every field named, so a new field cannot be left out of the comparison.
    let FunctionRow {
        bdf,
        depth,
        kind,
        name: _,
        devices: _,
        source,
        rx_mbps,
        tx_mbps,
        rx_percent,
        tx_percent,
        current_gts,
        current_width,
        capable_gts,
        capable_width,
        link_state,
        aer,
    } = new;
    let mut changed = false;
    if !named && old.name != f.name {
        old.name.clone_from(&f.name);
        changed = true;
    }
    if old.devices != f.devices {
        old.devices.clone_from(&f.devices);
        changed = true;
    }
    macro_rules! set {
        ($($field:ident),*) => {$(
            if old.$field != $field {
                old.$field = $field;
                changed = true;
            }
        )*};
    }
    set!(
        bdf,
        depth,
        kind,
        source,
        rx_mbps,
        tx_mbps,
        rx_percent,
        tx_percent,
        current_gts,
        current_width,
        capable_gts,
        capable_width,
        link_state,
        aer
    );
    changed
}

/// Busiest first for rates (a function without a figure after every one with), then address.
fn compare(a: (Bdf, &Figures), b: (Bdf, &Figures), key: SortKey) -> std::cmp::Ordering {
    let by_value = match (a.1.sort_value(key), b.1.sort_value(key)) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    };
    by_value.then(a.0.cmp(&b.0))
}

/// HH:MM:SS of `now` in UTC.
fn utc_clock(now: SystemTime) -> String {
    let s = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
