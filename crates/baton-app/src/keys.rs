//! Keys: issuing one (the token is shown once; only its hash is kept), listing,
//! revoking one alone, and proving who is asking from a token.

use std::time::Duration;

use baton_core::key::{self, Key, Scope};
use baton_core::{Field, Passname, Refusal};
use baton_store::KeyIssue;

use crate::{App, Result};

/// Who a valid key proves is asking, and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub participant: Passname,
    pub scope: Scope,
    /// The key's id (never its token).
    pub key: String,
}

impl App {
    /// Issues a key for `participant` as `actor`: returns the key and its token, which is
    /// shown now and never again.
    pub async fn issue_key(
        &self,
        actor: &str,
        participant: &str,
        scope: Scope,
        expires_in: Option<Duration>,
    ) -> Result<(Key, String)> {
        let participant = Passname::new(participant).map_err(|error| Refusal::Name {
            field: Field::Name,
            error,
        })?;
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| {
            baton_store::StoreError::Engine(format!("no randomness for a key: {e}"))
        })?;
        let id = baton_store::new_id().to_string().to_lowercase();
        let token = key::token(&id, &secret);
        let expires_at = expires_in.map(|d| {
            self.now()
                .saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        });
        let issued = self
            .store()
            .issue_key(
                actor,
                KeyIssue {
                    id,
                    participant,
                    scope,
                    hash: key::hash(&token),
                    expires_at,
                },
            )
            .await?;
        Ok((issued, token))
    }

    /// Every key issued in the project, oldest first.
    pub async fn keys(&self) -> Result<Vec<Key>> {
        self.store().keys().await
    }

    /// Revokes the key `id` names ([`App::resolve`]) alone, as `actor`.
    pub async fn revoke_key(&self, actor: &str, id: &str) -> Result<Key> {
        let id = self.resolve(baton_core::Record::Key, id).await?;
        self.store().revoke_key(actor, &id).await
    }

    /// Who `token` proves is asking. Unknown, malformed, revoked and expired tokens are all
    /// the same refusal. A use is recorded as the key's last use when the recorded one is
    /// a minute old or more.
    pub async fn authenticate(&self, token: &str) -> Result<Caller> {
        let refused = || Refusal::Unauthenticated.into();
        let Some(id) = key::token_key_id(token) else {
            return Err(refused());
        };
        let Some(found) = self.store().key(id).await? else {
            return Err(refused());
        };
        let now = self.now();
        if !key::matches(&found, token) || !found.is_live(now) {
            return Err(refused());
        }
        if found.use_worth_recording(now) {
            // A store too busy to record it loses one "last used" time (the next use a
            // minute on records it), not the caller's request.
            let _ = self.store().key_used(&found.id, now).await;
        }
        Ok(Caller {
            participant: found.participant,
            scope: found.scope,
            key: found.id,
        })
    }
}
