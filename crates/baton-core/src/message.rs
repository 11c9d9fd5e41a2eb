//! The message envelope: what a sender drafts, the checks a payload must pass at the
//! boundary before anything is stored, and the rules of a send — who it may go to and
//! when it repeats an earlier one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::delivery::{DeliveryStatus, RequestStatus};
use crate::event::SentMessage;
use crate::names::{Passname, Topic};
use crate::refusal::{Field, Refusal};
use crate::time::Millis;

/// Longest excerpt shown in a preview, in characters.
pub const EXCERPT_CHARS: usize = 160;

/// Default payload cap: 256 KiB of serialized JSON.
pub const DEFAULT_PAYLOAD_CAP: usize = 256 * 1024;

/// What a message promises. A type is a semantic promise, never a permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageType {
    /// Moves responsibility: the recipient owes a completion or a hand-back.
    Request,
    /// Moves knowledge: the recipient reads and acknowledges.
    Info,
    /// Dialogue: questions, answers, remarks.
    Message,
}

impl MessageType {
    pub const ALL: [MessageType; 3] = [Self::Request, Self::Info, Self::Message];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Info => "info",
            Self::Message => "message",
        }
    }
}

impl fmt::Display for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MessageType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("unknown message type {s:?}: use request, info or message"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum PayloadError {
    #[error("payload is not valid JSON: {0}")]
    Malformed(String),
    #[error("payload must be a JSON object, got {0}")]
    NotAnObject(#[serde(with = "crate::refusal::fixed")] crate::refusal::fixed::Word),
    #[error("payload is {size} bytes, over the cap of {cap} bytes")]
    TooLarge { size: usize, cap: usize },
    #[error("payload refused: {0}")]
    Json(#[from] crate::json::JsonProblem),
}

/// A payload that passed the boundary checks: a JSON object no larger than the cap.
///
/// `text` is its canonical serialization (keys sorted at every level), the bytes that are
/// sized and hashed, so the same object always has the same hash whatever its key order.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    object: Map<String, Value>,
    text: String,
}

impl Payload {
    /// Parses and checks raw input. The size is checked before parsing so an oversized
    /// document is refused without building it.
    pub fn parse(raw: &str, cap: usize) -> Result<Self, PayloadError> {
        if raw.len() > cap {
            return Err(PayloadError::TooLarge {
                size: raw.len(),
                cap,
            });
        }
        crate::json::check_text(raw, crate::json::MAX_DEPTH)?;
        let value: Value =
            serde_json::from_str(raw).map_err(|e| PayloadError::Malformed(e.to_string()))?;
        Self::from_value(value, cap)
    }

    /// Checks an already parsed value: its depth and size. Numbers and duplicate keys can
    /// only be checked on the text, so an edge that parses JSON itself checks the text
    /// with [`crate::json::check_text`] first.
    pub fn from_value(value: Value, cap: usize) -> Result<Self, PayloadError> {
        if crate::json::depth(&value) > crate::json::MAX_DEPTH {
            return Err(crate::json::JsonProblem::TooDeep {
                max: crate::json::MAX_DEPTH,
                path: "/".to_owned(),
            }
            .into());
        }
        let object = match value {
            Value::Object(object) => object,
            other => return Err(PayloadError::NotAnObject(json_kind(&other))),
        };
        let text = sorted(&Value::Object(object.clone())).to_string();
        if text.len() > cap {
            return Err(PayloadError::TooLarge {
                size: text.len(),
                cap,
            });
        }
        Ok(Self { object, text })
    }

    /// The `{"body": TEXT}` shortcut.
    pub fn body(text: &str, cap: usize) -> Result<Self, PayloadError> {
        Self::from_value(serde_json::json!({ "body": text }), cap)
    }

    pub fn object(&self) -> &Map<String, Value> {
        &self.object
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn size(&self) -> usize {
        self.text.len()
    }

    /// Hex blake3 of the canonical text.
    pub fn hash(&self) -> String {
        blake3::hash(self.text.as_bytes()).to_hex().to_string()
    }

    /// One line of at most [`EXCERPT_CHARS`] characters: the first human field found
    /// (`body`, `summary`, `title`, `goal`, `question`), else the compact JSON.
    pub fn excerpt(&self) -> String {
        let source = ["body", "summary", "title", "goal", "question"]
            .iter()
            .find_map(|k| self.object.get(*k).and_then(Value::as_str))
            .unwrap_or(&self.text);
        excerpt(source)
    }
}

/// Collapses whitespace to single spaces and cuts to [`EXCERPT_CHARS`] characters, ending
/// with `…` when cut.
pub fn excerpt(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= EXCERPT_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(EXCERPT_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// A copy with every object's keys in sorted order. Payloads are at most
/// [`crate::json::MAX_DEPTH`] levels deep, so the recursion is bounded.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What a sender hands to the store: everything but the id and the time, which the store
/// assigns when it commits.
#[derive(Debug, Clone)]
pub struct Draft {
    pub to: Vec<Passname>,
    pub kind: MessageType,
    pub topic: Topic,
    pub reply_to: Option<String>,
    pub payload: Payload,
    pub idempotency_key: Option<String>,
}

/// Who a reply goes to when the author names no one: the other side of the parent — its
/// sender, or its recipients when the author sent it.
pub fn reply_recipients(
    parent_from: &Passname,
    parent_to: &[Passname],
    author: &Passname,
) -> Vec<Passname> {
    if parent_from == author {
        parent_to.to_vec()
    } else {
        vec![parent_from.clone()]
    }
}

/// One recipient's status for a message, and when it was set: the time of the event that
/// set it (the send, for a status never changed since).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recipient {
    pub name: Passname,
    pub status: DeliveryStatus,
    pub changed_at: Millis,
}

/// A message without its payload: everything a preview shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Envelope {
    pub id: String,
    pub from: Passname,
    pub to: Vec<Recipient>,
    /// The pool it was sent to, if any: until claimed, `to` is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<crate::pool::Pool>,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub topic: Topic,
    pub reply_to: Option<String>,
    /// Distance from the thread's root (the root is 0).
    pub depth: u32,
    pub excerpt: String,
    pub size: u64,
    pub hash: String,
    pub created_at: Millis,
    /// The sender's own end; present for requests only.
    pub request_status: Option<RequestStatus>,
    /// Direct replies to this message.
    pub replies: u32,
    /// The idempotency key the send named: the sender's, so never serialized with the
    /// envelope; a document shows it to the sender alone.
    #[serde(skip)]
    pub idempotency_key: Option<String>,
}

impl Envelope {
    /// `who`'s delivery status, when `who` is a recipient.
    pub fn status_for(&self, who: &Passname) -> Option<DeliveryStatus> {
        self.to.iter().find(|r| &r.name == who).map(|r| r.status)
    }

    /// The recipients' names, in the order they were addressed.
    pub fn recipients(&self) -> Vec<Passname> {
        self.to.iter().map(|r| r.name.clone()).collect()
    }
}

// ---- the rules of a send ----------------------------------------------------------------

/// The recipients of `draft` as sent: each named once, in the order given. Refused when
/// there are none (but for a send to a pool, which has none until claimed), or when the
/// sender names itself.
pub fn address(from: &Passname, draft: &mut Draft, pooled: bool) -> Result<(), Refusal> {
    let mut seen: Vec<Passname> = Vec::new();
    draft.to.retain(|name| {
        let first = !seen.contains(name);
        seen.push(name.clone());
        first
    });
    if pooled {
        if !draft.to.is_empty() {
            return Err(Refusal::PoolAddress {
                field: Field::To,
                value: draft
                    .to
                    .iter()
                    .map(Passname::as_str)
                    .collect::<Vec<_>>()
                    .join(","),
                problem: crate::pool::AddressProblem::NotAlone,
            });
        }
        return Ok(());
    }
    if draft.to.is_empty() {
        return Err(Refusal::Missing(Field::To));
    }
    if draft.to.contains(from) {
        return Err(Refusal::SelfSend { name: from.clone() });
    }
    Ok(())
}

/// An earlier message from the same sender that a new send may repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prior {
    pub id: String,
    pub hash: String,
    pub kind: MessageType,
    pub topic: Topic,
    pub reply_to: Option<String>,
    pub idempotency_key: Option<String>,
    pub to: Vec<Passname>,
}

impl Prior {
    /// Whether `draft` says the same thing to the same recipients (in any order). The same
    /// text sent to someone else is a new message, not a duplicate.
    pub fn repeats(&self, draft: &Draft) -> bool {
        let mut stored: Vec<&str> = self.to.iter().map(Passname::as_str).collect();
        let mut wanted: Vec<&str> = draft.to.iter().map(Passname::as_str).collect();
        stored.sort_unstable();
        wanted.sort_unstable();
        self.hash == draft.payload.hash()
            && self.kind == draft.kind
            && self.topic == draft.topic
            && self.reply_to == draft.reply_to
            && stored == wanted
    }
}

/// Which earlier message `draft` repeats, if any.
///
/// `keyed` is the sender's earlier message with the draft's idempotency key, if any: a key
/// names one message forever, so it must repeat it exactly, or the send is a conflict.
/// Without a key, `recent` holds the sender's messages inside the duplicate window with
/// the draft's hash, type, topic and parent, newest first; the first that repeats it wins.
pub fn duplicate_of(
    draft: &Draft,
    keyed: Option<&Prior>,
    recent: &[Prior],
) -> Result<Option<String>, Refusal> {
    if let Some(key) = &draft.idempotency_key {
        return match keyed {
            None => Ok(None),
            Some(prior) if prior.repeats(draft) => Ok(Some(prior.id.clone())),
            Some(prior) => Err(Refusal::KeyReused {
                key: key.clone(),
                id: prior.id.clone(),
            }),
        };
    }
    Ok(recent
        .iter()
        .find(|prior| prior.repeats(draft))
        .map(|prior| prior.id.clone()))
}

/// The message a draft becomes once the store has given it an id (sent to `pool`, when
/// it went to one).
pub fn sent(
    id: String,
    from: &Passname,
    draft: Draft,
    pool: Option<crate::pool::Pool>,
) -> SentMessage {
    SentMessage {
        id,
        from: from.clone(),
        to: draft.to,
        pool,
        kind: draft.kind,
        topic: draft.topic,
        reply_to: draft.reply_to,
        excerpt: draft.payload.excerpt(),
        size: draft.payload.size(),
        hash: draft.payload.hash(),
        payload: draft.payload.object().clone(),
        idempotency_key: draft.idempotency_key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prior(id: &str, draft: &Draft) -> Prior {
        Prior {
            id: id.into(),
            hash: draft.payload.hash(),
            kind: draft.kind,
            topic: draft.topic.clone(),
            reply_to: draft.reply_to.clone(),
            idempotency_key: draft.idempotency_key.clone(),
            to: draft.to.clone(),
        }
    }

    fn draft(to: &[&str], body: &str, key: Option<&str>) -> Draft {
        Draft {
            to: to.iter().map(|n| Passname::new(n).unwrap()).collect(),
            kind: MessageType::Request,
            topic: Topic::new("lane").unwrap(),
            reply_to: None,
            payload: Payload::body(body, 1000).unwrap(),
            idempotency_key: key.map(str::to_owned),
        }
    }

    #[test]
    fn a_repeat_is_the_same_content_to_the_same_recipients() {
        let first = draft(&["a", "b"], "x", None);
        let earlier = [prior("m1", &first)];
        let reordered = draft(&["b", "a"], "x", None);
        assert_eq!(
            duplicate_of(&reordered, None, &earlier),
            Ok(Some("m1".into()))
        );
        let elsewhere = draft(&["a"], "x", None);
        assert_eq!(duplicate_of(&elsewhere, None, &earlier), Ok(None));
        let other_text = draft(&["a", "b"], "y", None);
        assert_eq!(duplicate_of(&other_text, None, &earlier), Ok(None));
    }

    #[test]
    fn a_key_names_one_message_forever() {
        let first = draft(&["a"], "x", Some("k"));
        let keyed = prior("m1", &first);
        assert_eq!(
            duplicate_of(&first, Some(&keyed), &[]),
            Ok(Some("m1".into()))
        );
        let changed = draft(&["a"], "y", Some("k"));
        assert_eq!(
            duplicate_of(&changed, Some(&keyed), &[]),
            Err(Refusal::KeyReused {
                key: "k".into(),
                id: "m1".into()
            })
        );
        assert_eq!(
            duplicate_of(&first, None, std::slice::from_ref(&keyed)),
            Ok(None)
        );
    }

    #[test]
    fn a_send_names_each_recipient_once_and_never_its_sender() {
        let me = Passname::new("a").unwrap();
        let mut d = draft(&["b", "c", "b"], "x", None);
        address(&me, &mut d, false).unwrap();
        assert_eq!(d.to.len(), 2);
        let mut to_me = draft(&["b", "a"], "x", None);
        assert_eq!(
            address(&me, &mut to_me, false),
            Err(Refusal::SelfSend { name: me.clone() })
        );
        let mut nobody = draft(&[], "x", None);
        assert_eq!(
            address(&me, &mut nobody, false),
            Err(Refusal::Missing(Field::To))
        );
    }

    #[test]
    fn a_reply_goes_to_the_other_side() {
        let p = |n: &str| Passname::new(n).unwrap();
        let to = [p("impl-1"), p("impl-2")];
        assert_eq!(
            reply_recipients(&p("planner"), &to, &p("impl-1")),
            vec![p("planner")]
        );
        assert_eq!(
            reply_recipients(&p("planner"), &to, &p("planner")),
            to.to_vec()
        );
    }

    #[test]
    fn payload_must_be_an_object_within_the_cap() {
        assert!(matches!(
            Payload::parse("[1]", 100),
            Err(PayloadError::NotAnObject("an array"))
        ));
        assert!(matches!(
            Payload::parse("{", 100),
            Err(PayloadError::Malformed(_))
        ));
        let big = format!("{{\"body\":\"{}\"}}", "x".repeat(200));
        assert_eq!(
            Payload::parse(&big, 100),
            Err(PayloadError::TooLarge {
                size: big.len(),
                cap: 100
            })
        );
        assert!(Payload::parse(&big, 1000).is_ok());
    }

    #[test]
    fn equal_objects_hash_equally_whatever_the_key_order() {
        let a = Payload::parse(r#"{"a":1,"b":[true]}"#, 100).unwrap();
        let b = Payload::parse(r#"{ "b": [true], "a": 1 }"#, 100).unwrap();
        assert_eq!(b.text(), r#"{"a":1,"b":[true]}"#);
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.size(), b.size());
        assert_ne!(a.hash(), Payload::parse(r#"{"a":2}"#, 100).unwrap().hash());
    }

    #[test]
    fn excerpt_prefers_the_body_and_is_bounded() {
        let p = Payload::body(&"word ".repeat(100), 10_000).unwrap();
        let e = p.excerpt();
        assert_eq!(e.chars().count(), EXCERPT_CHARS);
        assert!(e.ends_with('…'));
        let q = Payload::parse(r#"{"n": 1, "title": "Fix\n the   export"}"#, 100).unwrap();
        assert_eq!(q.excerpt(), "Fix the export");
        let r = Payload::parse(r#"{"n": 1}"#, 100).unwrap();
        assert_eq!(r.excerpt(), r#"{"n":1}"#);
    }
}
