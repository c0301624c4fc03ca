//! `pcielab snapshot DIR`: save the live host's `/sys/bus/pci` as plain files, readable later
//! with `--machine snapshot:DIR` and by the real `lspci -A linux-sysfs -O sysfs.path=DIR`.

use super::output::Output;
use clap::Args as ClapArgs;
use pcielab::machine::save_snapshot;
use pcielab::Result;
use std::path::PathBuf;

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  sudo pcielab snapshot /tmp/snap        (as root, config holds all 4 KiB)
  pcielab topo --machine snapshot:/tmp/snap
  lspci -A linux-sysfs -O sysfs.path=/tmp/snap -tv

Without root the kernel returns only the first 64 bytes of each config file; pcielab then
falls back to the link attributes (current_link_speed, max_link_width, ...).")]
pub struct Args {
    /// Directory to create the snapshot in (must not already hold devices/)
    pub dir: PathBuf,
    /// Read sysfs under this root instead of / (for tests and chroots)
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
}

pub fn run(args: Args) -> Result<Output> {
    let saved = save_snapshot(&args.root, &args.dir)?;
    note!("saved {saved} functions to {}", args.dir.display());
    Ok(Output::done())
}
