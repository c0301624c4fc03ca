//! YAML input as JSON values, with bounds: nesting deeper than `MAX_DEPTH` fails at the first
//! event past it (a 100 000-deep `[[[…` plan is refused in microseconds, not parsed first; the
//! scanner itself stops at 256 flow levels), more
//! than `MAX_NODES` nodes fail, and anchors/aliases are refused (no expansion bombs). Events
//! come from `saphyr-parser`, the maintained pure-Rust YAML 1.2 parser of the yaml-rust lineage;
//! plain scalars resolve by the YAML 1.2 core schema.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};

/// The deepest nesting of sequences and mappings accepted.
pub(crate) const MAX_DEPTH: usize = 64;

/// The most nodes (scalars, sequences, mappings) one document may hold.
pub(crate) const MAX_NODES: usize = 1_000_000;

/// A container being filled: a sequence, or a mapping with the key waiting for its value.
enum Open {
    Seq(Vec<Value>),
    Map(Map<String, Value>, Option<String>),
}

/// Parse one YAML document (`origin` names it in errors) into a JSON value.
pub(crate) fn parse(text: &str, origin: &str) -> Result<Value> {
    let bad = |span: Option<Span>, why: String| {
        let at = span.map_or(String::new(), |s| {
            format!(" at line {}, column {}", s.start.line(), s.start.col() + 1)
        });
        Error::bad_input(format!("{origin}{at}: {why}"))
    };
    let mut stack: Vec<Open> = Vec::new();
    let mut done: Option<Value> = None;
    let mut nodes = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| bad(None, e.to_string()))?;
        let value = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
            Event::DocumentStart(_) => {
                if done.is_some() {
                    return Err(bad(
                        Some(span),
                        "more than one YAML document; give one".into(),
                    ));
                }
                continue;
            }
            Event::Alias(_) => {
                return Err(bad(Some(span), "aliases (*name) are not accepted".into()));
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if anchor != 0 {
                    return Err(bad(Some(span), "anchors (&name) are not accepted".into()));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(bad(
                        Some(span),
                        format!("nested deeper than {MAX_DEPTH} levels"),
                    ));
                }
                nodes += 1;
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Open::Seq(Vec::new())
                } else {
                    Open::Map(Map::new(), None)
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::Seq(items)) => Value::Array(items),
                Some(Open::Map(map, _)) => Value::Object(map),
                None => return Err(bad(Some(span), "unbalanced end of a collection".into())),
            },
            Event::Scalar(text, style, anchor, _) => {
                if anchor != 0 {
                    return Err(bad(Some(span), "anchors (&name) are not accepted".into()));
                }
                nodes += 1;
                if style == ScalarStyle::Plain {
                    plain_scalar(&text)
                } else {
                    Value::String(text.into_owned())
                }
            }
        };
        if nodes > MAX_NODES {
            return Err(bad(Some(span), format!("more than {MAX_NODES} nodes")));
        }
        match stack.last_mut() {
            None => done = Some(value),
            Some(Open::Seq(items)) => items.push(value),
            Some(Open::Map(map, key)) => match key.take() {
                None => {
                    let name = match value {
                        Value::String(s) => s,
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        Value::Null => "null".into(),
                        _ => {
                            return Err(bad(
                                Some(span),
                                "a mapping key must be a scalar, not a sequence or mapping".into(),
                            ))
                        }
                    };
                    *key = Some(name);
                }
                Some(name) => {
                    map.insert(name, value);
                }
            },
        }
    }
    Ok(done.unwrap_or(Value::Null))
}

/// A plain scalar by the YAML 1.2 core schema: null, booleans, integers (decimal, 0o, 0x),
/// floats (with .inf/.nan spelled out), else a string.
fn plain_scalar(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let integer = if let Some(hex) = text.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok().map(Number::from)
    } else if let Some(oct) = text.strip_prefix("0o") {
        u64::from_str_radix(oct, 8).ok().map(Number::from)
    } else if text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<u64>().ok().map(Number::from)
    } else if text.starts_with(['-', '+'])
        && text.len() > 1
        && text[1..].bytes().all(|b| b.is_ascii_digit())
    {
        text.parse::<i64>().ok().map(Number::from)
    } else {
        None
    };
    if let Some(n) = integer {
        return Value::Number(n);
    }
    let looks_numeric = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
        && text.bytes().any(|b| b.is_ascii_digit());
    if looks_numeric {
        if let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    // .inf and .nan have no JSON number: they stay strings, which every numeric field refuses.
    Value::String(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_as_json() {
        let v = parse(
            "groups:\n  g:\n    l3: \"60%\"\n    mb: 80\n    tasks: [1, 0x10]\n    x: ~\n    ok: true\n    f: 1.5\n",
            "plan.yaml",
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"groups": {"g": {"l3": "60%", "mb": 80, "tasks": [1, 16], "x": null, "ok": true, "f": 1.5}}})
        );
        assert_eq!(
            parse("k: '80'", "p").unwrap(),
            serde_json::json!({"k": "80"})
        );
        assert_eq!(parse("0: a", "p").unwrap(), serde_json::json!({"0": "a"}));
    }

    #[test]
    fn depth_aliases_and_syntax_errors_are_bad_input_naming_the_place() {
        let deep = "[".repeat(100_000);
        let started = std::time::Instant::now();
        let e = parse(&deep, "deep.yaml").unwrap_err();
        // saphyr's scanner has its own limit (256 flow levels) and may stop there first.
        assert!(
            e.to_string().contains("nested deeper than 64")
                || e.to_string().contains("recursion limit"),
            "{e}"
        );
        let nested = format!("{}1{}", "[".repeat(65), "]".repeat(65));
        let e = parse(&nested, "nested.yaml").unwrap_err();
        assert!(e.to_string().contains("nested deeper than 64"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let e = parse("a: &x [1]\nb: *x\n", "p.yaml").unwrap_err();
        assert!(e.to_string().contains("anchors"), "{e}");
        let e = parse("a: [1\n", "p.yaml").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("p.yaml"), "{e}");
        let e = parse("? [1]\n: 2\n", "p.yaml").unwrap_err();
        assert!(e.to_string().contains("mapping key"), "{e}");
    }
}
