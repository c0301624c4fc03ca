//! One function's row: its rates, % of link, link state and AER increments as figures, and
//! the table's columns.

use crate::observe::Source;
use crate::pcie::Bdf;
use crate::text::push_printable;
use crate::topology::health::AerCounts;
use crate::topology::Kind;
use serde::Serialize;
use std::fmt::Write as _;

/// The state of a function's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkState {
    /// Trained at what both ends can do.
    Ok,
    /// Trained slower or narrower than capable.
    Downgraded,
    /// The link is down.
    Down,
    /// The function reports no link (an integrated endpoint, a host bridge).
    None,
}

impl LinkState {
    pub(crate) fn name(self) -> &'static str {
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
    /// The function.
    pub bdf: Bdf,
    /// Indentation level in tree mode (0 in flat mode).
    pub(crate) depth: usize,
    pub(crate) kind: Kind,
    pub(crate) name: Option<String>,
    pub(crate) devices: Vec<String>,
    pub(crate) source: Option<Source>,
    pub(crate) rx_mbps: Option<f64>,
    pub(crate) tx_mbps: Option<f64>,
    pub(crate) rx_percent: Option<f64>,
    pub(crate) tx_percent: Option<f64>,
    pub(crate) current_gts: Option<f64>,
    pub(crate) current_width: Option<u32>,
    pub(crate) capable_gts: Option<f64>,
    pub(crate) capable_width: Option<u32>,
    pub(crate) link_state: LinkState,
    /// AER increments since the first sample (`None`: the function has no such counter).
    pub(crate) aer: AerCounts,
}

impl FunctionRow {
    /// The busier direction's % of the link-achievable rate.
    pub(crate) fn link_percent(&self) -> Option<f64> {
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
    pub(super) fn write_cells(&self, out: &mut String, ends: &mut [usize; 11]) {
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

pub(super) fn short_kind(kind: Kind) -> &'static str {
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

/// The busier direction's %, or the one there is.
pub(super) fn link_percent(rx: Option<f64>, tx: Option<f64>) -> Option<f64> {
    match (rx, tx) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}
