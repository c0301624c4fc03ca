//! Why a fact is missing, said in one place for every check of `advise`: what the machine's
//! input lacks and how to get it ([`super::Machine::input`]). A check asks here only once it
//! found the fact `None` on a [`Function`] (or absent from the machine's files); the reason
//! depends on the access method the facts came through (a live host, a snapshot, lspci output,
//! a spec) and on the function itself (no PCI Express capability at all, or a capability list
//! the reader could not reach). Callers ask for a reason, never for the kind of input.

use crate::topology::Function;

/// Where a machine's facts were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// The live host's sysfs.
    Host,
    /// A saved sysfs tree; `whole_root` when it holds `/proc` and the rest of `/sys` too.
    Snapshot { whole_root: bool },
    /// Someone's lspci output; `drivers_listed` when it has `Kernel driver in use:` lines.
    Lspci { drivers_listed: bool },
    /// A spec (`sim:`).
    Spec,
}

impl Input {
    /// Why whether `f` has a driver bound (is busy) is unknown; `None` when it is known.
    pub(crate) fn driver(&self) -> Option<String> {
        match self {
            Input::Lspci {
                drivers_listed: false,
            } => Some(
                "this lspci output has no `Kernel driver in use:` lines, so whether a driver is \
                 bound (the device busy) is unknown: capture with `lspci -vvv -k`"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Why `f`'s PCI Express registers (DevCap/DevCtl, LnkCap/LnkCtl/LnkSta) are unknown.
    pub(crate) fn express(&self, f: &Function) -> String {
        let unknown = |fact: &str| f.evidence.is_unknown(fact);
        match self {
            // An unprivileged read of sysfs `config` stops at 64 bytes, before the capability
            // list; a full read that finds no PCI Express capability leaves ACS known absent.
            Input::Host if f.acs_unreadable => {
                "config space past 64 bytes needs root: run pcielab as root".into()
            }
            Input::Snapshot { .. } if f.acs_unreadable => {
                "this snapshot's config file stops at 64 bytes (saved without root): save it as root"
                    .into()
            }
            Input::Lspci { .. } if unknown("capabilities") => {
                "this lspci output does not show its capabilities (`<access denied>` without root, \
                 or a hex dump shorter than 256 bytes): capture as root with `lspci -vvv` or `lspci -xxxx`"
                    .into()
            }
            Input::Lspci { .. } if unknown("mps") || unknown("link") => {
                "this lspci output names the PCI Express capability without its DevCtl/LnkCap/LnkSta \
                 lines: capture with `lspci -vvv`"
                    .into()
            }
            Input::Spec if f.link.is_some() => {
                "the spec does not give it (mps, mrrs and link in its [[function]] table)".into()
            }
            _ => NO_EXPRESS.into(),
        }
    }

    /// Why `f`'s DevCap/DevCtl feature bits (Extended Tag, Relaxed Ordering, 10-bit tags) are
    /// unknown.
    pub(crate) fn features(&self, f: &Function) -> String {
        match self {
            _ if f.mps.is_none() => self.express(f),
            Input::Lspci { .. } => "this lspci output does not print its DevCap/DevCtl flag lines \
                 (ExtTag, RlxdOrd; 10-bit tag flags need lspci 3.7 or later): capture as root \
                 with `lspci -vvv` or `lspci -xxxx`"
                .into(),
            Input::Spec => {
                "a spec does not describe DevCap/DevCtl feature bits (ExtTag, RlxdOrd, 10BitTag)"
                    .into()
            }
            // Read from `config` and still missing: the capability is shorter than its version
            // needs, which the decoder refuses rather than guesses.
            Input::Host | Input::Snapshot { .. } => {
                "its config file's PCI Express capability could not be decoded".into()
            }
        }
    }

    /// Why `f`'s ACS capability (in the extended configuration space) is unknown.
    pub(crate) fn acs(&self, f: &Function) -> String {
        match self {
            _ if f.mps.is_none() => self.express(f),
            Input::Lspci { .. } => "this lspci output does not list the extended capabilities \
                 (ACS): capture as root with `lspci -vvv` or `lspci -xxxx`"
                .into(),
            Input::Spec => "the spec does not give it (acs in its [[function]] table)".into(),
            Input::Host => "config space past 256 bytes needs root: run pcielab as root".into(),
            Input::Snapshot { .. } => {
                "this snapshot's config file stops before the extended capabilities (saved \
                 without root): save it as root"
                    .into()
            }
        }
    }

    /// Why `f`'s AER correctable error count is unknown.
    pub(crate) fn aer_count(&self, f: &Function) -> String {
        match self {
            _ if f.mps.is_none() => self.express(f),
            Input::Host | Input::Snapshot { .. } if !f.aer => {
                "no AER capability: the device counts no errors".into()
            }
            Input::Host => {
                "it has an AER capability but no aer_dev_correctable file: the kernel's \
                 AER driver is off (pci=noaer, CONFIG_PCIEAER unset) or firmware owns AER"
                    .into()
            }
            Input::Snapshot { .. } => {
                "this snapshot holds no aer_dev_correctable file for it (saved without AER \
                 counters, or AER off on the machine)"
                    .into()
            }
            Input::Lspci { .. } => "lspci output shows error status bits, not the kernel's \
                 counts (aer_dev_correctable): run pcielab on the host"
                .into(),
            Input::Spec => "a sim: machine counts no AER errors".into(),
        }
    }

    /// Why the machine's kernel files beyond the PCI tree (`what`: IRQ affinities, cpufreq
    /// governors, ...) are missing.
    pub(crate) fn system(&self, what: &str) -> String {
        match self {
            Input::Spec => format!("a sim: machine has no kernel files: {what} are not simulated"),
            Input::Lspci { .. } => format!(
                "lspci output holds PCI registers only, not {what}: run pcielab on the host"
            ),
            Input::Snapshot { whole_root: false } => format!(
                "this snapshot holds /sys/bus/pci alone, not {what}: save the whole root and open \
                 snapshot:ROOT/sys/bus/pci"
            ),
            Input::Host | Input::Snapshot { whole_root: true } => {
                format!("the machine has no {what} under its root")
            }
        }
    }
}

/// The reason for a function without a PCI Express capability.
const NO_EXPRESS: &str =
    "no PCI Express capability (conventional PCI or virtio): it has no PCIe link registers";
