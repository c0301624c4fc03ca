//! `pcielab fit`: fits the platform model to measurements (CSV, fio JSON or the Rockchip guide's dmatest
//! table) on one link and prints each parameter with its uncertainty and every row's residual,
//! or writes the `[platform]` spec fragment. Argument wiring only; the work is
//! `pcielab::model::fit`.

use clap::Args as ClapArgs;
use pcielab::machine::read_platform_file;
use pcielab::model::fit::{fit, predict_rows, FitDocument};
use pcielab::model::parse_measurements;
use pcielab::plot;
use pcielab::Result;

use super::output::{Document, Form, JsonForm, Output, Terminal};

use super::model::LinkArgs;

#[derive(ClapArgs)]
#[command(
    about = "Fit platform parameters (root complex, DMA engine, CPU, MMIO) to measurements",
    long_about = "Fits the platform model beyond the link to measured rates by bounded least \
squares on relative error. Input: a CSV with a header naming size_bytes,direction,MBps (optional \
latency_ns, iodepth, jobs, and gen + width for rows measured on another link; direction write = the device writes host memory, read = it reads it, \
store/load = CPU MMIO of size_bytes-wide accesses, fio_read/fio_write = queued I/O), fio's \
--output-format=json, or a dmatest table as the Rockchip guide prints it. Prints every parameter \
the data touches with its 1-sigma uncertainty, or says it cannot be determined by this data (it \
then keeps its default), and the residual of every row. Same input, same result. With \
--platform SPEC nothing is fitted: every row is predicted with SPEC's [platform] (fitted on other \
data) and its error printed.",
    after_help = "Examples:\n  pcielab fit fixtures/rockchip/rk3588-gen3x4-dmatest.txt --gen 3 --width 4\n  pcielab fit fixtures/rockchip/rk3588-gen3x4-dmatest.txt --gen 3 --width 4 --svg fit.svg\n  pcielab fit dma.csv --gen 2 --width 1 --out rk3588-gen2x1.toml\n  pcielab fit fio.json --gen 3 --width 4 --json\n  pcielab model --gen 2 --width 1 --platform rk3588-gen2x1.toml\n  pcielab fit fixtures/rockchip/rk3588-gen2x1-dmatest.txt --gen 2 --width 1 --addr64 --platform presets/rk3588-ep.toml\n\nParameters and the [platform] table: docs/calibration.md."
)]
pub struct Args {
    /// Measurements: CSV, fio JSON or a dmatest table.
    file: String,
    #[command(flatten)]
    link: LinkArgs,
    /// Write the fitted [platform] table to this file (a spec fragment).
    #[arg(long)]
    out: Option<String>,
    /// What the measurements are, recorded as fitted_on [default: the file name].
    #[arg(long)]
    label: Option<String>,
    /// Fit nothing: predict every row with this spec's [platform] table and print the errors.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["out", "label"])]
    platform: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also draw measured vs fitted (or, with --platform, predicted) MB/s and the residuals as
    /// an SVG here.
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> Result<Output> {
    let link = args.link.params()?;
    let text = pcielab::input::read_input_file(std::path::Path::new(&args.file), "measurements")?;
    let rows = parse_measurements(&args.file, &text, &link)?;
    // A fit takes seconds: an output that will be refused is refused before it starts.
    for out in [
        args.out.as_deref().map(std::path::Path::new),
        args.svg.as_deref(),
    ]
    .into_iter()
    .flatten()
    {
        pcielab::input::output_target(out)?;
    }
    let form = Form::json_if(args.json);
    if let Some(spec) = &args.platform {
        let report = predict_rows(&read_platform_file(spec)?, &rows, &link)?;
        let predicted = Fitted {
            document: FitDocument::Prediction(report),
            wrote: None,
        };
        return Ok(Output::new(predicted, form).with_svg(args.svg));
    }
    let label = args.label.clone().unwrap_or_else(|| {
        format!(
            "{} (Gen{} x{}, MPS {}, MRRS {})",
            args.file,
            link.gen.number(),
            link.width,
            link.mps,
            link.mrrs
        )
    });
    // A debug build takes seconds (every whole-number candidate is a full fit): say what runs.
    note!("fitting {} rows from {}…", rows.len(), args.file);
    let report = fit(&rows, &link, &label)?;
    if let Some(out) = &args.out {
        pcielab::input::write_output(out.as_ref(), report.model.to_toml().as_bytes())?;
    }
    let fitted = Fitted {
        document: FitDocument::Fit(Box::new(report)),
        wrote: args.out,
    };
    Ok(Output::new(fitted, form).with_svg(args.svg))
}

/// A fit (or, with `--platform`, a prediction) and the file `--out` wrote the fitted
/// `[platform]` table to.
struct Fitted {
    document: FitDocument,
    wrote: Option<String>,
}

impl Document for Fitted {
    fn kind(&self) -> &'static str {
        match &self.document {
            FitDocument::Fit(_) => "fit",
            FitDocument::Prediction(_) => "fit-prediction",
        }
    }

    fn json(&self) -> &dyn JsonForm {
        match &self.document {
            FitDocument::Fit(report) => report.as_ref(),
            FitDocument::Prediction(report) => report,
        }
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        match &self.document {
            FitDocument::Fit(report) => out.text(&report.to_text())?,
            FitDocument::Prediction(report) => out.text(&report.to_text())?,
        }
        match &self.wrote {
            Some(file) => out.text(&format!("\nwrote [platform] to {file}\n")),
            None => Ok(()),
        }
    }

    fn svg(&self) -> Result<Option<String>> {
        plot::svg(plot::Picture::Fit(&self.document)).map(Some)
    }
}
