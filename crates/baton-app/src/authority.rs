//! Authority: registering participants with a policy, changing it, and the security
//! events that record what was refused as beyond it.

use baton_core::authority::{self, Policy};
use baton_core::{Event, Field, Participant, Passname, Refusal};
use baton_store::Added;

use crate::{App, Result};

/// The newest security events a page holds at most.
pub const MAX_PAGE: u32 = 500;

/// A change to a policy as an edge received it: powers and topics by name, each replacing
/// the current one when given; `default` starts from the role's default instead of the
/// policy in force.
#[derive(Debug, Clone, Default)]
pub struct PolicyEdit {
    pub may: Option<Vec<String>>,
    pub topics: Option<Vec<String>>,
    pub default: bool,
}

impl PolicyEdit {
    fn is_empty(&self) -> bool {
        self.may.is_none() && self.topics.is_none()
    }

    /// `base` with this edit applied.
    fn apply(&self, base: Policy) -> Result<Policy> {
        let may = self.may.as_deref().map(Policy::powers).transpose()?;
        let topics = self.topics.as_deref().map(Policy::topics).transpose()?;
        Ok(base.amend(may, topics))
    }
}

fn passname(name: &str) -> Result<Passname> {
    Ok(Passname::new(name.trim()).map_err(|error| Refusal::Name {
        field: Field::Name,
        error,
    })?)
}

impl App {
    /// Registers `name` with `role`; powers or topics in `edit` set its policy (starting
    /// from the role's default), else it holds the role's default.
    pub async fn add_participant(
        &self,
        actor: &str,
        name: &str,
        role: &str,
        edit: &PolicyEdit,
    ) -> Result<Added> {
        self.add_participant_as(actor, name, role, edit, None).await
    }

    /// [`App::add_participant`], standing for the outside A2A agent `outside` when given,
    /// in one transaction.
    pub async fn add_participant_as(
        &self,
        actor: &str,
        name: &str,
        role: &str,
        edit: &PolicyEdit,
        outside: Option<baton_core::participant::OutsideAgent>,
    ) -> Result<Added> {
        let name = passname(name)?;
        let policy = match edit.is_empty() {
            true => None,
            false => Some(edit.apply(Policy::for_role(role.trim()))?),
        };
        match outside {
            None => {
                self.store()
                    .add_participant(actor, &name, role, policy)
                    .await
            }
            Some(agent) => {
                self.store()
                    .add_outside_participant(actor, &name, role, policy, agent)
                    .await
            }
        }
    }

    /// The outside A2A agent `name` stands for, if any.
    pub async fn outside_agent(
        &self,
        name: &Passname,
    ) -> Result<Option<baton_core::participant::OutsideAgent>> {
        self.store().outside_agent(name).await
    }

    /// Where the hand-over of request `request` to an outside agent stands.
    pub async fn handover(&self, request: &str) -> Result<baton_core::handover::Handover> {
        self.store().handover(request).await
    }

    /// Records a step of a hand-over as the participant `actor` (the server's loop only):
    /// `false` when the log shows another server got there first.
    pub async fn record_handover(
        &self,
        actor: &str,
        change: baton_core::handover::HandoverChange,
    ) -> Result<bool> {
        self.store().record_handover(actor, change).await
    }

    /// Every participant that stands for an outside A2A agent, and its agent.
    pub async fn outside_agents(
        &self,
    ) -> Result<Vec<(Passname, baton_core::participant::OutsideAgent)>> {
        let mut all = Vec::new();
        for p in self.store().participants().await? {
            if let Some(agent) = self.store().outside_agent(&p.name).await? {
                all.push((p.name, agent));
            }
        }
        Ok(all)
    }

    /// Changes `name`'s policy: `edit` applied to the policy in force (or, with
    /// `default`, to its role's default). `default` alone returns it to the default.
    pub async fn set_policy(
        &self,
        actor: &str,
        name: &str,
        edit: &PolicyEdit,
    ) -> Result<Participant> {
        let name = passname(name)?;
        if edit.is_empty() && !edit.default {
            return Err(Refusal::Missing(Field::Policy).into());
        }
        let current = self
            .store()
            .participant(name.as_str())
            .await?
            .ok_or_else(|| Refusal::UnknownParticipant {
                name: name.to_string(),
            })?;
        let policy = match (edit.default, edit.is_empty()) {
            (true, true) => None,
            (true, false) => Some(edit.apply(Policy::for_role(&current.role))?),
            (false, _) => Some(edit.apply(current.policy())?),
        };
        // A policy equal to the role's default is kept as the default: it follows the role.
        let policy = policy.filter(|p| *p != Policy::for_role(&current.role));
        self.store().set_policy(actor, &name, policy).await
    }

    /// The newest security events, newest first: at most `limit` (capped at
    /// [`MAX_PAGE`]), before `before_seq` when given; and the repeats counted on them.
    pub async fn security_events(
        &self,
        before_seq: Option<i64>,
        limit: u32,
    ) -> Result<(Vec<Event>, Vec<baton_store::Repeats>)> {
        let events = self
            .store()
            .events_of_kind(authority::DENIED_KIND, before_seq, limit.clamp(1, MAX_PAGE))
            .await?;
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        let repeats = self.store().repeats(&seqs).await?;
        Ok((events, repeats))
    }

    /// Records `refusal` of `who` as a security event when it is one (an edge's own
    /// refusal: a key's scope); other refusals pass.
    pub async fn record_refusal(&self, who: &Passname, refusal: &Refusal) -> Result<()> {
        if let Some(denied) = authority::denied(who, refusal) {
            self.store().record_denied(denied).await?;
        }
        Ok(())
    }

    /// Refuses `who` with `refusal`, recorded first when it is a security event: what a
    /// use case refuses before it reaches the write path is recorded as the write path
    /// records its own.
    pub(crate) async fn refuse<T>(&self, who: &Passname, refusal: Refusal) -> Result<T> {
        self.record_refusal(who, &refusal).await?;
        Err(refusal.into())
    }
}
