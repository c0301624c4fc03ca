//! The view behind `pcielab top`, kept apart from the terminal so it can be tested without one:
//! [`View`] holds what the user chose (sort key, filter, tree or flat, pause, help, scroll) and
//! changes only through [`View::handle`] with a terminal-independent [`Key`]; [`TopFrame::build`]
//! turns three [`Sample`]s (the first one, for AER deltas since start, and the two latest, for
//! rates) into the rows the view selects, in its order; [`TopFrame::text`] prints a frame as
//! `top -b` does; the CLI paints it on a terminal. All figures come from [`rates`]; nothing here
//! computes a rate.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::{rates, FunctionRate, FunctionSample, Sample, Source};
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
        match (self.rx_percent, self.tx_percent) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    fn sort_value(&self, key: SortKey) -> Option<f64> {
        match key {
            SortKey::Bdf => None,
            SortKey::Rx => self.rx_mbps,
            SortKey::Tx => self.tx_mbps,
            SortKey::Link => self.link_percent(),
        }
    }

    /// The needle is in the name, kind or a device name, or starts a field of the BDF (so
    /// "00:02" finds 0000:00:02.0 and not 0000:02:00.0).
    fn matches(&self, needle: &str) -> bool {
        let bdf = self.bdf.to_string();
        let in_bdf = bdf
            .match_indices(needle)
            .any(|(at, _)| at == 0 || matches!(bdf.as_bytes()[at - 1], b':' | b'.'));
        in_bdf
            || [self.kind.name(), short_kind(self.kind)]
                .into_iter()
                .chain(self.name.as_deref())
                .chain(self.devices.iter().map(String::as_str))
                .any(|text| text.to_lowercase().contains(needle))
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
    /// batch frame writes all its rows into one buffer instead of allocating a string per cell.
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
    /// `view`; `now` is the wall-clock time shown in the header.
    pub fn build(
        view: &View,
        first: &Sample,
        prev: &Sample,
        latest: &Sample,
        now: SystemTime,
    ) -> TopFrame {
        let recent = rates(prev, latest);
        let since_start = rates(first, latest);
        let mut all: Vec<FunctionRow> = latest
            .functions
            .iter()
            .map(|f| row(f, rate_of(&recent, f.bdf), rate_of(&since_start, f.bdf)))
            .collect();
        let needle = view.filter.to_lowercase();
        // Each row's parent's index in `all` (which is in `latest`'s address order).
        let parents: Vec<Option<usize>> = latest
            .functions
            .iter()
            .map(|f| {
                let parent = f.parent?;
                latest
                    .functions
                    .binary_search_by_key(&parent, |p| p.bdf)
                    .ok()
            })
            .collect();
        // A function shows when it or an ancestor matches (a matched port brings its subtree);
        // in tree mode its ancestors show too, so it keeps its place. No filter shows all.
        let mut shown: Vec<bool> = (0..all.len())
            .map(|i| {
                if needle.is_empty() {
                    return true;
                }
                let mut at = Some(i);
                while let Some(j) = at {
                    if all[j].matches(&needle) {
                        return true;
                    }
                    at = parents[j];
                }
                false
            })
            .collect();
        if view.tree {
            for i in 0..all.len() {
                if shown[i] {
                    let mut at = parents[i];
                    while let Some(j) = at {
                        shown[j] = true;
                        at = parents[j];
                    }
                }
            }
        }
        let functions = all.len();
        let mut ordered = Vec::with_capacity(functions);
        if view.tree {
            // Children by parent index; functions without a shown parent are roots.
            let mut roots: Vec<usize> = Vec::new();
            let mut children: Vec<Vec<usize>> = vec![Vec::new(); functions];
            for i in (0..functions).filter(|i| shown[*i]) {
                match parents[i] {
                    Some(p) => children[p].push(i),
                    None => roots.push(i),
                }
            }
            roots.sort_by(|a, b| compare(&all[*a], &all[*b], view.sort));
            for list in &mut children {
                list.sort_by(|a, b| compare(&all[*a], &all[*b], view.sort));
            }
            let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&i| (i, 0)).collect();
            while let Some((i, depth)) = stack.pop() {
                ordered.push(FunctionRow {
                    depth,
                    ..take_row(&mut all, i)
                });
                stack.extend(children[i].iter().rev().map(|&k| (k, depth + 1)));
            }
        } else {
            let mut flat: Vec<usize> = (0..all.len()).filter(|i| shown[*i]).collect();
            flat.sort_by(|a, b| compare(&all[*a], &all[*b], view.sort));
            ordered = flat.into_iter().map(|i| take_row(&mut all, i)).collect();
        }
        TopFrame {
            machine: latest.machine.clone(),
            utc: utc_clock(now),
            t_s: latest.t_ns as f64 / 1e9,
            interval_s: latest.t_ns.saturating_sub(prev.t_ns) as f64 / 1e9,
            sort: view.sort,
            tree: view.tree,
            filter: view.filter.clone(),
            functions,
            rows: ordered,
        }
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
        // Every row's cells in one buffer, each row's cell ends alongside.
        let mut cells = String::new();
        let mut ends: Vec<[usize; 11]> = Vec::with_capacity(self.rows.len());
        for row in &self.rows {
            let mut row_ends = [0; 11];
            row.write_cells(&mut cells, &mut row_ends);
            ends.push(row_ends);
        }
        let row_cells = |row_ends: &[usize; 11], start: usize| {
            let mut from = start;
            row_ends.map(|end| {
                let cell = &cells[from..end];
                from = end;
                cell
            })
        };
        let mut widths = COLUMNS.map(str::len);
        let mut start = 0;
        for row_ends in &ends {
            for (w, c) in widths.iter_mut().zip(row_cells(row_ends, start)) {
                *w = (*w).max(c.chars().count());
            }
            start = row_ends[10];
        }
        let line = |out: &mut String, row: &[&str]| {
            let begin = out.len();
            for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
                let pad = w.saturating_sub(cell.chars().count());
                if i + 1 == row.len() {
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
        };
        let line_width: usize = widths.iter().sum::<usize>() + 2 * widths.len();
        let mut out = String::with_capacity((self.rows.len() + 2) * line_width);
        out.push_str(&self.header());
        out.push('\n');
        line(&mut out, &COLUMNS);
        let mut start = 0;
        for row_ends in &ends {
            line(&mut out, &row_cells(row_ends, start));
            start = row_ends[10];
        }
        out
    }
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

/// Moves row `i` out of `all` (each row is placed in the frame once), leaving a placeholder
/// that is never shown.
fn take_row(all: &mut [FunctionRow], i: usize) -> FunctionRow {
    let bdf = all[i].bdf;
    std::mem::replace(&mut all[i], placeholder(bdf))
}

fn placeholder(bdf: Bdf) -> FunctionRow {
    FunctionRow {
        bdf,
        depth: 0,
        kind: Kind::Endpoint,
        name: None,
        devices: Vec::new(),
        source: None,
        rx_mbps: None,
        tx_mbps: None,
        rx_percent: None,
        tx_percent: None,
        current_gts: None,
        current_width: None,
        capable_gts: None,
        capable_width: None,
        link_state: LinkState::None,
        aer: AerCounts::default(),
    }
}

fn row(
    f: &FunctionSample,
    recent: Option<&FunctionRate>,
    since: Option<&FunctionRate>,
) -> FunctionRow {
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
        depth: 0,
        kind: f.kind,
        name: f.name.clone(),
        devices: f.devices.clone(),
        source: f.traffic.map(|t| t.source),
        rx_mbps: recent.and_then(|r| r.rx_mbps),
        tx_mbps: recent.and_then(|r| r.tx_mbps),
        rx_percent: recent.and_then(|r| r.rx_percent),
        tx_percent: recent.and_then(|r| r.tx_percent),
        current_gts: f.link.current_gts,
        current_width: f.link.current_width,
        capable_gts: f.link.capable_gts,
        capable_width: f.link.capable_width,
        link_state,
        aer: since.map(|r| r.aer_delta).unwrap_or_default(),
    }
}

/// A function's rate in `rates`' output, which keeps the later sample's address order.
fn rate_of(list: &[FunctionRate], bdf: Bdf) -> Option<&FunctionRate> {
    let i = list.binary_search_by_key(&bdf, |r| r.bdf).ok()?;
    Some(&list[i])
}

/// Busiest first for rates (a function without a figure after every one with), then address.
fn compare(a: &FunctionRow, b: &FunctionRow, key: SortKey) -> std::cmp::Ordering {
    let by_value = match (a.sort_value(key), b.sort_value(key)) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    };
    by_value.then(a.bdf.cmp(&b.bdf))
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
        assert!(text.contains("disk\\u{1b}[2J (block/sd\\na)"), "{text}");
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
