//! Free-text search: the words a message is found by, and the words a query asks for.
//!
//! Both backends index the same words (SQLite in an FTS5 table, PostgreSQL in a
//! `tsvector` with a GIN index), so a query finds the same messages on either: every word
//! of the query must start a word of the payload (its keys and its values), ignoring case.
//! A word is a run of letters and digits; everything else separates words.

use serde_json::{Map, Value};

/// The words of a payload, lowercased, separated by single spaces: its keys and every
/// string, number and boolean in it, depth first.
pub fn words(payload: &Map<String, Value>) -> String {
    let mut out = String::new();
    for (key, value) in payload {
        push_words(&mut out, key);
        value_words(&mut out, value);
    }
    out
}

fn value_words(out: &mut String, value: &Value) {
    match value {
        Value::Null => {}
        Value::Bool(b) => push_words(out, if *b { "true" } else { "false" }),
        Value::Number(n) => push_words(out, &n.to_string()),
        Value::String(s) => push_words(out, s),
        Value::Array(items) => items.iter().for_each(|v| value_words(out, v)),
        Value::Object(map) => {
            for (key, value) in map {
                push_words(out, key);
                value_words(out, value);
            }
        }
    }
}

fn push_words(out: &mut String, text: &str) {
    for word in split(text) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
}

fn split(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// The words a query asks for, lowercased; empty when it holds no letter or digit (the
/// store then compares the payload's text instead).
pub fn query_words(text: &str) -> Vec<String> {
    split(text)
        .map(|w| w.chars().flat_map(char::to_lowercase).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_payload_is_its_keys_and_values_in_lowercase_words() {
        let payload = json!({
            "body": "CSV export drops the ACTIVE filters\n(see src/export.rs)",
            "x-baton": {"stop_when": ["tests fail"], "budget": 2, "strict": true, "none": null},
        });
        assert_eq!(
            words(payload.as_object().unwrap()),
            "body csv export drops the active filters see src export rs \
             x baton stop when tests fail budget 2 strict true none"
        );
    }

    #[test]
    fn a_query_is_its_words_and_punctuation_alone_asks_for_none() {
        assert_eq!(query_words("Export, filters!"), ["export", "filters"]);
        assert_eq!(query_words("Ärger über"), ["ärger", "über"]);
        assert!(query_words("--- !!").is_empty());
    }
}
