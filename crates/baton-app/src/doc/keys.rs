//! Keys and projects: who a key acts as, a key as listed, issued and revoked, and the
//! projects of a shared store.

use baton_core::time::rfc3339;
use baton_core::{Millis, Passname};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who a key acts as (`GET …/me`): the command line asks it once over a server.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Caller {
    pub participant: Passname,
    pub scope: baton_core::key::Scope,
}
doc!(Caller, "baton/caller@1");

/// A key as `baton key list` shows it: never its token.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyRow {
    pub id: String,
    pub participant: Passname,
    pub scope: baton_core::key::Scope,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    /// When it last proved its participant (recorded to within a minute); `null` if never.
    pub last_used_at: Option<String>,
    /// Whether it still proves its participant now.
    pub live: bool,
}

impl KeyRow {
    pub fn new(k: &baton_core::key::Key, now: Millis) -> Self {
        Self {
            id: k.id.clone(),
            participant: k.participant.clone(),
            scope: k.scope,
            created_at: rfc3339(k.created_at),
            expires_at: k.expires_at.map(rfc3339),
            revoked_at: k.revoked_at.map(rfc3339),
            last_used_at: k.last_used_at.map(rfc3339),
            live: k.is_live(now),
        }
    }
}

/// A key just issued, with its token: shown this once, never stored.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyIssued {
    #[serde(flatten)]
    pub key: KeyRow,
    pub token: String,
}
doc!(KeyIssued, "baton/key-issue@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Keys {
    pub items: Vec<KeyRow>,
}
doc!(Keys, "baton/key-list@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyRevoked {
    #[serde(flatten)]
    pub key: KeyRow,
}
doc!(KeyRevoked, "baton/key-revoke@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ProjectAdded {
    pub name: baton_core::ProjectName,
    /// False when it existed already.
    pub created: bool,
}
doc!(ProjectAdded, "baton/project-add@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Projects {
    pub items: Vec<baton_core::ProjectName>,
}
doc!(Projects, "baton/project-list@1");
