//! The text of what pcielab prints, for every floor: numbers rounded as reports print and
//! compare them, counts with thousands separators, names and messages made safe for a terminal,
//! and the tagged text of a `--json` document. The JSON Schemas of those documents live with
//! the report (`report::schema`), the top floor that sees every document type.

use serde::Serialize;
use std::fmt::Write as _;

use crate::error::{Error, Result};

/// `value` rounded to `decimals` places, for numbers that reports print or compare.
pub(crate) fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// The longest line of a message printed to a terminal; a parser that quotes the offending line
/// of a file with one 100 KB line would otherwise flood it. Far longer than any line pcielab
/// writes itself (paths and kernel lines included).
pub(crate) const MAX_MESSAGE_LINE: usize = 2000;

/// `text` (a label, a name read from a file) as a terminal shows it and does not obey it:
/// every control character (escape sequences, newlines) escaped.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    push_printable(&mut out, text);
    out
}

/// [`printable`] appended to `out`, for a caller filling one buffer (a `top` frame's cells).
pub(crate) fn push_printable(out: &mut String, text: &str) {
    // Almost every name has nothing to escape: one scan, one copy.
    if !text.chars().any(char::is_control) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        push_shown(out, c, false);
    }
}

/// Append `c`, escaped when it is a control character (but a tab with `keep_tabs`): newline,
/// carriage return and tab as `\n`, `\r`, `\t`, every other C0 and C1 control and DEL as
/// `\xNN` (`\x1b`, `\x9b`), the form a byte that is not UTF-8 is shown in.
fn push_shown(out: &mut String, c: char, keep_tabs: bool) {
    if !c.is_control() || (keep_tabs && c == '\t') {
        out.push(c);
        return;
    }
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        // Controls are U+0000-U+001F and U+007F-U+009F: two hex digits each.
        _ => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
    }
}

/// `message` as it may reach a terminal: control characters other than newline and tab escaped
/// (an escape sequence quoted from a user's file is shown, not obeyed) and every line cut at
/// `MAX_MESSAGE_LINE` characters, saying how many more there were.
pub fn terminal_text(message: &str) -> String {
    let lines: Vec<String> = message
        .split('\n')
        .map(|line| {
            let mut out = String::new();
            let mut shown = 0;
            let mut chars = line.chars();
            for c in chars.by_ref() {
                push_shown(&mut out, c, true);
                shown += 1;
                if shown == MAX_MESSAGE_LINE {
                    break;
                }
            }
            let more = chars.count();
            if more > 0 {
                out.push_str(&format!("… ({more} more characters)"));
            }
            out
        })
        .collect();
    lines.join("\n")
}

/// `text` as it is printed on standard output: as [`terminal_text`] (every control character
/// but newline and tab escaped, so a name or line quoted from an input is shown, not obeyed),
/// without cutting lines. JSON documents pass unchanged: their strings hold no raw control
/// character.
pub fn terminal_output(text: &str) -> std::borrow::Cow<'_, str> {
    let shown_raw = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if !may_hold_controls(text) || text.chars().all(shown_raw) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c == '\n' {
            out.push(c);
        } else {
            push_shown(&mut out, c, true);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Text the library made for a terminal piece by piece, with every string from an input put in
/// through [`printable`] (names read from sysfs, pci.ids or a snapshot; a filter typed by the
/// user): it holds no control character but the newlines that end its lines, so it is printed
/// without the scan of [`terminal_output`] (`top -b` prints a megabyte-sized frame at every
/// refresh). Only the library makes one; debug builds (the tests) check the promise.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(&'a str);

impl<'a> Escaped<'a> {
    /// `text`, whose maker escaped every input string in it.
    pub(crate) fn new(text: &'a str) -> Escaped<'a> {
        debug_assert!(
            text.chars().all(|c| c == '\n' || !c.is_control()),
            "text made for a terminal holds a raw control character: {text:?}"
        );
        Escaped(text)
    }
}

/// The text, as printed.
impl std::ops::Deref for Escaped<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        self.0
    }
}

/// False when `text` certainly holds no control character but newline and tab: no byte below
/// 0x20 but those two, no DEL, and no 0xC2 (the lead byte of every C1 control, U+0080-U+009F,
/// in UTF-8; also of some printable characters, which the exact check then clears). A byte scan
/// in blocks without an early exit and without branches, which the compiler turns into vector
/// code (3.5 times the speed of the per-character check): a big host's `topo` text is
/// megabytes.
fn may_hold_controls(text: &str) -> bool {
    text.as_bytes().chunks(4096).any(|block| {
        let mut suspect = 0u8;
        for &b in block {
            let c0 = u8::from(b < 0x20) & u8::from(b != b'\n') & u8::from(b != b'\t');
            suspect |= c0 | u8::from(b == 0x7f) | u8::from(b == 0xc2);
        }
        suspect != 0
    })
}

/// `1234567` -> `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The `schema` tag of a `--json` document of `kind` (`stat`, `topo`, …): what a script checks
/// before trusting the fields, and the name of its JSON Schema in docs/json/.
pub(crate) fn schema_tag(kind: &str) -> String {
    format!("pcielab.{kind}/v1")
}

/// `value` as a `--json` document of `kind`: its own fields plus `"schema": "pcielab.<kind>/v1"`.
pub fn tagged<T: Serialize>(kind: &str, value: &T) -> Result<serde_json::Value> {
    let mut doc = serde_json::to_value(value)
        .map_err(|e| Error::runtime(format!("JSON encoding failed: {e}")))?;
    let serde_json::Value::Object(fields) = &mut doc else {
        return Err(Error::runtime(format!(
            "a pcielab.{kind} document must be a JSON object to carry its schema tag"
        )));
    };
    fields.insert("schema".to_string(), schema_tag(kind).into());
    Ok(doc)
}

/// A `--json` document of `kind` as printed: pretty JSON with its `schema` tag, ending in a
/// newline.
pub fn json_text<T: Serialize>(kind: &str, value: &T) -> Result<String> {
    let mut text = serde_json::to_string_pretty(&tagged(kind, value)?)
        .map_err(|e| Error::runtime(format!("JSON encoding failed: {e}")))?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_every_control_character() {
        assert_eq!(printable("p1\x1b[2J\nx\ty"), "p1\\x1b[2J\\nx\\ty");
        assert_eq!(printable("Slot 1 (ü)"), "Slot 1 (ü)");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "raw control character")]
    fn escaped_text_with_a_raw_control_character_is_a_bug_caught_in_tests() {
        Escaped::new("name\x1b[2J\n");
    }

    #[test]
    fn terminal_output_escapes_controls_but_keeps_lines_and_json() {
        assert_eq!(
            terminal_output("a\x1b[2Jb\r\n\tc\u{9b}d\n"),
            "a\\x1b[2Jb\\r\n\tc\\x9bd\n"
        );
        let json =
            serde_json::to_string_pretty(&serde_json::json!({"name": "x\x1b[31m\n"})).unwrap();
        assert_eq!(
            terminal_output(&json),
            json,
            "JSON escapes its own controls"
        );
        let long = "y".repeat(10_000);
        assert_eq!(terminal_output(&long), long, "no line is cut");
        // Every control but newline and tab, alone and deep in a long text, at every offset
        // in a block; printable characters with the C1 controls' lead byte pass unchanged.
        for c in (0..=0x9f_u32)
            .filter_map(char::from_u32)
            .filter(|c| c.is_control())
        {
            for at in [0, 63, 64, 1000] {
                let text = format!("{}{c}{}", "x".repeat(at), "y".repeat(100));
                let escaped = matches!(terminal_output(&text), std::borrow::Cow::Owned(_));
                assert_eq!(escaped, c != '\n' && c != '\t', "{:#x} at {at}", c as u32);
            }
        }
        assert!(matches!(
            terminal_output("5 µs at 40 °C"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn terminal_text_escapes_controls_and_cuts_long_lines() {
        assert_eq!(
            terminal_text("bad \x1b[31mname\x07\n\tnext"),
            "bad \\x1b[31mname\\x07\n\tnext"
        );
        let long = format!("x = {}", "[".repeat(100_000));
        let shown = terminal_text(&format!("{long}\nend"));
        assert!(shown.len() < MAX_MESSAGE_LINE + 40, "{}", shown.len());
        assert!(
            shown.contains(&format!(
                "… ({} more characters)\nend",
                100_004 - MAX_MESSAGE_LINE
            )),
            "{shown}"
        );
    }

    #[test]
    fn round_to_keeps_the_given_places() {
        assert_eq!(round_to(3938.461538, 2), 3938.46);
        assert_eq!(round_to(3938.4615, 3), 3938.462);
        assert_eq!(round_to(0.0049, 2), 0.0);
        assert_eq!(round_to(-1.26, 1), -1.3);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(536_910_432), "536,910,432");
        assert_eq!(thousands(6_777_637_176), "6,777,637,176");
    }

    #[test]
    fn json_text_is_pretty_tagged_and_ends_in_a_newline() {
        let doc = serde_json::json!({"ok": true, "pairs": [1, 2]});
        assert_eq!(
            json_text("demo", &doc).unwrap(),
            "{\n  \"ok\": true,\n  \"pairs\": [\n    1,\n    2\n  ],\n  \"schema\": \"pcielab.demo/v1\"\n}\n"
        );
        let bad: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let e = json_text("demo", &bad).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().starts_with("JSON encoding failed: "), "{e}");
    }
}
