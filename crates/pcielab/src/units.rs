//! Sizes as people write them on command lines, in fio job files and in lmbench arguments: one
//! parser for every place pcielab reads a byte count, so `4K` means the same everywhere.

/// A byte count with an optional binary suffix: `k`, `m`, `g`, `t` (either case, optionally
/// followed by `b` or `ib`: `4K`, `4KB`, `4KiB` are all 4096), as fio's default `kb_base=1024`,
/// lmbench and `dd` read them. `None` when it is not a number with such a suffix, or overflows.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// `parse_size` for a command-line argument that must be positive, as a clap value parser:
/// the error says what a size looks like.
pub fn positive_size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("'{text}' is not a size: expected e.g. 4096, 64K, 4M, 1G"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_powers_of_1024_in_every_spelling() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1024K"), Some(1 << 20));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("10GiB"), Some(10 << 30));
        assert_eq!(parse_size("3MB"), Some(3 << 20));
        assert_eq!(parse_size("1t"), Some(1 << 40));
        assert_eq!(parse_size(" 8 "), Some(8));
    }

    #[test]
    fn anything_else_is_not_a_size() {
        for bad in [
            "",
            "K",
            "1x",
            "1.5M",
            "-4K",
            "4 K",
            "99999999999999999999",
            "20000000T",
        ] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        assert_eq!(
            positive_size_arg("0").unwrap_err(),
            "'0' is not a size: expected e.g. 4096, 64K, 4M, 1G"
        );
        assert_eq!(positive_size_arg("4M"), Ok(4 << 20));
    }
}
