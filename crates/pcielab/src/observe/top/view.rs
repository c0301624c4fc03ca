//! What the user chose to see: sort key, filter, tree or flat, pause, help and scroll, changed
//! only by a terminal-independent [`Key`] through [`View::handle`].

use serde::Serialize;

/// What the rows are ordered by. Rates and % sort busiest first; BDF in address order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// By address.
    Bdf,
    /// By payload received by the root port (toward the root complex).
    Rx,
    /// By payload transmitted by the root port (toward the device).
    Tx,
    /// By share of the link in use.
    Link,
}

impl SortKey {
    const CYCLE: [SortKey; 4] = [SortKey::Bdf, SortKey::Rx, SortKey::Tx, SortKey::Link];

    pub(crate) fn name(self) -> &'static str {
        match self {
            SortKey::Bdf => "bdf",
            SortKey::Rx => "rx",
            SortKey::Tx => "tx",
            SortKey::Link => "%link",
        }
    }

    fn step(self, forward: bool) -> SortKey {
        let i = SortKey::CYCLE.iter().position(|k| *k == self).unwrap_or(0);
        let n = SortKey::CYCLE.len();
        SortKey::CYCLE[if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        }]
    }
}

impl std::str::FromStr for SortKey {
    type Err = String;

    /// A key as `--sort` takes it: `bdf`, `rx`, `tx`, `link` (or `%link`, as the column is named).
    fn from_str(text: &str) -> std::result::Result<SortKey, String> {
        match text {
            "bdf" => Ok(SortKey::Bdf),
            "rx" => Ok(SortKey::Rx),
            "tx" => Ok(SortKey::Tx),
            "link" | "%link" => Ok(SortKey::Link),
            _ => Err(format!(
                "'{text}' is not a sort key: expected bdf, rx, tx or link"
            )),
        }
    }
}

/// A key press, as the view understands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Backspace.
    Backspace,
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Page Up.
    PageUp,
    /// Page Down.
    PageDown,
    /// Home.
    Home,
    /// Ctrl-C: quits from anywhere, filter prompt included.
    Interrupt,
}

/// What the caller does after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Draw the next frame.
    Continue,
    /// Leave `top`.
    Quit,
}

/// The user's choices; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// What the rows are ordered by.
    pub sort: SortKey,
    /// Children under their parent, indented; otherwise one flat list.
    pub tree: bool,
    /// Sampling stopped: the last frame stays.
    pub paused: bool,
    /// The help screen is shown.
    pub help: bool,
    /// Case-insensitive text a function, or one of its ancestors, must contain.
    pub filter: String,
    /// The filter being typed after `/`, until Enter applies it or Esc drops it.
    pub editing: Option<String>,
    /// Rows scrolled off the top of the table.
    pub scroll: usize,
}

impl Default for View {
    fn default() -> View {
        View {
            sort: SortKey::Bdf,
            tree: true,
            paused: false,
            help: false,
            filter: String::new(),
            editing: None,
            scroll: 0,
        }
    }
}

/// Rows a page key moves.
const PAGE_ROWS: usize = 10;

/// The keys, for the help screen and `--help`.
pub const KEY_HELP: &[(&str, &str)] = &[
    ("s  > / <", "sort: next / previous key (bdf, rx, tx, %link)"),
    ("/", "filter: type text, Enter applies, Esc cancels"),
    ("Esc", "clear the filter"),
    ("t", "tree / flat"),
    ("space", "pause / resume sampling"),
    ("Up Down PgUp PgDn Home", "scroll"),
    ("h  ?", "this help (any key closes it)"),
    ("q  Ctrl-C", "quit"),
];

impl View {
    /// Applies `key` to the view; says whether to go on or quit.
    pub fn handle(&mut self, key: Key) -> Action {
        if key == Key::Interrupt {
            return Action::Quit;
        }
        if let Some(text) = &mut self.editing {
            match key {
                Key::Char(c) => text.push(c),
                Key::Backspace => {
                    text.pop();
                }
                Key::Enter => {
                    self.filter = self.editing.take().unwrap_or_default();
                    self.scroll = 0;
                }
                Key::Esc => self.editing = None,
                _ => {}
            }
            return Action::Continue;
        }
        if self.help {
            self.help = false;
            return if key == Key::Char('q') {
                Action::Quit
            } else {
                Action::Continue
            };
        }
        match key {
            Key::Char('q') => return Action::Quit,
            Key::Char('s') | Key::Char('>') => self.sort = self.sort.step(true),
            Key::Char('<') => self.sort = self.sort.step(false),
            Key::Char('t') => self.tree = !self.tree,
            Key::Char(' ') => self.paused = !self.paused,
            Key::Char('h') | Key::Char('?') => self.help = true,
            Key::Char('/') => self.editing = Some(self.filter.clone()),
            Key::Esc => {
                self.filter.clear();
                self.scroll = 0;
            }
            Key::Up => self.scroll = self.scroll.saturating_sub(1),
            Key::Down => self.scroll = self.scroll.saturating_add(1),
            Key::PageUp => self.scroll = self.scroll.saturating_sub(PAGE_ROWS),
            Key::PageDown => self.scroll = self.scroll.saturating_add(PAGE_ROWS),
            Key::Home => self.scroll = 0,
            _ => {}
        }
        Action::Continue
    }
}
