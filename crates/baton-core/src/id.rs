//! Ids as people type them: a whole id, or a prefix of one that no other id of its kind
//! shares, in either case. Message and run ids are upper-case ULIDs, order and key ids
//! lower case; whoever copies one from a table, a log or a chat should not have to care.
//!
//! This module owns the rule: how short a prefix may be, which forms of a text are looked
//! up, and which stored id a text names. A store only lists the ids in the ranges it is
//! given ([`spans`]); what they mean is decided here ([`pick`]).

use crate::refusal::{Record, Refusal};

/// The fewest characters a prefix names an id by. Fewer would mostly name a ULID's
/// timestamp, which every id of the same hour shares.
pub const MIN_PREFIX: usize = 6;

/// The most ids an ambiguous prefix lists (a store lists one more, so the refusal knows
/// there are others).
pub const CANDIDATES: usize = 8;

/// The ids `from <= id < to`, compared byte by byte: those that start with `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub from: String,
    pub to: String,
}

/// Where the ids `text` may name lie: those that start with it as typed, in upper case or
/// in lower case (each range once). An id equal to a form is the first id of its range.
pub fn spans(text: &str) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    for form in [
        text.to_owned(),
        text.to_ascii_uppercase(),
        text.to_ascii_lowercase(),
    ] {
        if let Some(to) = after(&form)
            && !spans.iter().any(|s| s.from == form)
        {
            spans.push(Span { from: form, to });
        }
    }
    spans
}

/// The least text greater than every text that starts with `prefix` (its last character
/// that can be, counted one up, and the rest dropped); `None` when nothing is, for an
/// empty prefix or one of the greatest characters alone.
fn after(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        // The next scalar value, past the surrogates.
        let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The one id of `record` that `text` names among `found` (the ids in its [`spans`], as
/// many as a store lists): the id equal to it (as typed, else in either case); else, when
/// `text` has at least [`MIN_PREFIX`] characters, the one id it begins. Refused when no id
/// fits ([`Refusal::NotFound`]), when several do ([`Refusal::Ambiguous`]), or when a short
/// text begins ids but equals none ([`Refusal::ShortPrefix`]).
pub fn pick(record: Record, text: &str, found: &[String]) -> Result<String, Refusal> {
    if let Some(id) = found.iter().find(|id| *id == text) {
        return Ok(id.clone());
    }
    let equal: Vec<&String> = found
        .iter()
        .filter(|id| id.eq_ignore_ascii_case(text))
        .collect();
    let begun: Vec<&String> = if equal.is_empty() {
        found
            .iter()
            .filter(|id| starts_ignoring_case(id, text))
            .collect()
    } else {
        equal
    };
    let mut begun: Vec<String> = begun.into_iter().cloned().collect();
    begun.sort();
    begun.dedup();
    let exact = begun.iter().all(|id| id.eq_ignore_ascii_case(text));
    match begun.as_slice() {
        [] => Err(Refusal::not_found(record, text)),
        [one] if exact || text.chars().count() >= MIN_PREFIX => Ok(one.clone()),
        _ if !exact && text.chars().count() < MIN_PREFIX => Err(Refusal::ShortPrefix {
            record,
            prefix: text.to_owned(),
            min: MIN_PREFIX,
        }),
        many => {
            let more = many.len() > CANDIDATES;
            Err(Refusal::Ambiguous {
                record,
                prefix: text.to_owned(),
                candidates: many.iter().take(CANDIDATES).cloned().collect(),
                more,
            })
        }
    }
}

fn starts_ignoring_case(id: &str, prefix: &str) -> bool {
    id.len() >= prefix.len()
        && id.is_char_boundary(prefix.len())
        && id[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE: &str = "01M91DDH96JFR724PQ5J6WYFQXJ";
    const SIBLING: &str = "01M91DDH98T1KCCDTPDD4W1BERY";
    const ORDER: &str = "wo_01m91ddh96jfr724pq5j6wyfqxj";

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// What a store would list for `text` among `stored`: the ids in its spans.
    fn listed(text: &str, stored: &[&str]) -> Vec<String> {
        let spans = spans(text);
        stored
            .iter()
            .filter(|id| {
                spans
                    .iter()
                    .any(|s| **id >= s.from.as_str() && **id < s.to.as_str())
            })
            .map(|id| (*id).to_owned())
            .collect()
    }

    fn named(record: Record, text: &str, stored: &[&str]) -> Result<String, Refusal> {
        pick(record, text, &listed(text, stored))
    }

    #[test]
    fn a_unique_prefix_in_either_case_names_its_id() {
        let stored = [MESSAGE, SIBLING];
        for text in ["01M91DDH96", "01m91ddh96", MESSAGE, &MESSAGE.to_lowercase()] {
            assert_eq!(
                named(Record::Message, text, &stored).as_deref(),
                Ok(MESSAGE),
                "{text}"
            );
        }
        for text in ["WO_01M91D", "wo_01m91d", &ORDER.to_uppercase()] {
            assert_eq!(
                named(Record::Order, text, &[ORDER]).as_deref(),
                Ok(ORDER),
                "{text}"
            );
        }
    }

    #[test]
    fn a_prefix_of_several_ids_is_refused_listing_them() {
        let refused = named(Record::Message, "01m91ddh", &[MESSAGE, SIBLING]).unwrap_err();
        assert_eq!(
            refused,
            Refusal::Ambiguous {
                record: Record::Message,
                prefix: "01m91ddh".into(),
                candidates: ids(&[MESSAGE, SIBLING]),
                more: false,
            }
        );
    }

    #[test]
    fn an_ambiguous_prefix_lists_a_bounded_few_and_says_there_are_more() {
        let stored: Vec<String> = (0..20).map(|n| format!("01M91DDH{n:02}")).collect();
        let refused = pick(Record::Message, "01M91D", &stored).unwrap_err();
        let Refusal::Ambiguous {
            candidates, more, ..
        } = refused
        else {
            panic!("{refused:?}");
        };
        assert_eq!(candidates.len(), CANDIDATES);
        assert!(more);
    }

    #[test]
    fn a_prefix_shorter_than_the_minimum_is_refused_as_too_short() {
        assert_eq!(
            named(Record::Message, "01M91", &[MESSAGE]),
            Err(Refusal::ShortPrefix {
                record: Record::Message,
                prefix: "01M91".into(),
                min: MIN_PREFIX,
            })
        );
    }

    #[test]
    fn a_short_id_is_named_whole_and_beats_the_longer_ids_it_begins() {
        let stored = ["wo_4", "wo_42", "wo_421"];
        assert_eq!(
            named(Record::Order, "wo_42", &stored).as_deref(),
            Ok("wo_42")
        );
        assert_eq!(named(Record::Order, "WO_4", &stored).as_deref(), Ok("wo_4"));
    }

    #[test]
    fn an_id_typed_exactly_beats_one_differing_only_in_case() {
        let stored = ["Release-Notes", "release-notes"];
        assert_eq!(
            named(Record::Order, "Release-Notes", &stored).as_deref(),
            Ok("Release-Notes")
        );
        // Other case forms are looked up in upper and in lower case only.
        assert_eq!(
            named(Record::Order, "RELEASE-NOTES", &stored).as_deref(),
            Ok("release-notes")
        );
        assert!(matches!(
            named(Record::Order, "Wo_A", &["WO_A", "wo_a"]),
            Err(Refusal::Ambiguous { .. })
        ));
    }

    #[test]
    fn text_that_begins_no_id_is_not_found() {
        for text in ["nope", "01M91DDHZZ", ""] {
            assert_eq!(
                named(Record::Message, text, &[MESSAGE]),
                Err(Refusal::not_found(Record::Message, text)),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_span_holds_exactly_the_ids_that_start_with_its_form() {
        let spans = spans("wo_");
        assert_eq!(spans[0].from, "wo_");
        assert_eq!(spans[0].to, "wo`");
        assert_eq!(spans.len(), 2, "as typed is lower case: {spans:?}");
        assert_eq!(after(&char::MAX.to_string()), None);
        assert_eq!(after("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(after("\u{D7FF}").as_deref(), Some("\u{E000}"));
    }
}
