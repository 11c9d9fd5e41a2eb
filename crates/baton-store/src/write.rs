//! The one write path: every write of every backend, written once over a [`Tx`] as a
//! method of [`Store`].
//!
//! Each write opens a transaction, reads the facts the core's planners need, asks them
//! what to append (or why not), appends it and commits. The rules — who may send to whom,
//! what repeats an earlier send, which step is legal and what reply it posts, how an order
//! and its request move together, what the reaper resurfaces, how a negotiation settles —
//! are `baton_core`'s; this
//! module only gathers facts and stores outcomes. A refusal returns before anything is
//! appended, and a transaction dropped without its commit writes nothing.

use std::future::Future;
use std::time::{SystemTime, UNIX_EPOCH};

use baton_core::after::{self, Wait};
use baton_core::authority::{self, Denied, Policy, Power};
use baton_core::effect::{self, Call, Decision, Effects, Gate};
use baton_core::event::LOCAL_OPERATOR;
use baton_core::gate::{self, GateChange};
use baton_core::key::{self, Key, KeyChange};
use baton_core::message::{self, duplicate_of};
use baton_core::negotiation::{self, Negotiation, Spec};
use baton_core::order::{self, OrderChange, OrderRequest, OrderStatus};
use baton_core::pool;
use baton_core::run::{self, RunChange};
use baton_core::state::StateOp;
use baton_core::webhook::{self, Webhook};
use baton_core::{
    Change, DeliveryStatus, Draft, Event, Field, MessageType, Millis, Participant, Passname,
    Payload, Record, Refusal, Topic, delivery, participant,
};

use crate::{
    Added, Fetched, Imported, KeyIssue, NewEvent, OrderWritten, Reaped, Result, Sent, Stepped,
    Store, StoreError, Tx, Verb,
};

pub mod pools;
pub mod reservations;

/// The store's clock: when an event is committed.
fn now() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

impl Store {
    /// Registers a participant, with `policy` when one is given (else its role's
    /// default). Adding the same name with the same role again is harmless; a policy given
    /// again that differs is set.
    pub async fn add_participant(
        &self,
        actor: &str,
        name: &Passname,
        role: &str,
        policy: Option<Policy>,
    ) -> Result<Added> {
        self.register(actor, name, role, policy, None).await
    }

    /// Sets a participant's authority policy (`None`: back to its role's default).
    pub async fn set_policy(
        &self,
        actor: &str,
        name: &Passname,
        policy: Option<Policy>,
    ) -> Result<Participant> {
        let mut tx = self.begin().await?;
        let existing = registered(tx.as_mut(), name.as_str()).await?;
        if let Some(change) = authority::plan_policy(&existing, policy)? {
            tx.append(NewEvent::new(actor, change, now())).await?;
        }
        let participant = registered(tx.as_mut(), name.as_str()).await?;
        tx.commit().await?;
        Ok(participant)
    }

    /// [`Store::add_participant`], standing for the outside A2A agent `agent`, in one
    /// transaction.
    pub async fn add_outside_participant(
        &self,
        actor: &str,
        name: &Passname,
        role: &str,
        policy: Option<Policy>,
        agent: baton_core::participant::OutsideAgent,
    ) -> Result<Added> {
        self.register(actor, name, role, policy, Some(agent)).await
    }

    /// The outside A2A agent `name` stands for, if any.
    pub async fn outside_agent(
        &self,
        name: &Passname,
    ) -> Result<Option<baton_core::participant::OutsideAgent>> {
        let events = self
            .events_about(name.as_str(), baton_core::participant::A2A_KIND)
            .await?;
        Ok(baton_core::participant::outside_agent(&events))
    }

    /// Where the hand-over of request `request` to an outside agent stands: the fold of
    /// its `handover.changed` events.
    pub async fn handover(&self, request: &str) -> Result<baton_core::handover::Handover> {
        let events = self
            .events_about(request, baton_core::handover::KIND)
            .await?;
        Ok(baton_core::handover::Handover::replay(&events))
    }

    /// Records a step of a hand-over as `actor` (the participant standing for the agent),
    /// when the core's rule admits it against what the log holds, in one transaction (read
    /// under the write lock, so two servers claiming one send find one claim): `false` when
    /// it does not (another server claimed the send first, or landed it). Only the server's
    /// loop calls this; no operation does.
    pub async fn record_handover(
        &self,
        actor: &str,
        change: baton_core::handover::HandoverChange,
    ) -> Result<bool> {
        use baton_core::handover::{self, Handover};
        let mut tx = self.begin().await?;
        require_participant(tx.as_mut(), actor).await?;
        if change.participant().as_str() != actor {
            return Err(Refusal::UnknownParticipant {
                name: actor.to_owned(),
            }
            .into());
        }
        let events = tx.events_about(change.request(), handover::KIND).await?;
        let at = now();
        if !handover::admits(&Handover::replay(&events), &change, at) {
            return Ok(false);
        }
        tx.append(NewEvent::new(actor, Change::Handover(change), at))
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records a security event: an action refused as beyond authority. The writes below
    /// record their own; an edge records those it refuses itself (a key's scope). A
    /// repeat of one recorded within the window is counted on it instead
    /// (`authority::repeat_of`): `None`.
    pub async fn record_denied(&self, denied: Denied) -> Result<Option<Event>> {
        // The newest security events are enough to find what this one repeats: a repeat is
        // of one recorded within the last minute.
        let recent = self
            .events_of_kind(authority::DENIED_KIND, None, 64)
            .await?;
        let at = now();
        if let Some(seq) = authority::repeat_of(&denied, &recent, at) {
            self.count_repeat(seq, at).await?;
            return Ok(None);
        }
        let mut tx = self.begin().await?;
        let actor = denied.participant.to_string();
        let event = tx
            .append(NewEvent::new(&actor, Change::Denied(denied), now()))
            .await?;
        tx.commit().await?;
        Ok(Some(event))
    }

    /// Stores a message from `from`, or returns the original when it is a duplicate: same
    /// idempotency key (forever), or same type, topic, payload, parent and recipients
    /// within `window_ms` milliseconds.
    pub async fn send(&self, from: &Passname, draft: Draft, window_ms: i64) -> Result<Sent> {
        self.send_to(from, None, draft, window_ms).await
    }

    /// [`Store::send`], or, with `pool`, a request to a pool: it has no recipient until a
    /// participant holding the pool's role claims it ([`Store::claim`]).
    pub async fn send_to(
        &self,
        from: &Passname,
        pool: Option<&baton_core::pool::Pool>,
        draft: Draft,
        window_ms: i64,
    ) -> Result<Sent> {
        self.recorded(from.as_str(), async {
            let mut tx = self.begin().await?;
            let (sent, _) = send_in(tx.as_mut(), from, draft, window_ms, now(), true, pool).await?;
            // A duplicate wrote nothing; committing it is harmless.
            tx.commit().await?;
            Ok(sent)
        })
        .await
    }

    /// The full message. When `reader` is a recipient whose delivery is pending, it becomes
    /// delivered in the same transaction.
    pub async fn fetch(&self, reader: Option<&Passname>, id: &str) -> Result<Fetched> {
        let missing = || Refusal::not_found(Record::Message, id);
        let (mut envelope, payload) = self.message(id).await?.ok_or_else(missing)?;
        if let Some(reader) = reader
            && envelope.status_for(reader) == Some(DeliveryStatus::Pending)
        {
            let mut tx = self.begin().await?;
            // Read again under the lock: another process may have fetched it meanwhile.
            envelope = tx.envelope(id).await?.ok_or_else(missing)?;
            if let Some(change) = delivery::plan_fetch(&envelope, reader)? {
                tx.append(NewEvent::new(reader.as_str(), change, now()))
                    .await?;
                envelope = tx.envelope(id).await?.ok_or_else(missing)?;
            }
            tx.commit().await?;
        }
        let status = reader.and_then(|r| envelope.status_for(r));
        Ok(Fetched {
            envelope,
            payload,
            status,
        })
    }

    /// A status step on a message: a recipient's step on its delivery, or the sender's
    /// step on its own end of a request. `note` (required for refuse and hand-back) is
    /// recorded and posted to the sender as a threaded reply.
    pub async fn step(
        &self,
        who: &Passname,
        id: &str,
        verb: Verb,
        note: Option<&str>,
    ) -> Result<Stepped> {
        self.recorded(who.as_str(), async {
            // A missing reason is refused before anything is read.
            delivery::note_for(verb, note)?;
            let mut tx = self.begin().await?;
            require_participant(tx.as_mut(), who.as_str()).await?;
            let envelope = tx
                .envelope(id)
                .await?
                .ok_or_else(|| Refusal::not_found(Record::Message, id))?;
            // The lifecycle first (who may take which step), then the policy.
            let plan = delivery::plan_step(&envelope, who, verb, note)?;
            if let Some(power) = authority::for_step(&envelope, who, verb) {
                authorize(tx.as_mut(), who.as_str(), power, Some(&envelope.topic)).await?;
            }
            let at = now();
            tx.append(NewEvent::new(who.as_str(), plan.change, at))
                .await?;
            let mut stepped = plan.stepped;
            if let Some(reply) = plan.reply {
                let (sent, _) = send_in(tx.as_mut(), who, reply, 0, at, false, None).await?;
                stepped.reply = Some(sent.id);
            }
            tx.commit().await?;
            Ok(stepped)
        })
        .await
    }

    /// Applies state changes in one transaction, each checked against the state left by
    /// the ones before it; returns the events written (an alert already open writes none).
    pub async fn change_state(&self, actor: &str, ops: &[StateOp]) -> Result<Vec<Event>> {
        self.recorded(actor, async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor, authority::MEMORY, None).await?;
            let written = apply_state(tx.as_mut(), actor, ops, now()).await?;
            tx.commit().await?;
            Ok(written)
        })
        .await
    }

    /// Records facts about runs in one transaction, each checked against the run's status
    /// left by the ones before it. An untracked process already recorded writes nothing.
    pub async fn record_run(&self, actor: &str, changes: &[RunChange]) -> Result<Vec<Event>> {
        self.recorded(actor, async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor, authority::MEMORY, None).await?;
            let at = now();
            let mut written = Vec::new();
            for change in changes {
                if let Some(id) = change.run() {
                    let current = tx.run(id).await?;
                    if !run::plan(current.as_ref(), change)? {
                        continue;
                    }
                }
                written.push(
                    tx.append(NewEvent::new(actor, Change::Run(change.clone()), at))
                        .await?,
                );
            }
            tx.commit().await?;
            Ok(written)
        })
        .await
    }

    /// Records an agent hook's call: spooled where the backend keeps a spool (the next
    /// writer appends it), otherwise written now.
    ///
    /// A hook's call is an observation the run's status never refuses (`run::plan` accepts
    /// every hook whatever the run), so it is planned without reading the run. `actor` is the
    /// name the hook was called with, a valid name or the local operator; who the event is
    /// recorded as is settled when it joins the log ([`settle_hook_actor`]), so a spooled hook
    /// reads nothing.
    pub async fn record_hook(&self, actor: &str, call: run::HookCall) -> Result<()> {
        let change = RunChange::Hook(call);
        if !run::plan(None, &change)? {
            return Ok(());
        }
        let mut event = NewEvent::new(actor, Change::Run(change), now());
        if self.spool(&event).await? {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        settle_hook_actor(tx.as_mut(), &mut event).await?;
        tx.append(event).await?;
        tx.commit().await
    }

    /// Records review verdicts, needs and acknowledgements in one transaction: the caller's
    /// observations (a reviewer's output, a need, an acknowledgement), appended as they are.
    pub async fn record_gate(&self, actor: &str, changes: &[GateChange]) -> Result<Vec<Event>> {
        self.recorded(actor, async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor, authority::MEMORY, None).await?;
            let at = now();
            let mut written = Vec::with_capacity(changes.len());
            for change in changes {
                written.push(
                    tx.append(NewEvent::new(actor, Change::Gate(change.clone()), at))
                        .await?,
                );
            }
            tx.commit().await?;
            Ok(written)
        })
        .await
    }

    /// Marks a registered or running run lost and, in the same transaction, resurfaces as
    /// pending the messages its participant fetched during the run (unless another of its
    /// runs is live) and raises one alert for each. `None` when the run is no longer live.
    pub async fn reap_lost(&self, actor: &str, id: &str, reason: &str) -> Result<Option<Reaped>> {
        let mut tx = self.begin().await?;
        let run = tx
            .run(id)
            .await?
            .ok_or_else(|| Refusal::not_found(Record::Run, id))?;
        // What the participant holds resurfaces only when no other run of its is live.
        let held = match run.participant.as_deref() {
            Some(who) if !tx.other_live_run(who, id).await? => {
                tx.held(who, run.registered_at).await?
            }
            _ => Vec::new(),
        };
        let Some(reap) = run::plan_reap(&run, reason, &held) else {
            return Ok(None);
        };
        let at = now();
        for change in reap.changes {
            tx.append(NewEvent::new(actor, change, at)).await?;
        }
        let alerts = apply_state(tx.as_mut(), actor, &reap.alerts, at)
            .await?
            .iter()
            .map(|e| e.change.subject().to_owned())
            .collect();
        tx.commit().await?;
        Ok(Some(Reaped {
            run: id.to_owned(),
            resurfaced: reap.resurfaced,
            alerts,
        }))
    }

    /// Offers a Work Order: sends `document` to its `to` as a `request` on `topic` and
    /// records the order (seq 1, `offered`), in one transaction. The caller validates the
    /// document (AWL and contract rules) first.
    pub async fn create_order(
        &self,
        actor: &Passname,
        topic: Topic,
        document: Payload,
    ) -> Result<OrderWritten> {
        self.recorded(actor.as_str(), async {
            let doc = serde_json::Value::Object(document.object().clone());
            let (mut created, to) = order::plan_offer(&doc, actor)?;
            let (to, pool) = match to {
                pool::Address::One(name) => (vec![name], None),
                pool::Address::Pool(pool) => (Vec::new(), Some(pool)),
            };
            let mut tx = self.begin().await?;
            order::ensure_new(tx.order(&created.order).await?.as_ref(), &created.order)?;
            let at = now();
            // The orders it waits on, as they stand now: read no more than the bound allows.
            let named = after::named(&doc);
            let mut found = Vec::new();
            for name in named.iter().take(after::MAX_AFTER) {
                found.push(tx.order(name).await?);
            }
            created.after = after::plan_offer(&created.order, &named, &found, at)?;
            let draft = Draft {
                to,
                kind: baton_core::MessageType::Request,
                topic,
                reply_to: None,
                payload: document,
                idempotency_key: None,
            };
            // No duplicate window: the order id already makes a second offer a conflict.
            let (sent, message) =
                send_in(tx.as_mut(), actor, draft, 0, at, true, pool.as_ref()).await?;
            created.message = sent.id;
            let id = created.order.clone();
            let event = tx
                .append(NewEvent::new(
                    actor.as_str(),
                    Change::Order(OrderChange::Created(Box::new(created))),
                    at,
                ))
                .await?;
            let order = order::found(tx.order(&id).await?, &id)?;
            tx.commit().await?;
            Ok(OrderWritten {
                order,
                events: message.into_iter().chain([event]).collect(),
            })
        })
        .await
    }

    /// Takes a lifecycle step as `actor`, provided the order's newest seq is still
    /// `expected_seq`: a writer that lost a race gets `Moved` and writes nothing.
    pub async fn order_step(
        &self,
        actor: &Passname,
        id: &str,
        expected_seq: i64,
        request: OrderRequest,
    ) -> Result<OrderWritten> {
        self.recorded(
            actor.as_str(),
            self.approve_or_step(actor, id, expected_seq, request, None),
        )
        .await
    }

    /// Approves the order as `actor` at `expected_seq`, provided the newest report's
    /// `effects` match what the gateway held; with `chosen`, the held effects left out are
    /// dropped. Running them is the caller's next step ([`Store::start_effect`],
    /// [`Store::finish_effect`]).
    pub async fn approve(
        &self,
        actor: &Passname,
        id: &str,
        expected_seq: i64,
        chosen: Option<&[String]>,
    ) -> Result<OrderWritten> {
        self.recorded(
            actor.as_str(),
            self.approve_or_step(actor, id, expected_seq, OrderRequest::Approve, chosen),
        )
        .await
    }

    /// Begins round `round` of a review of order `id` by `actor` with `reviewers`: refused, as
    /// [`Store::conclude_review`] would refuse it, unless `actor` may conclude it (the order's
    /// sender, never its worker: `gate::may_conclude`, holding `approve` on the order's topic;
    /// a refusal writes nothing but the security event), else its start is recorded in the
    /// same transaction — the intent, before any reviewer runs. Asked again, under the write
    /// lock, when the round is concluded.
    pub async fn begin_review(
        &self,
        actor: &Passname,
        id: &str,
        round: u32,
        reviewers: &[String],
    ) -> Result<Event> {
        self.recorded(actor.as_str(), async {
            let mut tx = self.begin().await?;
            let order = order::found(tx.order(id).await?, id)?;
            may_review_in(tx.as_mut(), actor, &order).await?;
            let change = Change::Gate(GateChange::Started {
                order: order.id.clone(),
                round,
                reviewers: reviewers.to_vec(),
            });
            let event = tx
                .append(NewEvent::new(actor.as_str(), change, now()))
                .await?;
            tx.commit().await?;
            Ok(event)
        })
        .await
    }

    /// Records a round of review in one transaction: the verdicts and conclusion in
    /// `changes` and, with `rework`, the step that sends the order back at `expected_seq`.
    /// Refused, with nothing written, unless `actor` may conclude it.
    pub async fn conclude_review(
        &self,
        actor: &Passname,
        id: &str,
        expected_seq: i64,
        changes: &[GateChange],
        rework: Option<String>,
    ) -> Result<Vec<Event>> {
        self.recorded(actor.as_str(), async {
            let mut tx = self.begin().await?;
            let order = order::found(tx.order(id).await?, id)?;
            may_review_in(tx.as_mut(), actor, &order).await?;
            let at = now();
            let mut written = Vec::with_capacity(changes.len() + 1);
            for change in changes {
                let change = Change::Gate(change.clone());
                written.push(tx.append(NewEvent::new(actor.as_str(), change, at)).await?);
            }
            if let Some(reason) = rework {
                let request = OrderRequest::Rework { reason };
                let stepped =
                    step_in(tx.as_mut(), actor, id, expected_seq, request, None, at).await?;
                written.extend(stepped.events);
            }
            tx.commit().await?;
            Ok(written)
        })
        .await
    }

    /// The gateway's call `call` on order `id` by `actor`, recorded before it is answered:
    /// forwarded (recorded as evidence), held or refused (recorded with why). Refused outright,
    /// nothing recorded, when `actor` is not the order's worker or the order is not accepted
    /// or working.
    pub async fn gateway_call(
        &self,
        actor: &Passname,
        id: &str,
        gate: &Gate,
        call: Call,
    ) -> Result<Decision> {
        self.recorded(actor.as_str(), async {
            let mut tx = self.begin().await?;
            let order = order::found(tx.order(id).await?, id)?;
            let effects = tx.effects(id).await?;
            let at = now();
            let (change, decision) =
                effect::plan_call(gate, &order, &effects, actor.as_str(), call, at)?;
            tx.append(NewEvent::new(actor.as_str(), Change::Effect(change), at))
                .await?;
            tx.commit().await?;
            Ok(decision)
        })
        .await
    }

    /// Marks the held effect `reference` of approved order `id` as started (once).
    /// A crash after this commit leaves it uncertain, never run twice.
    pub async fn start_effect(
        &self,
        actor: &Passname,
        id: &str,
        reference: &str,
    ) -> Result<Effects> {
        let mut tx = self.begin().await?;
        let order = order::found(tx.order(id).await?, id)?;
        let mut effects = tx.effects(id).await?;
        let change = effect::plan_start(&order, &effects, reference)?;
        effects.apply(&change);
        tx.append(NewEvent::new(actor.as_str(), Change::Effect(change), now()))
            .await?;
        tx.commit().await?;
        Ok(effects)
    }

    /// Records how the started effect `reference` of order `id` ended.
    pub async fn finish_effect(
        &self,
        actor: &Passname,
        id: &str,
        reference: &str,
        ok: bool,
        result: serde_json::Value,
    ) -> Result<Effects> {
        let mut tx = self.begin().await?;
        let mut effects = tx.effects(id).await?;
        let change = effect::plan_finish(id, &effects, reference, ok, result)?;
        effects.apply(&change);
        tx.append(NewEvent::new(actor.as_str(), Change::Effect(change), now()))
            .await?;
        tx.commit().await?;
        Ok(effects)
    }

    /// Imports a portable log (each event with its line number) in one transaction, as
    /// the core's [`baton_core::portable::plan`] judges it against what the log holds:
    /// all of it or, refused, none; `merge` takes another project's log.
    /// Each event keeps its id and time; one whose id the log holds already is skipped, so
    /// importing the same events twice changes nothing and two logs merge by union.
    pub async fn import(
        &self,
        lines: Vec<(usize, Event)>,
        merge: bool,
        payload_cap: usize,
    ) -> Result<Imported> {
        use baton_core::portable;
        let wants = portable::wants(&lines);
        let mut tx = self.begin().await?;
        let mut holding = portable::Holding {
            history: tx.has_event_beyond(portable::SETUP_KINDS).await?,
            ..portable::Holding::default()
        };
        for id in wants.events {
            if let Some(event) = tx.event(&id).await? {
                holding.events.insert(id, event);
            }
        }
        if let Some(first) = holding.events.values().map(|e| e.seq).min() {
            holding.since_first = tx.count_beyond_from(first, portable::SETUP_KINDS).await?;
        }
        for name in wants.participants {
            if let Some(p) = tx.participant(&name).await? {
                holding.roles.insert(name, p.role);
            }
        }
        for id in wants.messages {
            if tx.envelope(&id).await?.is_some() {
                holding.messages.insert(id);
            }
        }
        let state = tx.state().await?;
        // Alerts leave the state when acknowledged; the ids raised are `A-1` to the count.
        holding.items = state
            .decisions
            .iter()
            .map(|d| d.id.clone())
            .chain(state.constraints.iter().map(|c| c.id.clone()))
            .chain(state.notes.iter().map(|n| n.id.clone()))
            .chain((1..=state.alerts_raised).map(|n| format!("A-{n}")))
            .collect();
        let plan = portable::plan(lines, &holding, merge, payload_cap)?;
        let imported = plan.events.len();
        for event in plan.events {
            tx.append(NewEvent::from(event)).await?;
        }
        tx.commit().await?;
        Ok(Imported {
            imported,
            skipped: plan.skipped,
            left_out: plan.left_out,
            renamed: plan.renamed,
        })
    }

    /// Records key `id` for `participant` (which must be registered) with the hash of its
    /// token; the token itself is never stored.
    pub async fn issue_key(&self, actor: &str, issue: KeyIssue) -> Result<Key> {
        let mut tx = self.begin().await?;
        require_participant(tx.as_mut(), issue.participant.as_str()).await?;
        let id = issue.id.clone();
        let change = KeyChange::Issued {
            id: issue.id,
            participant: issue.participant,
            scope: issue.scope,
            hash: issue.hash,
            expires_at: issue.expires_at,
        };
        tx.append(NewEvent::new(actor, Change::Key(change), now()))
            .await?;
        let issued = tx
            .key(&id)
            .await?
            .ok_or_else(|| Refusal::not_found(Record::Key, &id))?;
        tx.commit().await?;
        Ok(issued)
    }

    /// Revokes key `id` alone; revoking it again changes nothing.
    pub async fn revoke_key(&self, actor: &str, id: &str) -> Result<Key> {
        let mut tx = self.begin().await?;
        let current = tx.key(id).await?;
        if let Some(change) = key::plan_revoke(current.as_ref(), id)? {
            tx.append(NewEvent::new(actor, Change::Key(change), now()))
                .await?;
        }
        let revoked = tx
            .key(id)
            .await?
            .ok_or_else(|| Refusal::not_found(Record::Key, id))?;
        tx.commit().await?;
        Ok(revoked)
    }

    /// Sets `participant`'s webhook to `url` with `secret`, or removes it (`url` `None`);
    /// returns the webhook now.
    pub async fn set_webhook(
        &self,
        actor: &str,
        participant: &Passname,
        url: Option<&str>,
        secret: String,
    ) -> Result<Option<Webhook>> {
        let mut tx = self.begin().await?;
        require_participant(tx.as_mut(), participant.as_str()).await?;
        let current = tx.webhook(participant.as_str()).await?;
        let planned = webhook::plan(
            current.as_ref().map(|w| w.url.as_str()),
            participant,
            url,
            || secret,
        )?;
        if let Some(change) = planned {
            tx.append(NewEvent::new(actor, Change::Webhook(change), now()))
                .await?;
        }
        let now_set = tx.webhook(participant.as_str()).await?;
        tx.commit().await?;
        Ok(now_set)
    }

    /// Opens the negotiation `spec` (JSON, checked by the core); refused when its id is
    /// taken.
    pub async fn open_negotiation(
        &self,
        actor: &str,
        spec: &serde_json::Value,
    ) -> Result<Negotiation> {
        self.recorded(actor, async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor, authority::MEMORY, None).await?;
            let opened = open_in(tx.as_mut(), actor, spec, now()).await?;
            tx.commit().await?;
            Ok(opened)
        })
        .await
    }

    /// Records `party`'s `position` (JSON, checked against the spec) in negotiation `id`;
    /// the last party's submission also runs the engine and records the settlement, in
    /// the same transaction, so it is recorded exactly once.
    pub async fn submit_position(
        &self,
        actor: &str,
        id: &str,
        party: &Passname,
        position: &serde_json::Value,
    ) -> Result<Negotiation> {
        self.recorded(actor, async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor, authority::MEMORY, None).await?;
            // Read under the write lock: two last submissions cannot both settle it.
            let current = tx.negotiation(id).await?;
            let submission = (party, position);
            let after =
                submit_in(tx.as_mut(), actor, current, id, submission, now(), false).await?;
            tx.commit().await?;
            Ok(after)
        })
        .await
    }

    /// Opens `spec` and submits every party's position, settling it, in one transaction:
    /// a refusal of any of them stores nothing.
    pub async fn negotiate(
        &self,
        actor: &str,
        spec: &serde_json::Value,
        positions: &[(Passname, serde_json::Value)],
    ) -> Result<Negotiation> {
        self.recorded(actor, async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor, authority::MEMORY, None).await?;
            let at = now();
            let mut current = open_in(tx.as_mut(), actor, spec, at).await?;
            let id = current.id().to_owned();
            for (party, position) in positions {
                let submission = (party, position);
                current =
                    submit_in(tx.as_mut(), actor, Some(current), &id, submission, at, true).await?;
            }
            tx.commit().await?;
            Ok(current)
        })
        .await
    }

    /// Runs `write`; when it is refused as a security event (an action beyond `who`'s
    /// authority), records that after, in a transaction of its own: the refused one has
    /// already been dropped, having written nothing.
    async fn recorded<T>(&self, who: &str, write: impl Future<Output = Result<T>>) -> Result<T> {
        let result = write.await;
        if let Err(StoreError::Refused(refusal)) = &result
            && let Ok(who) = Passname::new(who)
            && let Some(denied) = authority::denied(&who, refusal)
        {
            self.record_denied(denied).await?;
        }
        result
    }

    /// Registers `name` (standing for the outside agent `outside`, when given) in one
    /// transaction: [`Store::add_participant`] and [`Store::add_outside_participant`].
    async fn register(
        &self,
        actor: &str,
        name: &Passname,
        role: &str,
        policy: Option<Policy>,
        outside: Option<baton_core::participant::OutsideAgent>,
    ) -> Result<Added> {
        let mut tx = self.begin().await?;
        let existing = tx.participant(name.as_str()).await?;
        let created = existing.is_none();
        let mut changes = participant::plan_add(existing.as_ref(), name, role, policy)?;
        let policy_set = changes
            .iter()
            .any(|c| matches!(c, Change::PolicySet { .. }));
        // The outside agent it stands for, in the same transaction: never registered without it.
        if let Some(agent) = outside {
            let events = tx
                .events_about(name.as_str(), baton_core::participant::A2A_KIND)
                .await?;
            let current = baton_core::participant::outside_agent(&events);
            changes.extend(baton_core::participant::plan_outside(
                current.as_ref(),
                name,
                agent,
            ));
        }
        let at = now();
        for change in changes {
            tx.append(NewEvent::new(actor, change, at)).await?;
        }
        let participant = registered(tx.as_mut(), name.as_str()).await?;
        tx.commit().await?;
        Ok(Added {
            participant,
            created,
            policy_set,
        })
    }

    /// An order's step (an approval with its `chosen` effects) in a transaction of its own.
    async fn approve_or_step(
        &self,
        actor: &Passname,
        id: &str,
        expected_seq: i64,
        request: OrderRequest,
        chosen: Option<&[String]>,
    ) -> Result<OrderWritten> {
        let mut tx = self.begin().await?;
        let written = step_in(tx.as_mut(), actor, id, expected_seq, request, chosen, now()).await?;
        tx.commit().await?;
        Ok(written)
    }
}

async fn registered(tx: &mut dyn Tx, name: &str) -> Result<Participant> {
    match tx.participant(name).await? {
        Some(p) => Ok(p),
        None => Err(Refusal::UnknownParticipant {
            name: name.to_owned(),
        }
        .into()),
    }
}

async fn require_participant(tx: &mut dyn Tx, name: &str) -> Result<()> {
    registered(tx, name).await.map(drop)
}

/// Whether `who` may use `power` (on `topic`, for a write that has one), asked before
/// anything is appended: a refusal leaves the transaction empty. The machine's own actors
/// (`@local`, the reaper) hold every power; anyone else must be registered.
async fn authorize(tx: &mut dyn Tx, who: &str, power: Power, topic: Option<&Topic>) -> Result<()> {
    if authority::is_machine(who) {
        return Ok(());
    }
    let participant = registered(tx, who).await?;
    Ok(authority::authorize(&participant, power, topic)?)
}

/// The send path, inside the caller's transaction: checks the sender's authority (but for
/// a step's own reply, which the step's authority covers), the recipients and the parent,
/// returns the original of a duplicate, else appends the message. `send`, a step's reply
/// and an order's offer all come through here.
async fn send_in(
    tx: &mut dyn Tx,
    from: &Passname,
    mut draft: Draft,
    window_ms: i64,
    at: Millis,
    checked: bool,
    pool: Option<&pool::Pool>,
) -> Result<(Sent, Option<Event>)> {
    message::address(from, &mut draft, pool.is_some())?;
    if checked {
        let power = authority::for_send(draft.kind);
        authorize(tx, from.as_str(), power, Some(&draft.topic)).await?;
    } else {
        require_participant(tx, from.as_str()).await?;
    }
    for to in &draft.to {
        let recipient = registered(tx, to.as_str()).await?;
        authority::deliverable(&recipient, draft.kind, &draft.topic)?;
    }
    if let Some(pool) = pool {
        let everyone = tx.participants().await?;
        let mut known: Vec<String> = everyone.iter().map(|p| p.role.clone()).collect();
        known.sort();
        known.dedup();
        let members: Vec<Participant> = everyone
            .into_iter()
            .filter(|p| p.role == pool.role() && p.name != *from)
            .collect();
        pool::sendable(pool, draft.kind, &draft.topic, &members, &known)?;
    }
    if let Some(parent) = &draft.reply_to
        && tx.envelope(parent).await?.is_none()
    {
        return Err(Refusal::not_found(Record::Parent, parent).into());
    }
    let keyed = match &draft.idempotency_key {
        Some(key) => tx.keyed(from, key).await?,
        None => None,
    };
    let recent = if draft.idempotency_key.is_none() && window_ms > 0 {
        tx.recent(from, &draft, at - window_ms).await?
    } else {
        Vec::new()
    };
    let repeated = match duplicate_of(&draft, keyed.as_ref(), &recent)? {
        // A send to a pool repeats one to the same pool only (the two have no recipient).
        Some(id) if pool.is_some() => {
            let query = crate::PoolQuery {
                message: Some(id.clone()),
                ..crate::PoolQuery::default()
            };
            let earlier = tx.pool_items(&query).await?.pop().map(|i| i.pool);
            (earlier.as_ref() == pool).then_some(id)
        }
        other => other,
    };
    if let Some(id) = repeated {
        return Ok((
            Sent {
                id,
                duplicate: true,
            },
            None,
        ));
    }
    // The message and its event share one id: on SQLite the message's row, indexed by id,
    // is how the event is found by its id (migration 15).
    let id = crate::new_id().to_string();
    let sent = message::sent(id.clone(), from, draft, pool.cloned());
    let event = tx
        .append(NewEvent {
            id: id.clone(),
            at,
            actor: from.as_str().to_owned(),
            change: Change::MessageSent(Box::new(sent)),
        })
        .await?;
    Ok((
        Sent {
            id,
            duplicate: false,
        },
        Some(event),
    ))
}

/// Plans `ops` in order against the state the ones before leave, appending each change.
async fn apply_state(
    tx: &mut dyn Tx,
    actor: &str,
    ops: &[StateOp],
    at: Millis,
) -> Result<Vec<Event>> {
    let mut state = tx.state().await?;
    let mut written = Vec::new();
    for op in ops {
        if let Some(change) = state.plan(op)? {
            let event = tx
                .append(NewEvent::new(actor, Change::State(change), at))
                .await?;
            state.apply(&event);
            written.push(event);
        }
    }
    Ok(written)
}

/// Who a hook's event is recorded as: the participant it names when one is registered by
/// that name, else the local operator (a hook never fails over who called it). Settled as
/// the event joins the log: at once, or in the transaction that folds the spool holding it.
pub(crate) async fn settle_hook_actor(tx: &mut dyn Tx, event: &mut NewEvent) -> Result<()> {
    if event.actor != LOCAL_OPERATOR && tx.participant(&event.actor).await?.is_none() {
        event.actor = LOCAL_OPERATOR.to_owned();
    }
    Ok(())
}

/// An order's step inside the caller's transaction: the lifecycle first (who may take
/// which step), then the effects, then the policy; then the steps, what they do to the
/// effects, and the carrying request following the order.
async fn step_in(
    tx: &mut dyn Tx,
    actor: &Passname,
    id: &str,
    expected_seq: i64,
    request: OrderRequest,
    chosen: Option<&[String]>,
    at: Millis,
) -> Result<OrderWritten> {
    let current = order::found(tx.order(id).await?, id)?;
    let mut powers: Vec<Power> = authority::for_order(&request).into_iter().collect();
    let approving = request == OrderRequest::Approve;
    let waits = waits_of(tx, &current, at).await?;
    let steps = after::plan(&current, &waits, actor.as_str(), request, expected_seq, at)?;
    // Who waits on this order, read before its end takes their edges away.
    let waiting = if steps.iter().any(|s| s.status.is_terminal()) {
        tx.waiting_on(id).await?
    } else {
        Vec::new()
    };
    let effects = tx.effects(id).await?;
    let mut follow = Vec::new();
    if approving {
        let history = tx.events_about(id, "order.changed").await?;
        let reported = order::newest_report(&history)
            .and_then(|r| r.get("effects").and_then(|e| e.as_array()).cloned())
            .unwrap_or_default();
        follow.extend(effect::plan_approval(id, &reported, &effects, chosen)?);
        if effects.awaiting() > 0 {
            powers.push(Power::Effects);
        }
    } else if let Some(step) = steps.iter().find(|s| effect::drops_on(s.action)) {
        let why = format!("order {id} {}", step.status.as_str());
        follow.extend(effect::plan_drop(id, &effects, &why));
    }
    if !powers.is_empty() {
        let carrier = carrier_topic(tx, &current).await?;
        for power in powers {
            authorize(tx, actor.as_str(), power, Some(&carrier)).await?;
        }
    }
    let mut events = Vec::new();
    for step in steps {
        let change = Change::Order(OrderChange::Stepped(Box::new(step)));
        events.push(tx.append(NewEvent::new(actor.as_str(), change, at)).await?);
    }
    for change in follow {
        tx.append(NewEvent::new(actor.as_str(), Change::Effect(change), at))
            .await?;
    }
    let order = order::found(tx.order(id).await?, id)?;
    reservations::follow_order(tx, actor.as_str(), &current, &order, at).await?;
    // The request that carried the order follows it; `events` stays the order's own.
    let request = tx
        .envelope(&order.message)
        .await?
        .ok_or_else(|| Refusal::not_found(Record::Message, &order.message))?;
    for change in order::follow_request(&order, &request)? {
        tx.append(NewEvent::new(actor.as_str(), change, at)).await?;
    }
    follow_waiting(tx, actor, &order, waiting, at).await?;
    Ok(OrderWritten { order, events })
}

/// What `order` still waits on, as it stands at `at` (nothing, once offered).
async fn waits_of(tx: &mut dyn Tx, order: &order::Order, at: Millis) -> Result<Vec<Wait>> {
    if !matches!(order.status, OrderStatus::Waiting | OrderStatus::Held) {
        return Ok(Vec::new());
    }
    Ok(tx
        .waits(std::slice::from_ref(&order.id))
        .await?
        .iter()
        .map(|(_, o)| Wait::of(o, at))
        .collect())
}

/// The orders `waiting` on `ended`, which a step just closed: each released or held
/// (`after::follow`), in the step's transaction; the sender of one held is told why, in
/// an `info` on the topic its order was offered on (unless it ended the order itself, or
/// may not receive there: its queue shows the decision either way).
async fn follow_waiting(
    tx: &mut dyn Tx,
    actor: &Passname,
    ended: &order::Order,
    waiting: Vec<order::Order>,
    at: Millis,
) -> Result<()> {
    for dependent in waiting {
        let rest = waits_of(tx, &dependent, at).await?;
        for step in after::follow(ended, &[(dependent.clone(), rest)], at) {
            let held = step.action == order::OrderAction::Hold;
            let change = Change::Order(OrderChange::Stepped(Box::new(step)));
            tx.append(NewEvent::new(actor.as_str(), change, at)).await?;
            let Ok(sender) = Passname::new(&dependent.from) else {
                continue;
            };
            if !held || sender == *actor {
                continue;
            }
            let topic = carrier_topic(tx, &dependent).await?;
            let recipient = registered(tx, sender.as_str()).await?;
            if authority::deliverable(&recipient, MessageType::Info, &topic).is_err() {
                continue;
            }
            let body = serde_json::json!({ "body": after::held_notice(&dependent, ended) });
            let draft = Draft {
                to: vec![sender],
                kind: MessageType::Info,
                topic,
                reply_to: None,
                payload: Payload::from_value(body, baton_core::message::DEFAULT_PAYLOAD_CAP)
                    .map_err(|error| Refusal::Payload {
                        field: Field::Body,
                        error,
                    })?,
                idempotency_key: None,
            };
            // The step's authority covers its notice.
            send_in(tx, actor, draft, 0, at, false, None).await?;
        }
    }
    Ok(())
}

/// The topic of the request that carried `order`: the topic its authority is judged on.
async fn carrier_topic(tx: &mut dyn Tx, order: &order::Order) -> Result<Topic> {
    let carrier = tx
        .envelope(&order.message)
        .await?
        .ok_or_else(|| Refusal::not_found(Record::Message, &order.message))?;
    Ok(carrier.topic)
}

async fn may_review_in(tx: &mut dyn Tx, actor: &Passname, order: &order::Order) -> Result<()> {
    gate::may_conclude(order, actor.as_str())?;
    let topic = carrier_topic(tx, order).await?;
    authorize(tx, actor.as_str(), Power::Approve, Some(&topic)).await
}

/// Opens negotiation `spec` inside the caller's transaction.
async fn open_in(
    tx: &mut dyn Tx,
    actor: &str,
    spec: &serde_json::Value,
    at: Millis,
) -> Result<Negotiation> {
    let spec = Spec::from_value(spec)?;
    let id = spec.id.clone();
    let existing = tx.negotiation(&id).await?;
    let mut registered = Vec::new();
    for party in &spec.parties {
        if tx.participant(party.name.as_str()).await?.is_some() {
            registered.push(party.name.clone());
        }
    }
    let change = negotiation::plan_open(existing.as_ref(), spec, &registered)?;
    let event = tx.append(NewEvent::new(actor, change, at)).await?;
    // Onto the sittings before it, if any.
    Ok(Negotiation::fold(existing, &event).expect("an opened negotiation folds"))
}

/// Records a submission (and, when it is the last, the settlement) on `current`, inside the
/// caller's transaction; returns the negotiation after it. `one_go`: a position of a spec
/// run whole by `actor`, every party's handed over at once.
async fn submit_in(
    tx: &mut dyn Tx,
    actor: &str,
    current: Option<Negotiation>,
    id: &str,
    (party, position): (&Passname, &serde_json::Value),
    at: Millis,
    one_go: bool,
) -> Result<Negotiation> {
    let submitter = (!one_go).then_some(actor);
    let changes = negotiation::plan_submit(current.as_ref(), id, submitter, party, position)?;
    let mut folded = current;
    for change in changes {
        let event = tx.append(NewEvent::new(actor, change, at)).await?;
        folded = Negotiation::fold(folded, &event);
    }
    Ok(folded.expect("a submission folds onto its negotiation"))
}
