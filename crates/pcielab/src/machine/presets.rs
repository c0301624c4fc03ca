//! The built-in machine presets: the spec files under `presets/` at the repository root,
//! embedded in the library so `--machine sim:NAME` works from any directory, and the one list
//! of every preset of either kind (`pcielab presets`).

/// One built-in topology preset: what `--machine sim:NAME` opens.
#[derive(Debug, Clone, Copy)]
pub struct TopologyPreset {
    /// The name `sim:NAME` takes.
    pub name: &'static str,
    /// The document (by title and section) or experiment its values come from, for `pcielab presets`.
    pub(crate) source: &'static str,
    /// The spec TOML (format in docs/topology.md).
    pub(crate) spec: &'static str,
}

/// Every topology preset.
pub const PRESETS: [TopologyPreset; 9] = [
    TopologyPreset {
        name: "yitian710",
        source: "the Yitian 710 PCIe PMU guide, §1 and §3 (lspci, root ports, PMU list)",
        spec: include_str!("../../../../presets/yitian710.toml"),
    },
    TopologyPreset {
        name: "rk3588-evb",
        source: "the Rockchip PCIe performance guide, §1-2, §4.3.2 and §8.2.2",
        spec: include_str!("../../../../presets/rk3588-evb.toml"),
    },
    TopologyPreset {
        name: "rk3568-evb",
        source: "the Rockchip PCIe performance guide, §1-2, §4.3.1 and §8.2.1",
        spec: include_str!("../../../../presets/rk3568-evb.toml"),
    },
    TopologyPreset {
        name: "qemu-seed",
        source: "the QEMU P2PDMA lab write-up (its q35 guest and lspci -t)",
        spec: include_str!("../../../../presets/qemu-seed.toml"),
    },
    TopologyPreset {
        name: "qemu-wide",
        source: "QEMU 7.2's q35 devices as booted by `pcielab lab run` (no outside document)",
        spec: include_str!("../../../../presets/qemu-wide.toml"),
    },
    TopologyPreset {
        name: "rk3588-ep",
        source: "the Rockchip PCIe performance guide, §4.2 and §4.3.2 (dmatest table, fitted)",
        spec: include_str!("../../../../presets/rk3588-ep.toml"),
    },
    TopologyPreset {
        name: "rk3588-ep-gen2x1",
        source: "the Rockchip PCIe performance guide, §4.3.3 (dmatest table, fitted)",
        spec: include_str!("../../../../presets/rk3588-ep-gen2x1.toml"),
    },
    TopologyPreset {
        name: "rk3568-ep",
        source: "the Rockchip PCIe performance guide, §4.2 and §4.3.1 (dmatest table, fitted)",
        spec: include_str!("../../../../presets/rk3568-ep.toml"),
    },
    TopologyPreset {
        name: "rk3528-evb",
        source: "the Rockchip PCIe performance guide, §8.2.5 (fio table, fitted)",
        spec: include_str!("../../../../presets/rk3528-evb.toml"),
    },
];

/// The spec text of preset `name`.
pub(crate) fn preset(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|p| p.name == name).map(|p| p.spec)
}

/// Preset names, for messages and `--help`.
pub(crate) fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

/// One line of `pcielab presets`: every `sim:NAME` a command accepts, of either kind.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct PresetSummary {
    /// The name `sim:NAME` takes.
    pub name: &'static str,
    /// `topology` (a PCIe machine: topo, pmu, stat, top, exporter, lab) or `qos` (a resctrl
    /// machine: qos, sim run).
    pub kind: &'static str,
    /// What it models: the preset's own description.
    pub models: String,
    /// The document its numbers come from, by title.
    pub source: &'static str,
}

/// The `pcielab presets --json` document.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct PresetList {
    /// Every preset, simulated PCIe platforms first.
    pub presets: Vec<PresetSummary>,
}

/// Every preset, topology presets first, in registry order. A topology preset's description is
/// read from its spec so the list cannot drift from what `sim:NAME` opens.
pub fn catalog() -> crate::error::Result<Vec<PresetSummary>> {
    let mut all = Vec::new();
    for preset in PRESETS {
        let spec = crate::topology::spec::parse_spec(
            &format!("presets/{}.toml", preset.name),
            preset.spec,
        )?;
        all.push(PresetSummary {
            name: preset.name,
            kind: "topology",
            models: spec.description,
            source: preset.source,
        });
    }
    all.extend(crate::qos::presets::PRESETS.iter().map(|preset| {
        PresetSummary {
            name: preset.name,
            kind: "qos",
            models: preset
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            source: preset.source,
        }
    }));
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::Generation;
    use crate::topology::Kind;

    fn open(name: &str) -> crate::topology::spec::MachineSpec {
        crate::machine::read_spec(name).unwrap()
    }

    #[test]
    fn every_preset_parses() {
        for name in names() {
            let p = open(name);
            assert_eq!(p.name, name);
            assert!(!p.topology.functions().is_empty());
        }
    }

    #[test]
    fn yitian710_holds_the_seeds_root_ports_and_endpoints() {
        let p = open("yitian710");
        let t = &p.topology;
        let ports: Vec<(String, u8)> = t
            .functions()
            .iter()
            .filter(|f| f.kind == Kind::RootPort)
            .map(|f| (f.bdf.to_string(), f.link.unwrap().max_width.unwrap()))
            .collect();
        assert_eq!(ports.len(), 18);
        // The seed's PMU list, pcie_bdf_<bus<<16 | device<<8 | function>, with its widths.
        let seed = [
            0x000000, 0x000100, 0x000200, 0x000300, 0x100000, 0x100100, 0x100200, 0x100300,
            0x300000, 0x300100, 0x300200, 0x300300, 0x800000, 0x800100, 0x800200, 0x800300,
            0x980000, 0xb00000,
        ];
        for (code, (bdf, width)) in seed.iter().zip(&ports) {
            let expect = format!(
                "0000:{:02x}:{:02x}.{:x}",
                code >> 16,
                (code >> 8) & 0xff,
                code & 0xff
            );
            assert_eq!(&expect, bdf);
            assert_eq!(*width, if code >> 16 >= 0x98 { 16 } else { 4 }, "{bdf}");
            let f = t.get(bdf.parse().unwrap()).unwrap();
            assert!(f
                .name
                .as_ref()
                .unwrap()
                .contains(&format!("pcie_bdf_{code:x}")));
            assert_eq!(f.link.unwrap().max_speed, Some(Generation::Gen5));
            assert_eq!((f.vendor, f.device), (0x1ded, 0x8000));
        }
        let sata = t.get("04:00.0".parse().unwrap()).unwrap();
        assert_eq!((sata.vendor, sata.device), (0x1b4b, 0x9235));
        assert_eq!(sata.parent, Some("00:02.0".parse().unwrap()));
        let l = sata.link.unwrap();
        assert_eq!((l.speed, l.width), (Some(Generation::Gen2), Some(2)));
        let vga = t.get("02:00.0".parse().unwrap()).unwrap();
        assert_eq!(vga.parent, Some("01:00.0".parse().unwrap()));
        let cx5: Vec<_> = t.children("b0:00.0".parse().unwrap()).collect();
        assert_eq!(cx5.len(), 2);
        assert!(cx5.iter().all(|f| (f.vendor, f.device) == (0x15b3, 0x1017)));
        for (bdf, device) in [
            ("7c:00.0", 0x8001),
            ("7c:0a.0", 0x8003),
            ("fc:00.0", 0x8001),
            ("fc:0a.0", 0x8003),
        ] {
            let f = t.get(bdf.parse().unwrap()).unwrap();
            assert_eq!((f.kind, f.device), (Kind::RcEndpoint, device), "{bdf}");
        }
        for f in t.functions() {
            let node = if f.bdf.bus < 0x80 { 0 } else { 1 };
            assert_eq!(f.numa_node, Some(node), "{}", f.bdf);
        }
        assert_eq!(t.functions().len(), 28);
    }

    #[test]
    fn qemu_seed_matches_the_seeds_guest() {
        let p = open("qemu-seed");
        let t = &p.topology;
        let rp = t.get("00:04.0".parse().unwrap()).unwrap();
        assert_eq!(rp.buses, Some((1, 4)));
        let up = t.get("01:00.0".parse().unwrap()).unwrap();
        assert_eq!((up.kind, up.buses), (Kind::SwitchUpstream, Some((2, 4))));
        for (nvme, serial) in [
            ("00:03.0", "0000"),
            ("03:00.0", "0001"),
            ("04:00.0", "0002"),
        ] {
            let f = t.get(nvme.parse().unwrap()).unwrap();
            assert_eq!((f.vendor, f.device), (0x1b36, 0x0010));
            assert_eq!(f.params["model"].as_str(), Some("nvme"));
            assert_eq!(f.params["serial"].as_str(), Some(serial));
            assert_eq!(f.params["cmb_size_mb"].as_integer(), Some(2048));
        }
        assert_eq!(
            t.get("00:03.0".parse().unwrap()).unwrap().kind,
            Kind::RcEndpoint
        );
    }
}
