//! Rendering pieces more than one area needs: rounding the numbers a report prints or
//! compares, counts with thousands separators, and the text of a `--json` document.
//! Area-specific tables and plots stay with their area; the HTML page of `pcielab report`
//! is [`html`].

pub mod html;

use serde::Serialize;

use crate::error::{Error, Result};

/// `value` rounded to `decimals` places, for numbers that reports print or compare.
pub fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
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

/// A `--json` document as printed: pretty JSON ending in a newline.
pub fn json_text<T: Serialize>(value: &T) -> Result<String> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::runtime(format!("JSON encoding failed: {e}")))?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn json_text_is_pretty_and_ends_in_a_newline() {
        let doc = serde_json::json!({"ok": true, "pairs": [1, 2]});
        assert_eq!(
            json_text(&doc).unwrap(),
            "{\n  \"ok\": true,\n  \"pairs\": [\n    1,\n    2\n  ]\n}\n"
        );
        let bad: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let e = json_text(&bad).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().starts_with("JSON encoding failed: "), "{e}");
    }
}
