//! The platform model as a spec's `[platform]` table: read from TOML text (every key checked,
//! bad input naming the file, key and valid range) and written back as TOML. Text in, text
//! out: the file itself is read by `machine::read_platform_file`.

use super::costs::{FittedCell, PlatformModel};
use super::params::PARAMS;
use crate::error::{Error, Result};

impl PlatformModel {
    /// Reads the `[platform]` table of a spec (or a fragment holding only it). Every key is
    /// checked: unknown keys, non-numbers and values outside a parameter's range are bad input
    /// naming `file`, the key and the valid range.
    pub(crate) fn from_table(file: &str, table: &toml::Table) -> Result<PlatformModel> {
        let mut model = PlatformModel {
            given: !table.is_empty(),
            ..PlatformModel::default()
        };
        let sections: Vec<&str> = {
            let mut s: Vec<&str> = PARAMS
                .iter()
                .map(|p| p.key.split('.').next().unwrap_or_default())
                .collect();
            s.dedup();
            s
        };
        for (section, value) in table {
            if section == "fitted" {
                let keys = value.as_array().ok_or_else(|| {
                    Error::bad_input(format!("{file}: [platform] fitted must be a list of keys"))
                })?;
                for entry in keys {
                    let key = entry
                        .as_str()
                        .filter(|k| PARAMS.iter().any(|p| p.key == *k));
                    let key = key.ok_or_else(|| {
                        Error::bad_input(format!(
                            "{file}: [platform] fitted lists {entry}, which is not a parameter key"
                        ))
                    })?;
                    model.fitted.push(key.to_string());
                }
                continue;
            }
            if section == "uncertainty" {
                let bad = || {
                    Error::bad_input(format!(
                        "{file}: [platform] uncertainty must map parameter keys to numbers ≥ 0, \
                         e.g. {{ \"dma.setup_ns\" = 136.0 }}"
                    ))
                };
                for (key, sigma) in value.as_table().ok_or_else(bad)? {
                    let sigma = match sigma {
                        toml::Value::Float(f) => *f,
                        toml::Value::Integer(n) => *n as f64,
                        _ => return Err(bad()),
                    };
                    if !PARAMS.iter().any(|p| p.key == key) || sigma.is_nan() || sigma < 0.0 {
                        return Err(bad());
                    }
                    model.uncertainty.push((key.clone(), sigma));
                }
                continue;
            }
            if section == "fitted_cells" {
                let cells = value.as_array().ok_or_else(|| {
                    Error::bad_input(format!(
                        "{file}: [platform] fitted_cells must be a list like [\"write 64 B Gen3 x4\"]"
                    ))
                })?;
                for entry in cells {
                    let cell = entry.as_str().and_then(FittedCell::parse).ok_or_else(|| {
                        Error::bad_input(format!(
                            "{file}: [platform] fitted_cells lists {entry}: expected \
                             \"write|read SIZE B GenG xW\", e.g. \"write 64 B Gen3 x4\""
                        ))
                    })?;
                    model.fitted_cells.push(cell);
                }
                continue;
            }
            if section == "fitted_on" {
                model.fitted_on = value
                    .as_str()
                    .ok_or_else(|| {
                        Error::bad_input(format!("{file}: [platform] fitted_on must be a string"))
                    })?
                    .to_string();
                continue;
            }
            let Some(keys) = value
                .as_table()
                .filter(|_| sections.contains(&section.as_str()))
            else {
                return Err(Error::bad_input(format!(
                    "{file}: [platform] has no section '{section}': valid are fitted_on, fitted, fitted_cells, uncertainty and {}",
                    sections.join(", ")
                )));
            };
            for (key, value) in keys {
                let full = format!("{section}.{key}");
                let Some(i) = PARAMS.iter().position(|p| p.key == full) else {
                    let valid: Vec<&str> = PARAMS
                        .iter()
                        .filter_map(|p| p.key.strip_prefix(&format!("{section}.")))
                        .collect();
                    return Err(Error::bad_input(format!(
                        "{file}: [platform.{section}] has no key '{key}': valid are {}",
                        valid.join(", ")
                    )));
                };
                let spec = &PARAMS[i];
                let number = match value {
                    toml::Value::Float(f) => *f,
                    toml::Value::Integer(n) => *n as f64,
                    other => {
                        return Err(Error::bad_input(format!(
                            "{file}: [platform] {full} = {other} is not a number ({})",
                            spec.unit
                        )))
                    }
                };
                if number.is_nan()
                    || number < spec.min
                    || number > spec.max
                    || (spec.integer && number.fract() != 0.0)
                {
                    return Err(Error::bad_input(format!(
                        "{file}: [platform] {full} = {number} is out of range: expected {} from {} to {} {}",
                        if spec.integer { "a whole number" } else { "a number" },
                        spec.min,
                        spec.max,
                        spec.unit
                    )));
                }
                model.values[i] = number;
            }
        }
        Ok(model)
    }

    /// The `[platform]` table as TOML text: every parameter, with its unit and meaning as a
    /// comment. Unbounded rates are written as `inf` (TOML's infinity).
    pub fn to_toml(&self) -> String {
        let mut text = String::from("[platform]\n");
        text.push_str(&format!("fitted_on = {:?}\n", self.fitted_on));
        text.push_str(&format!("fitted = {:?}\n", self.fitted));
        let cells: Vec<String> = self.fitted_cells.iter().map(FittedCell::text).collect();
        text.push_str(&format!("fitted_cells = {cells:?}\n"));
        let sigmas: Vec<String> = self
            .uncertainty
            .iter()
            .map(|(key, sigma)| format!("{key:?} = {sigma}"))
            .collect();
        text.push_str(&format!("uncertainty = {{ {} }}\n", sigmas.join(", ")));
        let mut section = "";
        for (spec, value) in PARAMS.iter().zip(self.values) {
            let (sec, key) = spec.key.split_once('.').unwrap_or(("", spec.key));
            if sec != section {
                text.push_str(&format!("\n[platform.{sec}]\n"));
                section = sec;
            }
            let shown = if value.is_infinite() {
                "inf".to_string()
            } else if spec.integer {
                format!("{}", value.round() as i64)
            } else {
                format!("{}", crate::text::round_to(value, 4))
            };
            text.push_str(&format!(
                "{key} = {shown}  # {}: {}\n",
                spec.unit, spec.meaning
            ));
        }
        text
    }
}
/// `[sim]` keys that now live in `[platform]`, with where: a spec still setting one would be
/// simulated with the platform's defaults, so every reader of a spec refuses it by name.
pub(crate) const MOVED_SIM_KEYS: [(&str, &str); 2] = [
    (
        "rc_read_latency_ns",
        "[platform.root_complex] read_latency_ns",
    ),
    ("cpu_io_ns", "[platform.cpu] read_io_ns and write_io_ns"),
];

/// Reads `[platform]` from a TOML file's text: a whole spec or a fragment with only that table.
/// A file without `[platform]` is bad input (it would silently predict with defaults), and so
/// is a `[sim]` table still setting a key that moved to `[platform]`, as when the spec is opened
/// as a machine.
pub fn parse_platform(file: &str, text: &str) -> Result<PlatformModel> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        Error::bad_input(format!(
            "{file}: not valid TOML: {}",
            e.message().trim_end()
        ))
    })?;
    if let Some(sim) = table.get("sim").and_then(|v| v.as_table()) {
        if let Some((old, new)) = MOVED_SIM_KEYS
            .iter()
            .find(|(old, _)| sim.contains_key(*old))
        {
            return Err(Error::bad_input(format!(
                "{file}: [sim]: '{old}' moved to the platform model: set {new} (docs/calibration.md)"
            )));
        }
    }
    let platform = table
        .get("platform")
        .and_then(|v| v.as_table())
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{file}: no [platform] table: write one with `pcielab fit … --out {file}` \
             (keys in docs/calibration.md)"
            ))
        })?;
    PlatformModel::from_table(file, platform)
}
