//! The undo journal `--apply` writes and `--undo` reads: one transaction, created exclusively
//! (an existing file is never replaced), recording the machine's absolute root and, per change,
//! the check that made it, the file, the value before and the value written. Read back only
//! from a regular file the running user owns and no one else may write.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The schema name a journal carries; a file with another is refused.
pub(crate) const JOURNAL_SCHEMA: &str = "pcielab.advise-undo/v2";

/// What the undo file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UndoJournal {
    pub(crate) schema: String,
    /// The machine's root the changes were made under: absolute, with no link in it ("/" on a
    /// host). `--undo` acts only on the machine whose root this is.
    pub(crate) root: String,
    /// In the order written; undone last first.
    pub(crate) changes: Vec<JournalEntry>,
}

/// One change `--apply` made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JournalEntry {
    /// The check whose fix made it: `--undo` writes only the files this check may write.
    pub(crate) check: String,
    /// The file, relative to `root`.
    pub(crate) file: String,
    /// What the file held before: what `--undo` writes back.
    pub(crate) before: String,
    /// What `--apply` wrote: `--undo` restores only a file that still holds it.
    pub(crate) written: String,
}

impl UndoJournal {
    /// Writes the journal to `path` as a new file, mode 0600; anything already there is refused
    /// (bad input), so a second `--apply` cannot lose the first one's record.
    pub(crate) fn create(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::runtime(format!("undo file: {e}")))?;
        crate::input::write_new_file(path, format!("{text}\n").as_bytes(), 0o600)
    }

    /// Reads the journal at `path`: a regular file the running user owns, not writable by group
    /// or others, in this schema.
    pub(crate) fn read(path: &Path) -> Result<UndoJournal> {
        let text = crate::input::read_private_file(path, "undo file")?;
        let journal: UndoJournal = serde_json::from_str(&text).map_err(|e| {
            Error::bad_input(format!(
                "undo file {}: not an advise undo journal ({e}); expected the JSON `advise --apply --undo-file` wrote ({JOURNAL_SCHEMA})",
                path.display()
            ))
        })?;
        if journal.schema != JOURNAL_SCHEMA {
            return Err(Error::bad_input(format!(
                "undo file {}: schema '{}' is not {JOURNAL_SCHEMA}",
                path.display(),
                crate::input::cut_for_message(&journal.schema)
            )));
        }
        Ok(journal)
    }
}
