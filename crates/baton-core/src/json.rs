//! The checks every untrusted JSON document passes at the boundary, before it is parsed
//! into a value or stored: one nesting limit, numbers kept exactly as written (or
//! refused), no duplicate keys, and no U+0000 in a string. A document that passes can be read back by every
//! reader, since each wraps it in only a few more levels than [`MAX_DEPTH`].
//!
//! The scan reads the text once and allocates only for object keys; text that is not
//! valid JSON passes it untouched, so the parser's own error is the one reported.

use std::collections::HashSet;

use serde_json::Value;

/// The deepest nesting of arrays and objects accepted in a payload, an order or a report
/// (the document itself is level 1). serde_json refuses 128 levels while parsing; readers
/// wrap a stored document in a few levels of their own (a `show` document, a JSON-RPC
/// response), so the limit keeps well clear of that.
pub const MAX_DEPTH: usize = 64;

/// Why a JSON document is refused before it is parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum JsonProblem {
    #[error("nested too deeply: more than {max} levels (at {path})")]
    TooDeep { max: usize, path: String },
    #[error("duplicate key at {path}: each key may appear once in an object")]
    DuplicateKey { path: String },
    #[error(
        "the number {number} at {path} cannot be kept exactly (integers up to 64 bits, \
         decimals up to about 17 significant digits); send it as a string"
    )]
    InexactNumber { number: String, path: String },
    /// U+0000 cannot be stored by every backend (PostgreSQL's `jsonb` and `text` refuse
    /// it), so no backend accepts it.
    #[error("a string at {path} holds U+0000 (NUL), which cannot be stored; remove it")]
    Nul { path: String },
}

enum Frame {
    Object {
        keys: HashSet<String>,
        key: Option<String>,
        expect_key: bool,
    },
    Array {
        index: usize,
    },
}

/// A JSON pointer (RFC 6901) to where the scan stands.
fn pointer(stack: &[Frame]) -> String {
    let mut out = String::new();
    for frame in stack {
        out.push('/');
        match frame {
            Frame::Object { key, .. } => out.push_str(
                &key.as_deref()
                    .unwrap_or("")
                    .replace('~', "~0")
                    .replace('/', "~1"),
            ),
            Frame::Array { index } => out.push_str(&index.to_string()),
        }
    }
    if out.is_empty() {
        return "/".to_owned();
    }
    // A path hundreds of levels long says no more than its start.
    if out.chars().count() > 80 {
        let cut: String = out.chars().take(60).collect();
        return format!("{cut}…");
    }
    out
}

/// Why a request's text is not taken at the boundary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    /// It is JSON that breaks a rule: depth (counted as the payload's), an inexact number,
    /// a repeated key, a NUL.
    #[error("{0}")]
    Refused(JsonProblem),
    /// It is not JSON: the parser's words.
    #[error("{0}")]
    NotJson(String),
}

/// The one boundary every edge holds a request's text to before anything reads it: the
/// rules of [`check_text`] over the whole text, with room for the `wrapping` levels the
/// edge puts around a payload (a body's field, a JSON-RPC frame's `params.arguments`), a
/// depth refusal naming the payload's own limit; then parsed. The byte cap is the edge's
/// to apply before (it reads the text within it).
pub fn boundary(text: &str, wrapping: usize) -> Result<Value, Unfit> {
    check_text(text, MAX_DEPTH + wrapping).map_err(|problem| {
        Unfit::Refused(match problem {
            JsonProblem::TooDeep { path, .. } => JsonProblem::TooDeep {
                max: MAX_DEPTH,
                path,
            },
            other => other,
        })
    })?;
    serde_json::from_str(text).map_err(|e| Unfit::NotJson(e.to_string()))
}

/// Checks `raw` against [`MAX_DEPTH`] (or `max_depth`), number exactness and duplicate
/// keys. Invalid JSON is left for the parser to report.
pub fn check_text(raw: &str, max_depth: usize) -> Result<(), JsonProblem> {
    check_text_where(raw, max_depth, |_| true)
}

/// [`check_text`], holding numbers to exactness and strings to having no U+0000 only where
/// `exact_at(pointer)` says — where it is stored (a JSON-RPC frame's payload, not its other
/// arguments, which their own parsers judge). A number no parser can hold (`1e400`) is
/// refused anywhere.
pub fn check_text_where(
    raw: &str,
    max_depth: usize,
    exact_at: impl Fn(&str) -> bool,
) -> Result<(), JsonProblem> {
    let bytes = raw.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => {
                if stack.len() + 1 > max_depth {
                    return Err(JsonProblem::TooDeep {
                        max: max_depth,
                        path: pointer(&stack),
                    });
                }
                stack.push(if bytes[i] == b'{' {
                    Frame::Object {
                        keys: HashSet::new(),
                        key: None,
                        expect_key: true,
                    }
                } else {
                    Frame::Array { index: 0 }
                });
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                i += 1;
            }
            b',' => {
                match stack.last_mut() {
                    Some(Frame::Array { index }) => *index += 1,
                    Some(Frame::Object { expect_key, .. }) => *expect_key = true,
                    None => {}
                }
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                let Some(token) = raw.get(start..i.min(raw.len())) else {
                    return Ok(());
                };
                if token.contains("\\u0000")
                    && serde_json::from_str::<String>(token).is_ok_and(|t| t.contains('\0'))
                    && exact_at(&pointer(&stack))
                {
                    return Err(JsonProblem::Nul {
                        path: pointer(&stack),
                    });
                }
                if let Some(Frame::Object {
                    keys,
                    key,
                    expect_key,
                }) = stack.last_mut()
                    && *expect_key
                {
                    let name =
                        serde_json::from_str::<String>(token).unwrap_or_else(|_| token.to_owned());
                    *expect_key = false;
                    *key = Some(name.clone());
                    if !keys.insert(name) {
                        return Err(JsonProblem::DuplicateKey {
                            path: pointer(&stack),
                        });
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                let number = &raw[start..i];
                if !exact(number) {
                    let path = pointer(&stack);
                    let unreadable = number.parse::<f64>().is_ok_and(|n| !n.is_finite());
                    if unreadable || exact_at(&path) {
                        return Err(JsonProblem::InexactNumber {
                            number: number.chars().take(40).collect(),
                            path,
                        });
                    }
                }
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Whether serde_json keeps the number `text` as written: an integer that fits 64 bits,
/// or a decimal whose parsed double prints back as the same decimal value.
fn exact(text: &str) -> bool {
    let integral = !text.contains(['.', 'e', 'E']);
    if integral && (text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()) {
        return true;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Number(n)) => match (decimal(text), decimal(&n.to_string())) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        },
        Ok(_) => true,
        // Out of range (`1e400`) is refused here; a malformed token is the parser's to
        // report.
        Err(_) => text.parse::<f64>().is_err(),
    }
}

/// A decimal number's value as (negative, significant digits, exponent): `12.50` and
/// `1.25e1` are both (false, "125", -1).
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = format!("{whole}{fraction}");
    let mut exponent = exponent.checked_sub(fraction.len() as i64)?;
    let trimmed = digits.trim_start_matches('0').to_owned();
    digits = trimmed;
    while digits.ends_with('0') {
        digits.pop();
        exponent += 1;
    }
    if digits.is_empty() {
        return Some((false, String::new(), 0));
    }
    Some((negative, digits, exponent))
}

/// How deeply `value` nests (a scalar is 0, `{}` is 1), without recursion.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Object(map) => {
                deepest = deepest.max(d + 1);
                stack.extend(map.values().map(|c| (c, d + 1)));
            }
            Value::Array(items) => {
                deepest = deepest.max(d + 1);
                stack.extend(items.iter().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The raw text of the top-level member `name` of a JSON object, when it is a string,
/// a number or null: how a JSON-RPC frame's `id` is found in a frame that cannot be
/// parsed (too deep, too large, a bad number).
pub fn top_level_scalar(raw: &str, name: &str) -> Option<Value> {
    let bytes = raw.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    let mut expect_key = false;
    let mut after_key = false;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => {
                if depth == 1 && after_key {
                    after_key = false;
                }
                depth += 1;
                expect_key = bytes[i] == b'{' && depth == 1;
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b',' => {
                if depth == 1 {
                    expect_key = true;
                }
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                let token = raw.get(start..i.min(raw.len()))?;
                if depth == 1 && expect_key {
                    expect_key = false;
                    after_key = serde_json::from_str::<String>(token).ok()? == name;
                } else if depth == 1 && after_key {
                    return serde_json::from_str(token).ok();
                }
            }
            b'-' | b'0'..=b'9' | b'n' if depth == 1 && after_key => {
                let start = i;
                while i < bytes.len()
                    && !matches!(bytes[i], b',' | b'}' | b' ' | b'\n' | b'\r' | b'\t')
                {
                    i += 1;
                }
                let value: Value = serde_json::from_str(&raw[start..i]).ok()?;
                return (value.is_number() || value.is_null()).then_some(value);
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!(
            "{}{}",
            "{\"a\":".repeat(levels),
            "1".to_owned() + &"}".repeat(levels)
        )
    }

    #[test]
    fn the_depth_limit_is_counted_in_levels() {
        assert_eq!(check_text(&nested(MAX_DEPTH), MAX_DEPTH), Ok(()));
        assert!(matches!(
            check_text(&nested(MAX_DEPTH + 1), MAX_DEPTH),
            Err(JsonProblem::TooDeep { max: MAX_DEPTH, .. })
        ));
        let value: Value = serde_json::from_str(&nested(5)).unwrap();
        assert_eq!(depth(&value), 5);
    }

    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        assert_eq!(
            check_text(r#"{"a":{"b":[{"x":1,"\u0078":2}]}}"#, 10),
            Err(JsonProblem::DuplicateKey {
                path: "/a/b/0/x".into()
            })
        );
        assert_eq!(check_text(r#"{"a":{"x":1},"b":{"x":2}}"#, 10), Ok(()));
        assert_eq!(check_text(r#"{"a":"a","b":["a","a"]}"#, 10), Ok(()));
    }

    #[test]
    fn a_nul_in_any_string_is_refused_but_an_escaped_backslash_is_not() {
        assert_eq!(
            check_text(r#"{"a":["ok","x\u0000y"]}"#, 10),
            Err(JsonProblem::Nul {
                path: "/a/1".into()
            })
        );
        assert!(matches!(
            check_text(r#"{"k\u0000":1}"#, 10),
            Err(JsonProblem::Nul { .. })
        ));
        // A backslash followed by the text `u0000` is not a NUL.
        assert_eq!(check_text(r#"{"a":"\\u0000"}"#, 10), Ok(()));
    }

    #[test]
    fn numbers_are_kept_exactly_or_refused() {
        for ok in [
            "1",
            "-5",
            "18446744073709551615",
            "0.1",
            "1.5e3",
            "1e2",
            "-0",
            "0.0",
            "2.50",
        ] {
            assert_eq!(check_text(&format!(r#"{{"n":{ok}}}"#), 10), Ok(()), "{ok}");
        }
        for bad in [
            "123456789012345678901234567890",
            "1e400",
            "0.12345678901234567890123",
            "1e-400",
        ] {
            assert!(
                matches!(
                    check_text(&format!(r#"{{"n":[{bad}]}}"#), 10),
                    Err(JsonProblem::InexactNumber { ref path, .. }) if path == "/n/0"
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_number_the_boundary_accepted_is_accepted_again_as_written_out() {
        // Parsed without correct rounding, `20e-200` became a double that prints as
        // `2e-199`, which parses to its neighbour: accepted once, refused written out.
        for raw in [
            "20e-200",
            "2e-199",
            "0.30000000000000004",
            "1.7976931348623157e308",
        ] {
            let value = boundary(raw, 0).unwrap_or_else(|e| panic!("{raw}: {e:?}"));
            assert_eq!(
                boundary(&value.to_string(), 0).as_ref(),
                Ok(&value),
                "{raw}"
            );
        }
    }

    #[test]
    fn a_frame_id_is_found_without_parsing_the_frame() {
        let frame = format!(r#"{{"jsonrpc":"2.0","params":{},"id":7}}"#, nested(200));
        assert_eq!(top_level_scalar(&frame, "id"), Some(Value::from(7)));
        assert_eq!(
            top_level_scalar(r#"{"id":"x","method":"m"}"#, "id"),
            Some(Value::from("x"))
        );
        assert_eq!(top_level_scalar(r#"{"a":{"id":1}}"#, "id"), None);
    }
}
