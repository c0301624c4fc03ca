//! The built-in platform presets: the spec files under `presets/` at the repository root,
//! embedded in the library so `--machine sim:NAME` works from any directory.

/// Every preset: name and spec text.
pub const PRESETS: [(&str, &str); 5] = [
    (
        "yitian710",
        include_str!("../../../../presets/yitian710.toml"),
    ),
    (
        "rk3588-evb",
        include_str!("../../../../presets/rk3588-evb.toml"),
    ),
    (
        "rk3568-evb",
        include_str!("../../../../presets/rk3568-evb.toml"),
    ),
    (
        "qemu-seed",
        include_str!("../../../../presets/qemu-seed.toml"),
    ),
    (
        "qemu-wide",
        include_str!("../../../../presets/qemu-wide.toml"),
    ),
];

/// The spec text of preset `name`.
pub fn preset(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Preset names, for messages and `--help`.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}
