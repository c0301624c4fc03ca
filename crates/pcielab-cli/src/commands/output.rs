//! The one place a command's result reaches standard output. A command returns an [`Output`]:
//! a [`Document`] (its schema kind, its JSON and text forms, its SVG where it has one, and how
//! the command ends) and the form asked for; [`Output::print`], called only by
//! `commands::run`, writes the SVG, prints the form and gives the exit status. A command that
//! prints while it runs (`top -b` frames, `qos monitor` intervals, each `qos create` step as it
//! is made) is handed the same [`Terminal`] the runner prints through, so every byte on
//! standard output obeys one policy:
//! - text has control characters from inputs shown escaped (`text::terminal_output`; text the
//!   library built with every input escaped as it went in, `text::Escaped`, is not scanned
//!   again); JSON passes unchanged (its strings hold no raw control character);
//! - a failed write on standard output (a full disk, `/dev/full`) is a runtime error (exit 1,
//!   one line on stderr), never a panic; a closed pipe still ends the process by SIGPIPE
//!   (status 141), as `main` sets it up.

use std::path::PathBuf;

use pcielab::input::{write_output, write_stdout};
use pcielab::text::{terminal_output, Escaped};
use pcielab::Result;

/// Standard output (and the report a command prints on standard error, as `stat` prints its
/// counts) under the output policy. Zero-sized: it stands for the process's streams and is
/// passed to whatever prints, so nothing prints around it.
pub struct Terminal(());

impl Terminal {
    /// Only `commands::run` makes one.
    pub(super) fn new() -> Terminal {
        Terminal(())
    }

    /// Text on standard output, control characters shown escaped.
    pub fn text(&mut self, text: &str) -> Result<()> {
        write_stdout(terminal_output(text).as_bytes())
    }

    /// Text the library made with its inputs escaped already (a `top -b` frame), on standard
    /// output as it is: a megabyte-sized frame is not scanned again at every refresh.
    pub fn escaped(&mut self, text: Escaped) -> Result<()> {
        write_stdout(text.as_bytes())
    }

    /// A JSON document on standard output, as it is.
    pub fn json(&mut self, json: &str) -> Result<()> {
        write_stdout(json.as_bytes())
    }

    /// Bytes on standard output as they are: a format of its own that pcielab generated whole
    /// and that escaping would break (a manual page's roff, a completion script).
    pub fn bytes(&mut self, bytes: &[u8]) -> Result<()> {
        write_stdout(bytes)
    }

    /// A note on standard error, as [`note`] prints it.
    pub fn note(&mut self, line: &str) {
        note(line);
    }

    /// A document too large to hold whole (`topo --json` of a listing of many functions),
    /// written piece by piece through a buffer by `write`.
    pub fn stream(
        &mut self,
        write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<()> {
        use std::io::Write as _;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        write(&mut out)
            .and_then(|()| out.flush())
            .map_err(|e| pcielab::Error::io("standard output", e))
    }

    /// A whole report on standard error (`stat`'s counts, as perf prints them), control
    /// characters shown escaped. A failed write on stderr is ignored: there is nowhere left to
    /// report it.
    pub fn report(&mut self, text: &str) {
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), "{}", terminal_output(text));
    }
}

/// One line on standard error for a note or warning that may quote an input (a file name, a
/// line): control characters shown escaped and overlong lines cut, as in error messages. A
/// failed write on stderr is ignored, as `eprintln!` would panic on it and there is nowhere
/// left to report it. Notes go to stderr as they happen (progress while a guest boots, what a
/// command did), so they need no document.
pub fn note(line: &str) {
    use std::io::Write as _;
    let text = pcielab::text::terminal_text(line);
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// The JSON form of a value, object-safe so that a `dyn Document` can hand one over: every
/// serialisable value is printed as `text::json_text` prints it (pretty, with its `schema` tag);
/// a document printed another way (streamed, or an older untagged shape) implements it itself.
pub trait JsonForm {
    /// Prints the value as the `--json` document of schema `kind`.
    fn write_json(&self, kind: &'static str, out: &mut Terminal) -> Result<()>;
}

impl<T: serde::Serialize> JsonForm for T {
    fn write_json(&self, kind: &'static str, out: &mut Terminal) -> Result<()> {
        out.json(&pcielab::text::json_text(kind, self)?)
    }
}

/// What a command ends with.
pub trait Document {
    /// The schema kind of the JSON form: its `schema` tag is `pcielab.KIND/v1`, and
    /// docs/json/KIND.schema.json describes it where one ships.
    fn kind(&self) -> &'static str;

    /// The value the JSON form prints.
    fn json(&self) -> &dyn JsonForm;

    /// Prints the text form.
    fn write_text(&self, out: &mut Terminal) -> Result<()>;

    /// The document drawn, for `--svg`; `None` where the command draws nothing.
    fn svg(&self) -> Result<Option<String>> {
        Ok(None)
    }

    /// How the command ends once the document is printed: its exit status (0, or one it owes
    /// its caller such as `advise --fail-on`'s 3), or the failure the document reports (a guest
    /// that differs from its spec), printed by `main` after the document.
    fn end(&self) -> Result<i32> {
        Ok(0)
    }
}

/// The form a document is printed in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Text,
    Json,
}

impl Form {
    /// JSON when `--json` was given.
    pub fn json_if(json: bool) -> Form {
        if json {
            Form::Json
        } else {
            Form::Text
        }
    }
}

/// A command's result as the runner prints it.
pub struct Output {
    printed: Printed,
    svg: Option<PathBuf>,
}

enum Printed {
    /// Nothing on standard output; the exit status.
    Nothing(i32),
    Document(Box<dyn Document>, Form),
    /// Text with no JSON form (a pid, a path).
    Text(String),
    /// Bytes in a format of their own (see [`Terminal::bytes`]).
    Bytes(Vec<u8>),
}

impl Output {
    /// `document` in `form`.
    pub fn new(document: impl Document + 'static, form: Form) -> Output {
        Output {
            printed: Printed::Document(Box::new(document), form),
            svg: None,
        }
    }

    /// `text` on standard output, for a result with no JSON form (a pid, a path).
    pub fn text(text: String) -> Output {
        Output {
            printed: Printed::Text(text),
            svg: None,
        }
    }

    /// `bytes` on standard output as they are (see [`Terminal::bytes`]).
    pub fn bytes(bytes: Vec<u8>) -> Output {
        Output {
            printed: Printed::Bytes(bytes),
            svg: None,
        }
    }

    /// Nothing more on standard output: the command's result is a file it wrote, or what it
    /// printed while it ran. It ends with status 0.
    pub fn done() -> Output {
        Output::status(0)
    }

    /// Nothing on standard output, and exit status `status` (`stat`'s 127 for a workload that
    /// does not exist).
    pub fn status(status: i32) -> Output {
        Output {
            printed: Printed::Nothing(status),
            svg: None,
        }
    }

    /// Also writes the document's SVG into `path` (`--svg`), before the document is printed.
    pub fn with_svg(mut self, path: Option<PathBuf>) -> Output {
        self.svg = path;
        self
    }

    /// Writes the SVG, prints the document and gives the exit status: what `commands::run`
    /// does with every command's result.
    pub(super) fn print(self, out: &mut Terminal) -> Result<i32> {
        let (document, form) = match self.printed {
            Printed::Nothing(status) => return Ok(status),
            Printed::Text(text) => return out.text(&text).map(|()| 0),
            Printed::Bytes(bytes) => return out.bytes(&bytes).map(|()| 0),
            Printed::Document(document, form) => (document, form),
        };
        if let Some(path) = &self.svg {
            if let Some(svg) = document.svg()? {
                write_output(path, svg.as_bytes())?;
            }
        }
        match form {
            Form::Json => document.json().write_json(document.kind(), out)?,
            Form::Text => document.write_text(out)?,
        }
        document.end()
    }
}
