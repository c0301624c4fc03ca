//! `pcielab man` and `pcielab completions`: manual pages and shell completions generated from the
//! same clap definition that parses the command line.

use super::output::Output;
use clap::Args as ClapArgs;
use pcielab::input::OutputTarget;
use pcielab::{Error, Result};
use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab man | man -l -                     read pcielab(1) now
  pcielab man ~/.cargo/share/man/man1        install every page (pcielab.1, pcielab-stat.1, ...)
  man pcielab-stat                           then open one (man searches ~/.cargo/share/man
                                             because ~/.cargo/bin, where cargo install put
                                             pcielab, is on PATH)

With DIR, one page per command and subcommand is written there (the directory must exist);
without, pcielab.1 is printed to standard output.")]
pub struct ManArgs {
    /// Directory to write every page into (e.g. /usr/local/share/man/man1)
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab completions bash > ~/.local/share/bash-completion/completions/pcielab
  pcielab completions zsh > \"${fpath[1]}/_pcielab\"
  pcielab completions fish > ~/.config/fish/completions/pcielab.fish

bash loads the file on the first `pcielab <TAB>` of a new shell (bash-completion package); to try
it in the current shell: source <(pcielab completions bash). `--machine <TAB>` offers host and
every sim:PRESET; the bash script takes ':' out of COMP_WORDBREAKS so `sim:rk<TAB>` completes.")]
pub struct CompletionArgs {
    /// The shell to write a completion script for
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

pub fn run_man(args: ManArgs) -> Result<Output> {
    let cmd = crate::cli_command();
    let Some(dir) = args.dir else {
        return Ok(Output::bytes(render_page(clap_mangen::Man::new(cmd))?.1));
    };
    if !dir.exists() {
        return Err(Error::bad_input(format!(
            "man: '{}' is not an existing directory: give the man1 directory to write the pages \
             into (e.g. ~/.local/share/man/man1, created with mkdir -p)",
            dir.display()
        )));
    }
    // The directory and every page go through the policy of every other output (no link out of
    // the directory, no read-only page replaced); all are checked before the first is written,
    // and each is written whole into a new file renamed over the page. A page must be a file:
    // a FIFO or device planted under a page's name would block or take the text elsewhere.
    let dir = pcielab::input::output_dir(&dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    every_page(cmd, &mut pages)?;
    for (name, _) in &pages {
        let page = dir.join(name);
        let kind = match pcielab::input::output_target(&page)? {
            OutputTarget::File { .. } => continue,
            OutputTarget::Stdout => "standard output",
            OutputTarget::Stream(at) => match std::fs::metadata(at) {
                Ok(meta) if meta.file_type().is_fifo() => "a FIFO",
                _ => "a device",
            },
        };
        return Err(Error::bad_input(format!(
            "man: {} is {kind}, not a file; a manual page is written only as a regular file \
             (nothing was written: remove it or give another directory)",
            page.display()
        )));
    }
    for (name, page) in &pages {
        pcielab::input::write_output(&dir.join(name), page)?;
    }
    Ok(Output::done())
}

/// One page's file name (`pcielab-stat.1`) and text.
fn render_page(man: clap_mangen::Man) -> Result<(String, Vec<u8>)> {
    let name = man.get_filename();
    let mut page = Vec::new();
    man.render(&mut page)
        .map_err(|e| Error::runtime(format!("rendering {name}: {e}")))?;
    Ok((name, page))
}

/// The page of `cmd` and of each of its visible subcommands, as clap_mangen's `generate_to`
/// names them.
fn every_page(cmd: clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        every_page(sub.clone(), pages)?;
    }
    pages.push(render_page(clap_mangen::Man::new(cmd))?);
    Ok(())
}

pub fn run_completions(args: CompletionArgs) -> Result<Output> {
    let mut cmd = crate::cli_command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "pcielab", &mut script);
    if args.shell == clap_complete::Shell::Bash {
        // bash splits the word being completed at ':' (COMP_WORDBREAKS), so `--machine sim:rk`
        // would reach the script as `sim`, `:`, `rk` and never match a preset; npm's completion
        // takes its separators out the same way.
        script.extend_from_slice(b"COMP_WORDBREAKS=${COMP_WORDBREAKS//:/}\n");
    }
    Ok(Output::bytes(script))
}
