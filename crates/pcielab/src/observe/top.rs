//! The view behind `pcielab top`, kept apart from the terminal so it can be tested without one:
//! [`View`] holds what the user chose (sort key, filter, tree or flat, pause, help, scroll) and
//! changes only through [`View::handle`] with a terminal-independent [`Key`]; [`TopFrame::build`]
//! turns three [`Sample`]s (the first one, for AER deltas since start, and the two latest, for
//! rates) into the rows the view selects, in its order; [`TopFrame::text`] prints a frame as
//! `top -b` does; the CLI paints it on a terminal. A view refreshed in a loop keeps a [`Frames`],
//! which gives the same frames and text and reuses its buffers, the tree's shape and unchanged
//! rows' text from frame to frame. All figures come from `observe`'s per-function rate (what
//! [`super::rates`] gives for every function); nothing here computes a rate.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::{interval_us, rate, FunctionSample, Sample, Source};
use crate::pcie::Bdf;
use crate::text::{printable, push_printable};
use crate::topology::health::AerCounts;
use crate::topology::Kind;

/// What the rows are ordered by. Rates and % sort busiest first; BDF in address order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    Bdf,
    Rx,
    Tx,
    Link,
}

impl SortKey {
    const CYCLE: [SortKey; 4] = [SortKey::Bdf, SortKey::Rx, SortKey::Tx, SortKey::Link];

    pub fn name(self) -> &'static str {
        match self {
            SortKey::Bdf => "bdf",
            SortKey::Rx => "rx",
            SortKey::Tx => "tx",
            SortKey::Link => "%link",
        }
    }

    fn step(self, forward: bool) -> SortKey {
        let i = SortKey::CYCLE.iter().position(|k| *k == self).unwrap_or(0);
        let n = SortKey::CYCLE.len();
        SortKey::CYCLE[if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        }]
    }
}

impl std::str::FromStr for SortKey {
    type Err = String;

    /// A key as `--sort` takes it: `bdf`, `rx`, `tx`, `link` (or `%link`, as the column is named).
    fn from_str(text: &str) -> std::result::Result<SortKey, String> {
        match text {
            "bdf" => Ok(SortKey::Bdf),
            "rx" => Ok(SortKey::Rx),
            "tx" => Ok(SortKey::Tx),
            "link" | "%link" => Ok(SortKey::Link),
            _ => Err(format!(
                "'{text}' is not a sort key: expected bdf, rx, tx or link"
            )),
        }
    }
}

/// A key press, as the view understands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Enter,
    Esc,
    Backspace,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    /// Ctrl-C: quits from anywhere, filter prompt included.
    Interrupt,
}

/// What the caller does after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Continue,
    Quit,
}

/// The user's choices; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub sort: SortKey,
    /// Children under their parent, indented; otherwise one flat list.
    pub tree: bool,
    pub paused: bool,
    pub help: bool,
    /// Case-insensitive text a function, or one of its ancestors, must contain.
    pub filter: String,
    /// The filter being typed after `/`, until Enter applies it or Esc drops it.
    pub editing: Option<String>,
    /// Rows scrolled off the top of the table.
    pub scroll: usize,
}

impl Default for View {
    fn default() -> View {
        View {
            sort: SortKey::Bdf,
            tree: true,
            paused: false,
            help: false,
            filter: String::new(),
            editing: None,
            scroll: 0,
        }
    }
}

/// Rows a page key moves.
const PAGE_ROWS: usize = 10;

/// The keys, for the help screen and `--help`.
pub const KEY_HELP: &[(&str, &str)] = &[
    ("s  > / <", "sort: next / previous key (bdf, rx, tx, %link)"),
    ("/", "filter: type text, Enter applies, Esc cancels"),
    ("Esc", "clear the filter"),
    ("t", "tree / flat"),
    ("space", "pause / resume sampling"),
    ("Up Down PgUp PgDn Home", "scroll"),
    ("h  ?", "this help (any key closes it)"),
    ("q  Ctrl-C", "quit"),
];

impl View {
    pub fn handle(&mut self, key: Key) -> Action {
        if key == Key::Interrupt {
            return Action::Quit;
        }
        if let Some(text) = &mut self.editing {
            match key {
                Key::Char(c) => text.push(c),
                Key::Backspace => {
                    text.pop();
                }
                Key::Enter => {
                    self.filter = self.editing.take().unwrap_or_default();
                    self.scroll = 0;
                }
                Key::Esc => self.editing = None,
                _ => {}
            }
            return Action::Continue;
        }
        if self.help {
            self.help = false;
            return if key == Key::Char('q') {
                Action::Quit
            } else {
                Action::Continue
            };
        }
        match key {
            Key::Char('q') => return Action::Quit,
            Key::Char('s') | Key::Char('>') => self.sort = self.sort.step(true),
            Key::Char('<') => self.sort = self.sort.step(false),
            Key::Char('t') => self.tree = !self.tree,
            Key::Char(' ') => self.paused = !self.paused,
            Key::Char('h') | Key::Char('?') => self.help = true,
            Key::Char('/') => self.editing = Some(self.filter.clone()),
            Key::Esc => {
                self.filter.clear();
                self.scroll = 0;
            }
            Key::Up => self.scroll = self.scroll.saturating_sub(1),
            Key::Down => self.scroll = self.scroll.saturating_add(1),
            Key::PageUp => self.scroll = self.scroll.saturating_sub(PAGE_ROWS),
            Key::PageDown => self.scroll = self.scroll.saturating_add(PAGE_ROWS),
            Key::Home => self.scroll = 0,
            _ => {}
        }
        Action::Continue
    }
}

/// The state of a function's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkState {
    /// Trained at what both ends can do.
    Ok,
    /// Trained slower or narrower than capable.
    Downgraded,
    Down,
    /// The function reports no link (an integrated endpoint, a host bridge).
    None,
}

impl LinkState {
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Ok => "ok",
            LinkState::Downgraded => "DOWNGRADED",
            LinkState::Down => "DOWN",
            LinkState::None => "-",
        }
    }
}

/// One line of the table.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FunctionRow {
    pub bdf: Bdf,
    /// Indentation level in tree mode (0 in flat mode).
    pub depth: usize,
    pub kind: Kind,
    pub name: Option<String>,
    pub devices: Vec<String>,
    pub source: Option<Source>,
    pub rx_mbps: Option<f64>,
    pub tx_mbps: Option<f64>,
    pub rx_percent: Option<f64>,
    pub tx_percent: Option<f64>,
    pub current_gts: Option<f64>,
    pub current_width: Option<u32>,
    pub capable_gts: Option<f64>,
    pub capable_width: Option<u32>,
    pub link_state: LinkState,
    /// AER increments since the first sample (`None`: the function has no such counter).
    pub aer: AerCounts,
}

impl FunctionRow {
    /// The busier direction's % of the link-achievable rate.
    pub fn link_percent(&self) -> Option<f64> {
        link_percent(self.rx_percent, self.tx_percent)
    }

    /// The text cells, in [`COLUMNS`] order.
    pub fn cells(&self) -> [String; 11] {
        let mut text = String::new();
        let mut ends = [0; 11];
        self.write_cells(&mut text, &mut ends);
        let mut start = 0;
        ends.map(|end| {
            let cell = text[start..end].to_string();
            start = end;
            cell
        })
    }

    /// Appends the text cells, in [`COLUMNS`] order, to `out` and notes where each ends: a
    /// printed row keeps its cells in one buffer instead of allocating a string per cell.
    fn write_cells(&self, out: &mut String, ends: &mut [usize; 11]) {
        // Writing into a String cannot fail.
        let mbps = |out: &mut String, v: Option<f64>| match v {
            Some(v) => {
                let _ = write!(out, "{v:.1}");
            }
            None => out.push('-'),
        };
        // No width and speed, or no lanes (what an integrated endpoint's capability lists): "-".
        let link = |out: &mut String, gts: Option<f64>, width: Option<u32>| match (gts, width) {
            (None, None) | (_, Some(0)) => out.push('-'),
            (g, w) => {
                out.push('x');
                match w {
                    Some(w) => {
                        let _ = write!(out, "{w}");
                    }
                    None => out.push('?'),
                }
                out.push('@');
                match g {
                    Some(g) => {
                        let _ = write!(out, "{g}");
                    }
                    None => out.push('?'),
                }
                out.push_str("GT/s");
            }
        };
        let count = |out: &mut String, v: Option<u64>| match v {
            Some(v) => {
                let _ = write!(out, "{v}");
            }
            None => out.push('-'),
        };
        let mut column = 0;
        let mut end_cell = |out: &mut String| {
            ends[column] = out.len();
            column += 1;
        };
        for _ in 0..self.depth {
            out.push_str("  ");
        }
        let _ = write!(out, "{}", self.bdf);
        end_cell(out);
        out.push_str(short_kind(self.kind));
        end_cell(out);
        mbps(out, self.rx_mbps);
        end_cell(out);
        mbps(out, self.tx_mbps);
        end_cell(out);
        mbps(out, self.link_percent());
        end_cell(out);
        out.push_str(self.source.map_or("-", Source::name));
        end_cell(out);
        if self.link_state == LinkState::Down {
            out.push('-');
        } else {
            link(out, self.current_gts, self.current_width);
        }
        end_cell(out);
        link(out, self.capable_gts, self.capable_width);
        end_cell(out);
        out.push_str(self.link_state.name());
        end_cell(out);
        match (self.aer.correctable, self.aer.nonfatal, self.aer.fatal) {
            (None, None, None) => out.push('-'),
            (c, n, f) => {
                count(out, c);
                out.push('/');
                count(out, n);
                out.push('/');
                count(out, f);
            }
        }
        end_cell(out);
        // Names come from files (pci.ids, sysfs device names): shown, never obeyed.
        push_printable(out, self.name.as_deref().unwrap_or_default());
        if let Some((first, rest)) = self.devices.split_first() {
            out.push_str(" (");
            push_printable(out, first);
            for device in rest {
                out.push_str(", ");
                push_printable(out, device);
            }
            out.push(')');
        }
        end_cell(out);
    }
}

/// The table's column names. NAME is last because it holds spaces; every other cell is one word.
pub const COLUMNS: [&str; 11] = [
    "BDF",
    "KIND",
    "RX_MB/s",
    "TX_MB/s",
    "%LINK",
    "SRC",
    "LINK",
    "CAPABLE",
    "STATE",
    "AER_C/NF/F",
    "NAME",
];

fn short_kind(kind: Kind) -> &'static str {
    match kind {
        Kind::HostBridge => "host",
        Kind::RootPort => "rport",
        Kind::SwitchUpstream => "sw-up",
        Kind::SwitchDownstream => "sw-down",
        Kind::Endpoint => "ep",
        Kind::RcEndpoint => "rciep",
        Kind::PciBridge => "bridge",
    }
}

/// One screen (or one batch frame): header facts and the rows the view selects, in its order.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TopFrame {
    pub machine: String,
    /// Wall-clock time of the latest sample, HH:MM:SS UTC.
    pub utc: String,
    /// Seconds since the observer opened (on `sim:`, the simulated time played to).
    pub t_s: f64,
    /// Seconds between the two samples the rates come from.
    pub interval_s: f64,
    pub sort: SortKey,
    pub tree: bool,
    pub filter: String,
    /// Functions in the latest sample, before filtering.
    pub functions: usize,
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
/// host whose functions did not change re-does per function only the rates, a comparison of the
/// row with the one it replaces and a copy of its line; rows whose figures changed are formatted
/// again, and all lines are padded again when a column's width changed.
#[derive(Debug, Default)]
pub struct Frames {
    frame: TopFrame,
    /// The functions and parents `parents` and `children` were made from.
    shape: Vec<(Bdf, Option<Bdf>)>,
    /// Per function of the latest sample: its parent's index.
    parents: Vec<Option<usize>>,
    /// Per function: its children's indices (in address order) are
    /// `child_list[child_start[i]..child_start[i + 1]]`.
    child_start: Vec<usize>,
    child_list: Vec<usize>,
    /// Per function: the figures its row shows, from one pass over the samples.
    figures: Vec<Figures>,
    shown: Vec<bool>,
    /// The frame's rows as (function index, depth), in display order.
    order: Vec<(usize, usize)>,
    stack: Vec<(usize, usize)>,
    siblings: Vec<usize>,
    /// Per row: it differs from the row at its place when the text was last printed.
    changed: Vec<bool>,
    printed: Printed,
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
        // One pass: the rates since `prev`, the AER increments since `first`.
        let recent_us = interval_us(prev, latest);
        let since_start = interval_us(first, latest).is_some();
        self.figures.clear();
        self.figures
            .extend(functions.iter().enumerate().map(|(i, f)| {
                let recent =
                    recent_us.and_then(|us| Some(rate(prev.counterpart(i, f.bdf)?, f, us)));
                let aer = if since_start {
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
            }));
        self.select(view, latest);
        self.order(view, latest);
        // Each row in place of the previous frame's row at its position, noting what changed.
        let rows = &mut self.frame.rows;
        rows.truncate(self.order.len());
        // Changes add up until the text is printed (a paused view builds without printing).
        self.changed.resize(self.order.len(), true);
        for (k, &(i, depth)) in self.order.iter().enumerate() {
            let new = row(&functions[i], &self.figures[i], depth);
            let changed = match rows.get_mut(k) {
                Some(old) => update_row(old, new, &functions[i]),
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

    /// The latest frame built.
    pub fn frame(&self) -> &TopFrame {
        &self.frame
    }

    /// The latest frame as [`TopFrame::text`] prints it; only rows that changed since the
    /// previous call are formatted again.
    pub fn text(&mut self) -> &str {
        self.printed.print(&self.frame, &self.changed);
        // Printed now: the next call formats only what the next build changes.
        self.changed.iter_mut().for_each(|c| *c = false);
        &self.printed.out
    }

    /// Parents and children by index, made again only when the functions or their parents
    /// differ from the previous sample's (hotplug).
    fn shape_of(&mut self, latest: &Sample) {
        let functions = &latest.functions;
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
    out: String,
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
    /// false keeps its cells from the previous print.
    fn print(&mut self, frame: &TopFrame, changed: &[bool]) {
        let fresh = self.rows.len();
        self.rows.truncate(frame.rows.len());
        self.rows.resize_with(frame.rows.len(), PrintedRow::default);
        for (k, (row, printed)) in frame.rows.iter().zip(&mut self.rows).enumerate() {
            if k < fresh && !changed.get(k).copied().unwrap_or(true) {
                continue;
            }
            printed.cells.clear();
            row.write_cells(&mut printed.cells, &mut printed.ends);
            let mut start = 0;
            for (chars, &end) in printed.chars.iter_mut().zip(&printed.ends) {
                *chars = printed.cells[start..end].chars().count();
                start = end;
            }
            printed.line.clear();
        }
        let mut widths = COLUMNS.map(str::len);
        for printed in &self.rows {
            for (w, &c) in widths.iter_mut().zip(&printed.chars) {
                *w = (*w).max(c);
            }
        }
        if widths != self.widths {
            self.widths = widths;
            self.rows.iter_mut().for_each(|r| r.line.clear());
        }
        let line_width: usize = widths.iter().sum::<usize>() + 2 * widths.len();
        let out = &mut self.out;
        out.clear();
        out.reserve((self.rows.len() + 2) * line_width);
        out.push_str(&frame.header());
        out.push('\n');
        push_line(out, &widths, COLUMNS.map(|c| (c, c.len())));
        for printed in &mut self.rows {
            if printed.line.is_empty() {
                printed.pad(&widths);
            }
            out.push_str(&printed.line);
        }
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
/// reusing `old`'s strings; true when anything differs from what `old` was.
fn update_row(old: &mut FunctionRow, new: FunctionRow, f: &FunctionSample) -> bool {
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
    if old.name != f.name {
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

/// The busier direction's %, or the one there is.
fn link_percent(rx: Option<f64>, tx: Option<f64>) -> Option<f64> {
    match (rx, tx) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Result};
    use crate::observe::Observer;
    use crate::pcie::bdf;
    use std::path::Path;

    fn no_files(p: &Path) -> Result<String> {
        Err(Error::bad_input(format!(
            "unexpected read of {}",
            p.display()
        )))
    }

    /// yitian710 with a 1 MiB sequential read on the SATA disk behind 00:02.0, sampled at 0, 1
    /// and 2 simulated seconds.
    fn samples() -> (Sample, Sample, Sample) {
        let job: Vec<String> = [
            "fio",
            "--filename=/dev/sda",
            "--rw=read",
            "--bs=1m",
            "--time_based",
            "--runtime=5",
            "--name=r",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let machine = "sim:yitian710".parse().unwrap();
        let mut observer = Observer::open(&machine, &job, no_files).unwrap();
        (
            observer.sample_at(0).unwrap(),
            observer.sample_at(1_000_000_000).unwrap(),
            observer.sample_at(2_000_000_000).unwrap(),
        )
    }

    fn frame(view: &View) -> TopFrame {
        let (a, b, c) = samples();
        TopFrame::build(
            view,
            &a,
            &b,
            &c,
            UNIX_EPOCH + std::time::Duration::from_secs(3723),
        )
    }

    fn bdfs(frame: &TopFrame) -> Vec<(String, usize)> {
        frame
            .rows
            .iter()
            .map(|r| (r.bdf.to_string(), r.depth))
            .collect()
    }

    /// Frames kept between refreshes print what a frame built afresh prints, as the traffic
    /// starts and stops (rows and column widths change), the view changes under it, and a
    /// paused view builds frames it does not print.
    #[test]
    fn kept_frames_match_frames_built_afresh() {
        let machine = "sim:yitian710".parse().unwrap();
        let job: Vec<String> = [
            "fio",
            "--filename=/dev/sda",
            "--rw=read",
            "--bs=1m",
            "--time_based",
            "--runtime=3",
            "--name=r",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut observer = Observer::open(&machine, &job, no_files).unwrap();
        let first = observer.sample_at(0).unwrap();
        let mut prev = first.clone();
        let mut latest = first.clone();
        let views = [
            View::default(),
            View {
                sort: SortKey::Rx,
                tree: false,
                ..View::default()
            },
            View {
                sort: SortKey::Link,
                ..View::default()
            },
            View {
                filter: "00:02".into(),
                ..View::default()
            },
            View {
                filter: "marvell".into(),
                tree: false,
                ..View::default()
            },
            View::default(),
        ];
        let now = UNIX_EPOCH + std::time::Duration::from_secs(3723);
        let mut frames = Frames::default();
        let mut busy_rows = 0;
        for step in 1..=12u64 {
            std::mem::swap(&mut prev, &mut latest);
            observer
                .sample_at_into(step * 500_000_000, &mut latest)
                .unwrap();
            assert_eq!(latest, observer.sample_at(step * 500_000_000).unwrap());
            let view = &views[(step as usize / 2) % views.len()];
            let afresh = TopFrame::build(view, &first, &prev, &latest, now);
            assert_eq!(frames.build(view, &first, &prev, &latest, now), &afresh);
            // Every third frame is built and not printed, as while paused.
            if step % 3 != 0 {
                assert_eq!(frames.text(), afresh.text(), "step {step}");
            }
            busy_rows += afresh
                .rows
                .iter()
                .filter(|r| r.rx_mbps.is_some_and(|v| v > 0.0))
                .count();
        }
        // The read ran and stopped within the frames: some showed traffic, the last none.
        assert!(busy_rows > 0);
        let last = frames.frame();
        assert!(last.rows.iter().all(|r| r.rx_mbps.unwrap_or(0.0) == 0.0));
    }

    #[test]
    fn keys_change_the_view_and_quit() {
        let mut v = View::default();
        assert_eq!(v.sort, SortKey::Bdf);
        for want in [SortKey::Rx, SortKey::Tx, SortKey::Link, SortKey::Bdf] {
            v.handle(Key::Char('s'));
            assert_eq!(v.sort, want);
        }
        v.handle(Key::Char('<'));
        assert_eq!(v.sort, SortKey::Link);
        v.handle(Key::Char('>'));
        assert_eq!(v.sort, SortKey::Bdf);
        // A filter is typed, edited and applied; a second one is dropped with Esc.
        for k in [
            Key::Char('/'),
            Key::Char('0'),
            Key::Char('x'),
            Key::Backspace,
            Key::Char('0'),
        ] {
            assert_eq!(v.handle(k), Action::Continue);
        }
        // 'q' while typing is text, not quit.
        assert_eq!(v.handle(Key::Char('q')), Action::Continue);
        assert_eq!(v.editing.as_deref(), Some("00q"));
        v.handle(Key::Backspace);
        v.handle(Key::Enter);
        assert_eq!((v.filter.as_str(), v.editing.is_none()), ("00", true));
        v.handle(Key::Char('/'));
        v.handle(Key::Char('z'));
        v.handle(Key::Esc);
        assert_eq!(v.filter, "00");
        v.handle(Key::Esc);
        assert_eq!(v.filter, "");
        v.handle(Key::Char('t'));
        v.handle(Key::Char(' '));
        assert!(!v.tree && v.paused);
        // Help: any key closes it without acting, except q, which quits.
        v.handle(Key::Char('?'));
        assert!(v.help);
        v.handle(Key::Char('t'));
        assert!(!v.help && !v.tree);
        v.handle(Key::Char('h'));
        assert_eq!(v.handle(Key::Char('q')), Action::Quit);
        v.handle(Key::Char('/'));
        assert_eq!(v.handle(Key::Interrupt), Action::Quit);
        assert_eq!(View::default().handle(Key::Char('q')), Action::Quit);
    }

    #[test]
    fn sorting_by_rx_puts_the_busy_port_and_its_disk_first() {
        let tree = frame(&View {
            sort: SortKey::Rx,
            ..View::default()
        });
        assert_eq!(
            bdfs(&tree)[..2],
            [
                ("0000:00:02.0".to_string(), 0),
                ("0000:04:00.0".to_string(), 1)
            ]
        );
        let port = &tree.rows[0];
        assert_eq!(port.source, Some(Source::Pmu));
        assert_eq!(tree.rows[1].source, Some(Source::Derived));
        // The SATA read runs near 528 MB/s on its Gen2 x2 link (`pcielab stat` on the same job).
        let rx = port.rx_mbps.unwrap();
        assert!((500.0..560.0).contains(&rx), "{rx}");
        assert!((port.link_percent().unwrap() - rx / 925.13 * 100.0).abs() < 0.1);
        // Flat: every function on one level, idle ones (0 MB/s) after, those without figures last.
        let flat = frame(&View {
            sort: SortKey::Rx,
            tree: false,
            ..View::default()
        });
        assert!(flat.rows.iter().all(|r| r.depth == 0));
        assert_eq!(flat.rows.len(), flat.functions);
        let mut firsts: Vec<String> = bdfs(&flat)[..2].iter().map(|r| r.0.clone()).collect();
        firsts.sort();
        assert_eq!(firsts, ["0000:00:02.0", "0000:04:00.0"]);
        let values: Vec<Option<f64>> = flat.rows.iter().map(|r| r.rx_mbps).collect();
        let known = values.iter().take_while(|v| v.is_some()).count();
        assert!(values[known..].iter().all(Option::is_none));
        assert!(values[..known].windows(2).all(|w| w[0] >= w[1]));
    }

    #[test]
    fn a_filter_keeps_a_ports_subtree_and_a_matchs_ancestors_in_tree_mode() {
        let port = frame(&View {
            filter: "00:02".into(),
            ..View::default()
        });
        assert_eq!(
            bdfs(&port),
            [
                ("0000:00:02.0".to_string(), 0),
                ("0000:04:00.0".to_string(), 1)
            ]
        );
        let by_name = |tree| {
            bdfs(&frame(&View {
                filter: "marvell".into(),
                tree,
                ..View::default()
            }))
        };
        assert_eq!(by_name(true).len(), 2);
        assert_eq!(by_name(false), [("0000:04:00.0".to_string(), 0)]);
        // Tree order by address: every child right after its parent, one level deeper.
        let all = frame(&View::default());
        assert_eq!(all.rows.len(), all.functions);
        assert_eq!(all.rows[0].bdf, bdf("00:00.0"));
        let bridge = all
            .rows
            .iter()
            .position(|r| r.bdf == bdf("01:00.0"))
            .unwrap();
        assert_eq!(all.rows[bridge - 1].bdf, bdf("00:00.0"));
        assert_eq!(
            (
                all.rows[bridge].depth,
                all.rows[bridge + 1].bdf,
                all.rows[bridge + 1].depth
            ),
            (1, bdf("02:00.0"), 2)
        );
    }

    #[test]
    fn link_states_and_aer_columns() {
        let f = frame(&View::default());
        let state = |at: &str| f.rows.iter().find(|r| r.bdf == bdf(at)).unwrap().clone();
        assert_eq!(state("00:03.0").link_state, LinkState::Down);
        assert_eq!(state("00:03.0").cells()[6..9], ["-", "x4@32GT/s", "DOWN"]);
        assert_eq!(state("00:02.0").link_state, LinkState::Downgraded);
        assert_eq!(state("b1:00.0").link_state, LinkState::Ok);
        assert_eq!(state("7c:00.0").link_state, LinkState::None);
        let cells = state("00:02.0").cells();
        assert_eq!(cells[6], "x2@5GT/s");
        assert_eq!(cells[7], "x4@32GT/s");
        assert_eq!(cells[8], "DOWNGRADED");
    }

    #[test]
    fn names_from_files_cannot_drive_the_terminal() {
        let mut f = frame(&View {
            filter: "04:00".into(),
            ..View::default()
        });
        f.rows[1].name = Some("disk\u{1b}[2J".into());
        f.rows[1].devices = vec!["block/sd\na".into()];
        let text = f.text();
        assert!(!text.contains('\u{1b}'));
        assert!(text.contains("disk\\x1b[2J (block/sd\\na)"), "{text}");
    }

    #[test]
    fn text_has_a_header_the_columns_and_one_parsable_line_per_row() {
        let f = frame(&View {
            filter: "00:02".into(),
            sort: SortKey::Rx,
            ..View::default()
        });
        let text = f.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "pcielab top - sim:yitian710 - 01:02:03 UTC - up 2.0 s - interval 1.0 s - 2 of 28 \
             functions - sort rx - tree - filter \"00:02\""
        );
        assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), COLUMNS);
        assert_eq!(lines.len(), 4);
        let port: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(&port[..2], ["0000:00:02.0", "rport"]);
        let rx: f64 = port[2].parse().unwrap();
        assert!((rx - f.rows[0].rx_mbps.unwrap()).abs() < 0.05);
        assert_eq!(
            &port[5..10],
            ["pmu", "x2@5GT/s", "x4@32GT/s", "DOWNGRADED", "0/0/0"]
        );
        assert!(lines[3].starts_with("  0000:04:00.0  ep "), "{}", lines[3]);
    }
}
