//! Pictures of a machine's PCIe tree from `pcielab topo --json` (`topology::render::TopologyJson`,
//! the type that writes it): the tree as a diagram (one
//! box per function, indented under its parent, each link coloured by the generation it
//! trained to and drawn thicker the more lanes it has, downgraded links and health warnings in
//! red, each path's link-achievable rate beside its box), and the `topo --p2p --json` verdicts
//! (`topology::p2p::Report`) as a coloured provider × client matrix. A tree layout, not a chart: it is drawn with the
//! same plotters primitives as every other plot.

use std::collections::{BTreeMap, HashSet};

use plotters::prelude::*;

use super::{drawing_failed, matrix_svg, svg_document, Area, Cell, Matrix, CHAR_WIDTH, FONT};
use crate::error::{Error, Result};
use crate::pcie::{Bdf, Generation};
use crate::topology::check::DOWNTRAINED;
use crate::topology::p2p::{group_cells, group_run, Cpu, MapType, Report, Verdict};
use crate::topology::render::{FunctionJson, TopologyJson};
use crate::topology::Kind;

const MIN_WIDTH: i32 = 1000;
const INDENT: i32 = 34;
const BOX_WIDTH: i32 = 500;
const ROW: i32 = 52;
const WARNING_ROW: i32 = 20;
const HEADING_ROW: i32 = 34;
/// Where the first row starts below the key, without the description's extra lines.
const TOP: i32 = 118;
const DESCRIPTION_LINE: i32 = 18;
const DOWNGRADE: RGBColor = RGBColor(0xc6, 0x00, 0x00);

/// The colour of links of generation `n` (1-7); grey when unknown.
fn generation_colour(n: Option<u8>) -> RGBColor {
    match n {
        Some(1) => RGBColor(0x99, 0x99, 0x99),
        // Olive, not brown: nothing but a downtrained link may look red.
        Some(2) => RGBColor(0xbc, 0xbd, 0x22),
        Some(3) => RGBColor(0x1f, 0x77, 0xb4),
        Some(4) => RGBColor(0x2c, 0xa0, 0x2c),
        Some(5) => RGBColor(0xff, 0x7f, 0x0e),
        Some(6) => RGBColor(0x94, 0x67, 0xbd),
        Some(7) => RGBColor(0x17, 0xbe, 0xcf),
        _ => RGBColor(0xcc, 0xcc, 0xcc),
    }
}

fn generation_of(gts: Option<f64>) -> Option<u8> {
    gts.and_then(Generation::from_gt_s).map(Generation::number)
}

/// Line thickness for a link of `width` lanes: 1 for x1 up to 6 for x32.
fn stroke_for(width: Option<u8>) -> u32 {
    1 + width
        .filter(|w| *w > 0)
        .map_or(0, |w| f64::from(w).log2() as u32)
}

/// Whether the link above `f` trained below what both its ends can do: what the Warnings list
/// reports (a root port whose device is slower is merely limited by it, as lspci's
/// "(downgraded)" says of it, and is not marked).
fn downtrained(f: &FunctionJson) -> bool {
    f.warnings.iter().any(|w| w.starts_with(DOWNTRAINED))
}

/// A function's link as "Gen3 x4" and, when it trained below its capability, "of Gen5 x4".
fn link_text(f: &FunctionJson) -> Option<String> {
    let link = f.link.as_ref()?;
    let now = match (generation_of(link.speed_gts), link.width) {
        (_, Some(0)) => "link down".to_string(),
        (Some(g), Some(w)) => format!("Gen{g} x{w}"),
        _ => return None,
    };
    let capable = match (generation_of(link.max_speed_gts), link.max_width) {
        (Some(g), Some(w)) => format!("Gen{g} x{w}"),
        _ => String::new(),
    };
    let mut text = if capable.is_empty() || capable == now {
        now
    } else {
        format!("{now} (capable {capable})")
    };
    if downtrained(f) {
        text.push_str(" DOWNTRAINED");
    }
    if let Some(mbps) = f.ceiling_achievable_mbps {
        text.push_str(&format!(", achievable {mbps:.0} MB/s"));
    }
    Some(text)
}

/// What is drawn on one line of the diagram.
enum Row<'a> {
    /// A root bus: its domain:bus and NUMA node.
    Heading(String),
    Function {
        f: &'a FunctionJson,
        depth: i32,
    },
}

fn row_height(row: &Row) -> i32 {
    match row {
        Row::Heading(_) => HEADING_ROW,
        Row::Function { f, .. } => ROW + WARNING_ROW * f.warnings.len() as i32,
    }
}

/// The deepest level drawn under a root bus: a PCIe hierarchy has at most 256 buses.
const MAX_DEPTH: i32 = 256;

/// The rows in tree order: each root bus's heading, then depth-first under it.
fn rows(doc: &TopologyJson) -> Vec<Row<'_>> {
    let mut children: BTreeMap<&str, Vec<&FunctionJson>> = BTreeMap::new();
    let mut roots: BTreeMap<String, Vec<&FunctionJson>> = BTreeMap::new();
    for f in &doc.functions {
        match &f.parent {
            Some(p) => children.entry(p.as_str()).or_default().push(f),
            None => {
                let bus = f.bdf.rsplit_once(':').map_or(f.bdf.as_str(), |(b, _)| b);
                let numa = f
                    .numa_node
                    .map_or(String::new(), |n| format!(", NUMA node {n}"));
                roots
                    .entry(format!("root bus {bus}{numa}"))
                    .or_default()
                    .push(f);
            }
        }
    }
    // A document is input: two functions may share an address (one then lists itself among its
    // children) and a parent chain may be as long as the file. Each function is drawn once, and
    // no deeper than a PCIe hierarchy can be (one bus number per level).
    fn walk<'a>(
        f: &'a FunctionJson,
        depth: i32,
        children: &BTreeMap<&str, Vec<&'a FunctionJson>>,
        drawn: &mut HashSet<*const FunctionJson>,
        out: &mut Vec<Row<'a>>,
    ) {
        if depth > MAX_DEPTH || !drawn.insert(f) {
            return;
        }
        out.push(Row::Function { f, depth });
        for c in children.get(f.bdf.as_str()).into_iter().flatten() {
            walk(c, depth + 1, children, drawn, out);
        }
    }
    let mut out = Vec::new();
    let mut drawn = HashSet::new();
    for (heading, functions) in roots {
        out.push(Row::Heading(heading));
        for f in functions {
            walk(f, 0, &children, &mut drawn, &mut out);
        }
    }
    // A function whose parent is not in the document (a partial export) still gets drawn.
    let orphans: Vec<&FunctionJson> = doc
        .functions
        .iter()
        .filter(|f| !drawn.contains(&(*f as *const FunctionJson)))
        .collect();
    if !orphans.is_empty() {
        out.push(Row::Heading("parent not in this document".into()));
        out.extend(orphans.into_iter().map(|f| Row::Function { f, depth: 0 }));
    }
    out
}

fn text(
    area: &Area,
    s: &str,
    at: (i32, i32),
    size: f64,
    colour: RGBColor,
    bold: bool,
) -> Result<()> {
    let font = (FONT, size).into_font();
    let font = if bold {
        font.style(FontStyle::Bold)
    } else {
        font
    };
    area.draw(&Text::new(s.to_string(), at, font.color(&colour)))
        .map_err(drawing_failed)
}

/// `s` cut to `chars` characters with an ellipsis.
fn fit(s: &str, chars: usize) -> String {
    if s.chars().count() <= chars {
        s.to_string()
    } else {
        let mut cut: String = s.chars().take(chars.saturating_sub(1)).collect();
        cut.push('\u{2026}');
        cut
    }
}

/// `text` in lines of at most `chars` characters, broken between words.
fn wrap(text: &str, chars: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= chars => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// The tree diagram as a standalone SVG document.
pub(crate) fn svg(doc: &TopologyJson) -> Result<String> {
    let rows = rows(doc);
    let description = wrap(&doc.description, 140);
    let top = TOP + DESCRIPTION_LINE * (description.len() as i32 - 1).max(0);
    let height = top + rows.iter().map(row_height).sum::<i32>() + 20;
    let generations: Vec<u8> = {
        let mut g: Vec<u8> = doc
            .functions
            .iter()
            .filter_map(|f| f.link.as_ref().and_then(|l| generation_of(l.speed_gts)))
            .collect();
        g.sort_unstable();
        g.dedup();
        g
    };
    // Wide enough for the longest link text beside the deepest box.
    let width = rows
        .iter()
        .filter_map(|r| match r {
            Row::Function { f, depth } => {
                let chars = link_text(f).map_or(0, |t| t.chars().count()) as f64;
                Some(30 + depth * INDENT + BOX_WIDTH + 12 + (chars * CHAR_WIDTH * 1.05) as i32 + 20)
            }
            Row::Heading(_) => None,
        })
        .max()
        .unwrap_or(0)
        .max(MIN_WIDTH);
    svg_document(width as u32, height as u32, |area| {
        text(
            area,
            &format!("PCIe topology: {}", doc.name),
            (20, 10),
            20.0,
            BLACK,
            true,
        )?;
        for (i, line) in description.iter().enumerate() {
            let y = 38 + DESCRIPTION_LINE * i as i32;
            text(area, line, (20, y), 14.0, BLACK, false)?;
        }
        // Key: generation colours, thickness, downgrades, warnings.
        let mut x = 20;
        let y = top - 42;
        text(area, "link trained to:", (x, y - 8), 14.0, BLACK, false)?;
        x += 120;
        for g in &generations {
            let colour = generation_colour(Some(*g));
            area.draw(&PathElement::new(
                vec![(x, y), (x + 30, y)],
                colour.stroke_width(4),
            ))
            .map_err(drawing_failed)?;
            text(
                area,
                &format!("Gen{g}"),
                (x + 36, y - 8),
                14.0,
                BLACK,
                false,
            )?;
            x += 90;
        }
        text(
            area,
            "thicker = more lanes (x1 thin ... x16 thick)",
            (x + 10, y - 8),
            14.0,
            BLACK,
            false,
        )?;
        text(
            area,
            "red box and DOWNTRAINED: link trained below what both ends can do;  \u{26a0} red lines: warnings",
            (20, y + 14),
            14.0,
            DOWNGRADE,
            false,
        )?;

        // Where each drawn function's box is, for the connectors of its children.
        let mut boxes: BTreeMap<&str, (i32, i32)> = BTreeMap::new();
        let mut y = top;
        for row in &rows {
            match row {
                Row::Heading(heading) => {
                    text(
                        area,
                        heading,
                        (20, y + 10),
                        15.0,
                        RGBColor(0x33, 0x33, 0x33),
                        true,
                    )?;
                }
                Row::Function { f, depth } => {
                    let x = 30 + depth * INDENT;
                    let (top, bottom) = (y + 4, y + ROW - 6);
                    let generation = f.link.as_ref().and_then(|l| generation_of(l.speed_gts));
                    let colour = generation_colour(generation);
                    if let Some((px, pbottom)) = f.parent.as_deref().and_then(|p| boxes.get(p)) {
                        let mid = (top + bottom) / 2;
                        let width = f.link.as_ref().and_then(|l| l.width);
                        area.draw(&PathElement::new(
                            vec![(px + 14, *pbottom), (px + 14, mid), (x, mid)],
                            colour.stroke_width(stroke_for(width)),
                        ))
                        .map_err(drawing_failed)?;
                    }
                    let downgraded = downtrained(f);
                    let fill = if matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint) {
                        RGBColor(0xf4, 0xf8, 0xfc)
                    } else {
                        RGBColor(0xf6, 0xf6, 0xf0)
                    };
                    area.draw(&Rectangle::new(
                        [(x, top), (x + BOX_WIDTH, bottom)],
                        fill.filled(),
                    ))
                    .map_err(drawing_failed)?;
                    let border = if downgraded {
                        DOWNGRADE.stroke_width(3)
                    } else {
                        colour.stroke_width(2)
                    };
                    area.draw(&Rectangle::new([(x, top), (x + BOX_WIDTH, bottom)], border))
                        .map_err(drawing_failed)?;
                    let id = format!(
                        "{}  {}  [{}:{}]",
                        f.bdf,
                        f.kind.name(),
                        f.vendor.trim_start_matches("0x"),
                        f.device.trim_start_matches("0x")
                    );
                    text(area, &id, (x + 8, top + 4), 14.0, BLACK, true)?;
                    let mut second = f.name.clone().unwrap_or_default();
                    if let Some(driver) = &f.driver {
                        second.push_str(&format!(" (driver {driver})"));
                    }
                    let chars = ((BOX_WIDTH - 16) as f64 / (CHAR_WIDTH * 0.85)) as usize;
                    text(
                        area,
                        &fit(&second, chars),
                        (x + 8, top + 23),
                        13.0,
                        BLACK,
                        false,
                    )?;
                    if let Some(link) = link_text(f) {
                        let c = if downgraded {
                            DOWNGRADE
                        } else {
                            darker(colour)
                        };
                        text(
                            area,
                            &link,
                            (x + BOX_WIDTH + 12, top + 12),
                            14.0,
                            c,
                            downgraded,
                        )?;
                    }
                    for (i, w) in f.warnings.iter().enumerate() {
                        text(
                            area,
                            &format!("\u{26a0} {}", fit(w, 130)),
                            (x + 8, bottom + 4 + WARNING_ROW * i as i32),
                            13.0,
                            DOWNGRADE,
                            false,
                        )?;
                    }
                    boxes.insert(f.bdf.as_str(), (x, bottom));
                }
            }
            y += row_height(row);
        }
        Ok(())
    })
}

/// Text in a link's colour, darkened so light generation colours stay readable on white.
fn darker(c: RGBColor) -> RGBColor {
    RGBColor(
        (f64::from(c.0) * 0.7) as u8,
        (f64::from(c.1) * 0.7) as u8,
        (f64::from(c.2) * 0.7) as u8,
    )
}

/// The P2P verdict classes in legend order.
const VERDICTS: [(MapType, &str, RGBColor); 4] = [
    (
        MapType::BusAddress,
        "B: bus address (through a common switch)",
        RGBColor(0x2c, 0xa0, 0x2c),
    ),
    (
        MapType::ThroughHostBridge,
        "H: through the host bridge",
        RGBColor(0x1f, 0x77, 0xb4),
    ),
    (
        MapType::NotSupported,
        "x: not supported (EREMOTEIO)",
        RGBColor(0xd6, 0x27, 0x28),
    ),
    (
        MapType::Unknown,
        "?: unknown (facts not readable)",
        RGBColor(0x99, 0x99, 0x99),
    ),
];

/// The verdict matrix: providers down, clients across (groups of endpoints, the root ports they
/// lie below when there are more groups than `MAX_MATRIX_ROWS`, or with `--full` endpoints),
/// each cell the distance and verdict; bad input past `MAX_MATRIX_ROWS` rows even so.
pub(crate) fn p2p_matrix(doc: &Report) -> Result<Matrix> {
    let (labels, by_top, verdicts) = verdict_grid(doc, MAX_MATRIX_ROWS)?;
    let mut cells: Vec<Vec<Option<Cell>>> = vec![vec![None; labels.len()]; labels.len()];
    for ((p, c), cell) in verdicts {
        cells[p][c] = Some(match cell {
            GridCell::One(pair) => {
                let class = VERDICTS
                    .iter()
                    .position(|v| v.0 == pair.map)
                    .expect("VERDICTS lists every map type");
                let mark = VERDICTS[class].1.split(':').next().unwrap_or("?");
                Cell {
                    text: format!("{} {mark}", pair.distance),
                    class,
                }
            }
            GridCell::Mixed => Cell {
                text: "mixed".into(),
                class: VERDICTS.len(),
            },
        });
    }
    let cpu = match doc.cpu {
        Cpu::Intel { family } => format!(", CPU intel:{family}"),
        Cpu::Amd { family } => format!(", CPU amd:{family}"),
        Cpu::Other => String::new(),
    };
    let between = if by_top {
        "endpoints below each root port"
    } else if doc.pairs.is_empty() && !doc.groups.is_empty() {
        "groups of endpoints"
    } else {
        "endpoints"
    };
    let mut classes: Vec<(String, RGBColor)> = VERDICTS
        .iter()
        .map(|(_, name, c)| (name.to_string(), *c))
        .collect();
    if by_top {
        classes.push((
            "mixed: pairs below these root ports differ (text or JSON lists them)".into(),
            RGBColor(0xc5, 0xb0, 0xd5),
        ));
    }
    Ok(Matrix {
        title: format!("P2PDMA verdicts between {between} (distance and mapping{cpu})"),
        row_heading: "provider".into(),
        column_heading: "client".into(),
        rows: labels.clone(),
        columns: labels,
        cells,
        classes,
    })
}

/// The most rows (groups, or endpoints with `--full`) the verdict matrix is drawn with: 65,536
/// cells, a picture still readable when zoomed.
pub(crate) const MAX_MATRIX_ROWS: usize = 256;

/// The verdict matrix as a standalone SVG document.
pub(crate) fn p2p_svg(doc: &Report) -> Result<String> {
    matrix_svg(&p2p_matrix(doc)?)
}

/// What one cell of a verdict matrix shows: a verdict, or (drawn by root port) that the pairs
/// it gathers get different ones.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GridCell<'a> {
    One(&'a Verdict),
    Mixed,
}

/// Row/column labels of a verdict matrix, whether its rows are root ports gathering groups,
/// and each (provider, client) index pair's cell.
pub(crate) type VerdictGrid<'a> = (Vec<String>, bool, Vec<((usize, usize), GridCell<'a>)>);

/// What a picture of `doc` shows: the endpoint pairs when it has them (`--full`), else the
/// groups, or past `max_rows` groups the root ports they lie below (each cell the verdict all
/// pairs between two root ports share, or mixed). Bad input when even that has more than
/// `max_rows` rows, or the group verdicts list more cells than any host pcielab draws.
pub(crate) fn verdict_grid(doc: &Report, max_rows: usize) -> Result<VerdictGrid<'_>> {
    let too_many = |rows: usize, what: &str| {
        Error::bad_input(format!(
            "the P2P verdict matrix would have {rows} rows ({what}), more than the {max_rows} it is drawn with; \
             draw the groups (without --full) or read the verdicts as text or JSON"
        ))
    };
    let too_many_cells = || {
        Error::bad_input(format!(
            "the {} group verdicts name more (provider, client) cells than any host pcielab draws; \
             expected the output of pcielab topo --p2p --json",
            doc.group_verdicts.len()
        ))
    };
    if !doc.pairs.is_empty() || doc.groups.is_empty() {
        let mut bdfs: Vec<Bdf> = doc
            .pairs
            .iter()
            .flat_map(|p| [p.provider, p.client])
            .collect();
        bdfs.sort_unstable();
        bdfs.dedup();
        if bdfs.len() > max_rows {
            return Err(too_many(bdfs.len(), "endpoints"));
        }
        let at = |bdf: Bdf| bdfs.binary_search(&bdf).ok();
        let cells = doc
            .pairs
            .iter()
            .filter_map(|p| Some(((at(p.provider)?, at(p.client)?), GridCell::One(p))))
            .collect();
        let labels = bdfs.iter().map(Bdf::to_string).collect();
        return Ok((labels, false, cells));
    }
    let n = doc.groups.len();
    if n > max_rows {
        return grid_by_top(doc, max_rows, too_many, too_many_cells);
    }
    let members: Vec<usize> = doc.groups.iter().map(|g| g.functions.len()).collect();
    let grid = group_cells(
        &members,
        doc.group_verdicts
            .iter()
            .map(|gv| (&gv.provider_groups[..], &gv.client_groups[..], &gv.verdict)),
    )
    .ok_or_else(too_many_cells)?;
    let cells = grid
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| ((i / n, i % n), GridCell::One(v))))
        .collect();
    let labels = doc
        .groups
        .iter()
        .map(|g| match g.functions.as_slice() {
            [one] => format!("{} {one}", g.group),
            [first, ..] => format!("{} {first} +{}", g.group, g.functions.len() - 1),
            [] => g.group.clone(),
        })
        .collect();
    Ok((labels, false, cells))
}

/// [`verdict_grid`] by root port: every group verdict adds its verdict to the cells its pairs
/// fall in (those meeting below a bridge to their root port's own cell; those meeting only at
/// the root complex to each pair of different root ports, and to an integrated group's own
/// cell when it has several functions).
fn grid_by_top(
    doc: &Report,
    max_rows: usize,
    too_many: impl Fn(usize, &str) -> Error,
    too_many_cells: impl Fn() -> Error,
) -> Result<VerdictGrid<'_>> {
    let n = doc.groups.len();
    let mut tops: Vec<Bdf> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut block = Vec::with_capacity(n);
    for g in &doc.groups {
        let top = g.top.ok_or_else(|| too_many(n, "groups"))?;
        let next = tops.len();
        let at = *index.entry(top).or_insert(next);
        if at == next {
            tops.push(top);
        }
        block.push(at);
    }
    let b = tops.len();
    if b > max_rows {
        return Err(too_many(b, "root ports"));
    }
    let mut cells: Vec<Option<GridCell<'_>>> = vec![None; b * b];
    fn add<'a>(cell: &mut Option<GridCell<'a>>, v: &'a Verdict) {
        *cell = match *cell {
            None => Some(GridCell::One(v)),
            Some(GridCell::One(w)) if (w.distance, w.map) == (v.distance, v.map) => {
                Some(GridCell::One(w))
            }
            Some(_) => Some(GridCell::Mixed),
        }
    }
    // Several functions integrated in the root complex share one group and one top, yet meet
    // only there.
    let integrated_pairs: Vec<bool> = doc
        .groups
        .iter()
        .map(|g| g.port.is_none() && g.functions.len() > 1)
        .collect();
    let mut visits = 0usize;
    for gv in &doc.group_verdicts {
        let blocks = |names: &[String]| {
            let mut out: Vec<(usize, bool)> = names
                .iter()
                .filter_map(|r| group_run(r))
                .filter(|&(first, _)| first < n)
                .flat_map(|(first, last)| first..=last.min(n - 1))
                .map(|g| (block[g], integrated_pairs[g]))
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        };
        let (providers, clients) = (blocks(&gv.provider_groups), blocks(&gv.client_groups));
        visits += providers.len() * clients.len() + gv.provider_groups.len();
        if visits > 1 << 24 {
            return Err(too_many_cells());
        }
        let v = &gv.verdict;
        if gv.meeting.is_some() {
            if let Some(&(p, _)) = providers.first() {
                add(&mut cells[p * b + p], v);
            }
            continue;
        }
        for &(p, p_integrated) in &providers {
            for &(c, c_integrated) in &clients {
                if p != c || (p_integrated && c_integrated) {
                    add(&mut cells[p * b + c], v);
                }
            }
        }
    }
    let mut per_top = vec![0usize; b];
    for &at in &block {
        per_top[at] += 1;
    }
    let labels = tops
        .iter()
        .zip(&per_top)
        .map(|(top, count)| format!("{top} ({count} groups)"))
        .collect();
    let cells = cells
        .into_iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|c| ((i / b, i % b), c)))
        .collect();
    Ok((labels, true, cells))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More groups than a matrix is drawn with: 5 root ports, each above a 64-port switch with an
    /// endpoint per port (one port with ACS redirect), and three integrated endpoints (one group
    /// of three tops' worth). Drawn by root port, each cell must say what every pair between
    /// those root ports gets, by the pairwise rule, or "mixed" where they differ.
    #[test]
    fn a_host_with_more_groups_than_rows_is_drawn_by_root_port_as_every_pair_says() {
        use crate::topology::p2p::matrix;
        use crate::topology::{Acs, Function, Topology};
        let function = |bdf: Bdf, kind, parent: Option<Bdf>| {
            let mut f = Function::new(bdf, 0x8086, 0x1234, 0, kind);
            f.parent = parent;
            f
        };
        let mut functions = vec![function(Bdf::new(0, 0, 0, 0), Kind::HostBridge, None)];
        for i in 0..3 {
            functions.push(function(Bdf::new(0, 0, 0x1f, i), Kind::RcEndpoint, None));
        }
        for s in 0..5u8 {
            let rp = Bdf::new(0, 0, s + 1, 0);
            let up = Bdf::new(0, 1 + s * 40, 0, 0);
            functions.push(function(rp, Kind::RootPort, None));
            functions.push(function(up, Kind::SwitchUpstream, Some(rp)));
            for port in 0..64u8 {
                let down = Bdf::new(0, 2 + s * 40, port / 8, port % 8);
                let mut d = function(down, Kind::SwitchDownstream, Some(up));
                if s == 2 && port == 5 {
                    d.acs = Some(Acs {
                        capability: 0x7f,
                        control: 0x0004,
                    });
                }
                functions.push(d);
                let ep = Bdf::new(0, 3 + s * 40 + port / 2, (port % 2) * 4, 0);
                functions.push(function(ep, Kind::Endpoint, Some(down)));
            }
        }
        let topology = Topology::new(functions);
        let cpu = Cpu::Intel { family: 6 };
        let report = Report::new(&topology, cpu, false).unwrap();
        assert!(report.groups.len() > MAX_MATRIX_ROWS);
        // Drawn as read back from its JSON, as `pcielab plot` draws it.
        let doc: Report = serde_json::from_value(serde_json::to_value(&report).unwrap()).unwrap();
        assert_eq!(doc.groups, report.groups);
        assert_eq!(doc.group_verdicts, report.group_verdicts);
        let drawn = p2p_matrix(&doc).unwrap();
        assert!(
            drawn.title.contains("below each root port"),
            "{}",
            drawn.title
        );
        // Rows: the three integrated endpoints' group (one top) and the five root ports.
        assert_eq!(drawn.rows.len(), 6, "{:?}", drawn.rows);
        let top_of = |bdf: Bdf| {
            let top = report
                .groups
                .iter()
                .find(|g| g.functions.contains(&bdf))
                .unwrap()
                .top
                .unwrap()
                .to_string();
            drawn.rows.iter().position(|r| r.starts_with(&top)).unwrap()
        };
        let mut expected: std::collections::HashMap<(usize, usize), Vec<(u32, MapType)>> =
            std::collections::HashMap::new();
        for pair in matrix(&topology, cpu).unwrap() {
            let text = (pair.distance, pair.map);
            let seen = expected
                .entry((top_of(pair.provider), top_of(pair.client)))
                .or_default();
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        let mut mixed = 0;
        for (p, row) in drawn.cells.iter().enumerate() {
            for (c, cell) in row.iter().enumerate() {
                let want = expected.get(&(p, c));
                match (cell, want) {
                    (None, None) => {}
                    (Some(cell), Some(want)) if want.len() > 1 => {
                        assert_eq!(cell.text, "mixed", "{p},{c}: {want:?}");
                        mixed += 1;
                    }
                    (Some(cell), Some(want)) => {
                        let (distance, map) = want[0];
                        let mark = VERDICTS.iter().find(|v| v.0 == map).unwrap().1;
                        assert_eq!(cell.text, format!("{distance} {}", &mark[..1]), "{p},{c}");
                    }
                    _ => panic!("{p},{c}: drawn {cell:?}, pairs {want:?}"),
                }
            }
        }
        // Only the switch with ACS redirect on one port mixes bus addresses with refusals.
        assert_eq!(mixed, 1);

        // A document from before groups named their root port still reads, but cannot be
        // gathered by root port: too many groups, said as such.
        let mut old = serde_json::to_value(&report).unwrap();
        for g in old["groups"].as_array_mut().unwrap() {
            g.as_object_mut().unwrap().remove("top");
        }
        let old: Report = serde_json::from_value(old).unwrap();
        assert!(old.groups.iter().all(|g| g.top.is_none()));
        let e = p2p_matrix(&old).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message().starts_with(&format!(
                "the P2P verdict matrix would have {} rows (groups), more than the 256",
                report.groups.len()
            )),
            "{e}"
        );
    }

    #[test]
    fn descriptions_wrap_between_words() {
        assert_eq!(wrap("a bb ccc dddd", 6), ["a bb", "ccc", "dddd"]);
        assert_eq!(wrap("", 10), Vec::<String>::new());
        assert_eq!(wrap("one", 10), ["one"]);
    }

    #[test]
    fn links_read_as_generation_and_width() {
        // A document from before most fields were written: what the picture needs reads.
        let f: FunctionJson = serde_json::from_value(serde_json::json!({
            "bdf": "0000:01:00.0", "vendor": "0x144d", "device": "0xa80a", "kind": "endpoint",
            "name": null, "parent": "0000:00:00.0", "numa_node": null, "driver": null,
            "link": {"max_speed_gts": 16.0, "max_width": 4, "speed_gts": 8.0, "width": 4, "downgraded": true},
            "ceiling_achievable_MBps": 3643.35
        }))
        .unwrap();
        // lspci's "(downgraded)" alone: the partner may be the slower end; not marked.
        assert_eq!(
            link_text(&f).unwrap(),
            "Gen3 x4 (capable Gen4 x4), achievable 3643 MB/s"
        );
        let mut warned = f.clone();
        warned.warnings = vec![format!(
            "{DOWNTRAINED} 0000:00:00.0 -> 0000:01:00.0: running …"
        )];
        assert_eq!(
            link_text(&warned).unwrap(),
            "Gen3 x4 (capable Gen4 x4) DOWNTRAINED, achievable 3643 MB/s"
        );
        assert_eq!(stroke_for(Some(1)), 1);
        assert_eq!(stroke_for(Some(16)), 5);
        assert_eq!(stroke_for(Some(0)), 1);
    }
}
