//! `pcielab corpus DIR`: read every lspci output under DIR and count what the checks find.

use super::output::{Document, Form, JsonForm, Output, Terminal};
use clap::Args as ClapArgs;
use pcielab::advise::{run_corpus, CorpusReport};
use pcielab::Result;
use std::path::PathBuf;

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab corpus fixtures/lspci/linuxhw              the findings table over real servers
  pcielab corpus ~/lspci-dumps --json | jq '.failed'  which files did not read, and where

Each regular file below DIR (dot files and README* skipped) is one machine's lspci output:
-vvv text (with -nn, -k, -D or not) or a -xxxx hex dump, as --machine lspci:FILE reads it.
Reported: files that failed (with FILE:LINE and why), functions read, read time per machine,
and per check the subjects judged and not judged (with each reason), and how many findings on
how many machines. --json adds every machine's checks and findings, each finding quoting the
input line it rests on.")]
pub struct Args {
    /// Directory of lspci outputs, one machine per file (walked recursively)
    pub dir: PathBuf,
    /// Print the whole report as JSON (schema pcielab.corpus/v1)
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<Output> {
    let report = run_corpus(&args.dir)?;
    Ok(Output::new(Corpus(report), Form::json_if(args.json)))
}

/// The corpus report. Its JSON carries its own `schema` field, in the report's field order (the
/// tagged documents of other commands are printed with sorted keys).
struct Corpus(CorpusReport);

impl JsonForm for Corpus {
    fn write_json(&self, _kind: &'static str, out: &mut Terminal) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.0)
            .map_err(|e| pcielab::Error::runtime(format!("corpus report as JSON: {e}")))?;
        out.text(&format!("{text}\n"))
    }
}

impl Document for Corpus {
    fn kind(&self) -> &'static str {
        "corpus"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.0.to_text())
    }
}
