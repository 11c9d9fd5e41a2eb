//! Keys: a key names a participant and proves it. A key is issued with a scope
//! and an optional expiry, and revoked alone; only the hash of its token is recorded.
//!
//! A token is `baton_<ID>_<SECRET>`: the id finds the key, the whole token is hashed and
//! compared with the recorded hash in constant time. The secret carries 256 random bits,
//! so a fast hash (blake3) is the right one: there is nothing to guess. This module draws
//! no randomness and reads no clock: the caller passes the secret and the time.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::Passname;
use crate::refusal::{Record, Refusal};
use crate::time::Millis;

/// What a key may do.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Read the project; change nothing.
    Read,
    /// Act as its participant: send, step, record.
    Write,
    /// Also administer the project: add participants, issue and revoke keys.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Self::Read, Self::Write, Self::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether a key of this scope may do what `needed` asks for (scopes are ordered).
    pub fn allows(self, needed: Scope) -> bool {
        self >= needed
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A change to a project's keys, as recorded in the log (`key.changed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum KeyChange {
    Issued {
        id: String,
        participant: Passname,
        scope: Scope,
        /// Hex blake3 of the whole token.
        hash: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<Millis>,
    },
    Revoked {
        id: String,
    },
}

impl KeyChange {
    pub fn key(&self) -> &str {
        match self {
            Self::Issued { id, .. } | Self::Revoked { id } => id,
        }
    }
}

/// A key as the log knows it (the fold of its changes), and when it last proved its
/// participant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Key {
    pub id: String,
    pub participant: Passname,
    pub scope: Scope,
    pub hash: String,
    pub created_at: Millis,
    pub expires_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
    /// Not in the log, nor in the fold's JSON: a store keeps it beside the projection (a
    /// write per use would flood the log), to within [`USE_RECORDED_EVERY`].
    #[serde(skip)]
    #[schemars(skip)]
    pub last_used_at: Option<Millis>,
}

/// How stale a key's recorded last use may be: a use is recorded only when the last
/// recorded one is older than this, so a busy key costs a write a minute, not a request.
pub const USE_RECORDED_EVERY: Millis = 60_000;

impl Key {
    /// Whether it still proves its participant at `now`.
    pub fn is_live(&self, now: Millis) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|t| now < t)
    }

    /// Whether a use at `now` is worth recording: none is recorded yet, or the recorded one
    /// is at least [`USE_RECORDED_EVERY`] old.
    pub fn use_worth_recording(&self, now: Millis) -> bool {
        self.last_used_at
            .is_none_or(|t| now.saturating_sub(t) >= USE_RECORDED_EVERY)
    }
}

/// Applies a change recorded at `at`. Lenient, as replay must not fail.
pub fn fold(current: Option<Key>, change: &KeyChange, at: Millis) -> Option<Key> {
    match change {
        KeyChange::Issued {
            id,
            participant,
            scope,
            hash,
            expires_at,
        } => Some(Key {
            id: id.clone(),
            participant: participant.clone(),
            scope: *scope,
            hash: hash.clone(),
            created_at: at,
            expires_at: *expires_at,
            revoked_at: None,
            last_used_at: None,
        }),
        KeyChange::Revoked { .. } => current.map(|mut k| {
            k.revoked_at.get_or_insert(at);
            k
        }),
    }
}

/// Revoking key `id`, given the key: refused when there is none; `None` when it is
/// revoked already (revoking again changes nothing).
pub fn plan_revoke(current: Option<&Key>, id: &str) -> Result<Option<KeyChange>, Refusal> {
    match current {
        None => Err(Refusal::not_found(Record::Key, id)),
        Some(k) if k.revoked_at.is_some() => Ok(None),
        Some(_) => Ok(Some(KeyChange::Revoked { id: id.to_owned() })),
    }
}

/// The token prefix: a token names itself, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = "baton_";

/// A token for key `id` with `secret` (at least 32 random bytes).
pub fn token(id: &str, secret: &[u8]) -> String {
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    format!("{TOKEN_PREFIX}{id}_{hex}")
}

/// The key id a token names, when it has the token's shape.
pub fn token_key_id(token: &str) -> Option<&str> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    (!id.is_empty() && secret.len() >= 64 && secret.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(id)
}

/// The recorded form of a token.
pub fn hash(token: &str) -> String {
    blake3::hash(token.as_bytes()).to_hex().to_string()
}

/// Whether `token` is the one `key` was issued with, compared in constant time.
pub fn matches(key: &Key, token: &str) -> bool {
    let Ok(recorded) = blake3::Hash::from_hex(&key.hash) else {
        return false;
    };
    // `blake3::Hash` compares in constant time.
    blake3::hash(token.as_bytes()) == recorded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued(id: &str, token: &str, expires_at: Option<Millis>) -> Key {
        let change = KeyChange::Issued {
            id: id.into(),
            participant: Passname::new("impl-1").unwrap(),
            scope: Scope::Write,
            hash: hash(token),
            expires_at,
        };
        fold(None, &change, 100).unwrap()
    }

    #[test]
    fn a_use_is_recorded_at_first_and_then_once_a_minute_at_most() {
        let mut k = issued("k1", "t", None);
        assert!(k.use_worth_recording(1_000));
        k.last_used_at = Some(1_000);
        assert!(!k.use_worth_recording(1_000));
        assert!(!k.use_worth_recording(1_000 + USE_RECORDED_EVERY - 1));
        assert!(k.use_worth_recording(1_000 + USE_RECORDED_EVERY));
        // A clock that went back records nothing.
        assert!(!k.use_worth_recording(0));
    }

    #[test]
    fn a_token_names_its_key_and_matches_only_itself() {
        let t = token("k1", &[7u8; 32]);
        assert_eq!(token_key_id(&t), Some("k1"));
        let key = issued("k1", &t, None);
        assert!(matches(&key, &t));
        let other = token("k1", &[8u8; 32]);
        assert!(!matches(&key, &other));
        for bad in [
            "",
            "baton_",
            "baton_k1",
            "baton_k1_short",
            "bearer k1",
            "baton__00",
        ] {
            assert_eq!(token_key_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_key_lives_until_it_expires_or_is_revoked() {
        let t = token("k1", &[1u8; 32]);
        let key = issued("k1", &t, Some(1_000));
        assert!(key.is_live(999));
        assert!(!key.is_live(1_000));
        let forever = issued("k2", &t, None);
        let revoke = plan_revoke(Some(&forever), "k2").unwrap().unwrap();
        let revoked = fold(Some(forever), &revoke, 500).unwrap();
        assert!(!revoked.is_live(501));
        assert_eq!(plan_revoke(Some(&revoked), "k2"), Ok(None));
        assert_eq!(
            plan_revoke(None, "k9"),
            Err(Refusal::not_found(Record::Key, "k9"))
        );
    }

    #[test]
    fn scopes_are_ordered() {
        assert!(Scope::Admin.allows(Scope::Write));
        assert!(Scope::Write.allows(Scope::Read));
        assert!(!Scope::Read.allows(Scope::Write));
        assert!(!Scope::Write.allows(Scope::Admin));
    }
}
