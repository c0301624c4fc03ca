//! `pcielab plot`: draws a kept `--json` result as the SVG its command's `--svg` would have
//! drawn. Wiring only; the pictures are `pcielab::plot`.

use std::path::PathBuf;

use super::output::Output;
use clap::Args as ClapArgs;
use pcielab::input::write_output;
use pcielab::report::svg_of;
use pcielab::report::Document;
use pcielab::Result;

#[derive(ClapArgs)]
#[command(
    about = "Draw a saved --json result (stat -I, model, fit, topo, topo --p2p, sim run, lab check) as an SVG",
    after_help = "Examples:
  pcielab model --gen 3 --width 4 --json > model.json
  pcielab plot model.json -o model.svg
  pcielab plot stat-2024-05-01.json -o stat.svg     (a stat result counted with -I)

The kind of the file is told from its fields; a file of another kind, or cut short, is bad
input (exit 2). docs/report.md describes each picture."
)]
pub struct Args {
    /// The result: the --json output of a pcielab command
    result: PathBuf,
    /// Where to write the SVG
    #[arg(short = 'o', long = "output", value_name = "OUT.svg")]
    output: PathBuf,
}

pub fn run(args: Args) -> Result<Output> {
    let doc = Document::read_file(&args.result)?;
    let svg = svg_of(&doc, &args.result.display().to_string())?;
    write_output(args.output.as_ref(), svg.as_bytes())?;
    Ok(Output::done())
}
