//! Negotiations: opening one, a party submitting its own position, running a
//! spec whose parties name their position files in one go, and reading one.
//!
//! The formats, the rules and the engine are `baton_core::negotiation`'s and the store
//! records each step in one transaction; this layer bounds and parses the text an edge
//! read and composes the writes. It never reads a file (the edge passes the contents), and
//! nothing it returns holds a weight, a utility or a floor: [`Negotiation`] keeps the
//! positions to itself.

use baton_core::negotiation::{self, Input, Negotiation, Spec};
use baton_core::{Passname, Record, Refusal};
use serde_json::Value;

use crate::{App, Result};

impl App {
    /// A document's text as JSON: refused over the payload cap (before parsing) or when it
    /// is not JSON, naming where.
    fn negotiation_json(&self, text: &str, input: Input) -> Result<Value> {
        negotiation::check_size(text, self.settings.payload_cap, input.clone())?;
        Ok(negotiation::parse_json(text, input)?)
    }

    fn position_json(&self, party: &Passname, text: &str) -> Result<Value> {
        let input = Input::Position {
            party: party.to_string(),
        };
        self.negotiation_json(text, input)
    }

    /// Each party of `spec` (its text) with the file its position is in, for an edge about
    /// to run it in one go: refused at the first problem of the spec, or the first party
    /// without a position file.
    pub fn position_files(&self, spec: &str) -> Result<Vec<(Passname, String)>> {
        let spec = Spec::from_value(&self.negotiation_json(spec, Input::Spec)?)?;
        Ok(spec.position_files()?)
    }

    /// Opens the negotiation `spec` (its text) as `actor`; the parties then submit.
    pub async fn open_negotiation(&self, actor: &str, spec: &str) -> Result<Negotiation> {
        let spec = self.negotiation_json(spec, Input::Spec)?;
        self.store().open_negotiation(actor, &spec).await
    }

    /// `actor` submits `party`'s `position` (its text) to negotiation `id`: its own, or an
    /// external party's. The last party's submission settles it in the same transaction.
    pub async fn submit_position(
        &self,
        actor: &Passname,
        party: &Passname,
        id: &str,
        position: &str,
    ) -> Result<Negotiation> {
        let position = self.position_json(party, position)?;
        self.store()
            .submit_position(actor.as_str(), id, party, &position)
            .await
    }

    /// Opens `spec`, submits each party's position (their texts) and settles it, in one
    /// transaction, as `actor`. The spec's problems are refused before any position's.
    pub async fn negotiate(
        &self,
        actor: &str,
        spec: &str,
        positions: &[(Passname, String)],
    ) -> Result<Negotiation> {
        let spec = self.negotiation_json(spec, Input::Spec)?;
        Spec::from_value(&spec)?;
        let positions = positions
            .iter()
            .map(|(party, text)| Ok((party.clone(), self.position_json(party, text)?)))
            .collect::<Result<Vec<_>>>()?;
        self.store().negotiate(actor, &spec, &positions).await
    }

    /// Negotiation `id` as it stands.
    pub async fn negotiation(&self, id: &str) -> Result<Negotiation> {
        self.store()
            .negotiation(id)
            .await?
            .ok_or_else(|| Refusal::not_found(Record::Negotiation, id).into())
    }
}
