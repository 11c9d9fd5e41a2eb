//! The use cases as the command line calls them: one interface ([`Cases`]) with two
//! implementations — [`Local`], `baton_app::App` over the project's own store, and
//! [`crate::remote::Remote`], the same operations as requests to a `baton serve`
//! (`BATON_URL`, `BATON_KEY`). Each operation returns the typed `baton/*@1` document the
//! command prints, so a command renders the same text from either: locally the document
//! is built here from the use case's result, remotely it is the server's answer.
//!
//! What must never be here: a rule or a flow of its own. `Local` calls one use case and
//! builds its document (as the server's handler does); `Remote` makes one request.

use async_trait::async_trait;
use baton_app::App;
use baton_app::doc::Approved;
use baton_app::doc::Doc;
use baton_app::ops::{Operation, Typed, Who};
use baton_core::event::LOCAL_OPERATOR;
use baton_core::{Passname, Refusal};
use baton_store::StoreError;
use serde_json::Value;

use crate::error::{CommandError, ErrorKind};
use crate::output::now;

/// Why an operation failed: the local store's own error (a command may word it with what
/// it knows, a file name say), or a server's answer already in the command line's terms.
#[derive(Debug)]
pub enum Failure {
    Store(StoreError),
    Command(CommandError),
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<CommandError> for Failure {
    fn from(e: CommandError) -> Self {
        Self::Command(e)
    }
}

impl From<Failure> for CommandError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Store(e) => e.into(),
            Failure::Command(e) => e,
        }
    }
}

pub type Answer<T> = Result<T, Failure>;

/// Every operation a command can make where the project is not on this machine. `me` and
/// `actor` are who acts: locally the `--as` participant (checked), remotely the key's
/// participant, which the server knows without being told.
#[async_trait]
pub trait Cases: Send + Sync {
    /// Who is acting, when anyone is: `--as` locally, the key's participant remotely.
    async fn me(&self) -> Answer<Option<Passname>>;
    /// The largest payload a send may carry.
    fn payload_cap(&self) -> usize;

    /// Runs the typed operation `op` (`baton_app::ops`) on `input` as the acting identity:
    /// locally through the dispatcher, remotely as the request its route makes. Commands
    /// call it through [`call`], with the operation's types.
    async fn dispatch(&self, op: &'static Operation, input: Value) -> Answer<Value>;

    /// Approves order `id` and runs what it holds (with `chosen`, only those), once and in
    /// order, where the upstream servers can be started: locally. Over a server an order
    /// holding effects is refused (it says where to approve it) and `chosen` is a usage
    /// error; an approval there runs nothing.
    async fn approve(
        &self,
        me: &Passname,
        id: &str,
        expect_seq: Option<i64>,
        chosen: Option<&[String]>,
    ) -> Answer<Approved>;
}

/// Runs the typed operation `T` on `input` through `cases`: its document, named as its
/// declaration says.
pub async fn call<T: Typed>(cases: &dyn Cases, input: T::Input) -> Answer<T::Output> {
    let input = serde_json::to_value(input).expect("an input serializes");
    let answer = cases.dispatch(&T::OP, input).await?;
    let mut output: T::Output = serde_json::from_value(answer).map_err(|e| {
        CommandError::new(
            ErrorKind::Failed,
            format!("the answer of `{}` is not its document: {e}", T::OP.name),
        )
    })?;
    if let Some(schema) = T::OP.typed.and_then(|d| d.schema) {
        output.named(schema);
    }
    Ok(output)
}

/// The use cases over this machine's store, acting as `--as`.
pub struct Local {
    pub app: App,
    pub as_name: Option<String>,
}

#[async_trait]
impl Cases for Local {
    async fn me(&self) -> Answer<Option<Passname>> {
        let Some(name) = &self.as_name else {
            return Ok(None);
        };
        match self.app.identify(name).await {
            Ok(me) => Ok(Some(me)),
            Err(StoreError::Refused(Refusal::UnknownParticipant { name })) => {
                Err(CommandError::new(
                    ErrorKind::NotFound,
                    format!(
                        "--as {name}: no such participant in this project; register it with \
                     `baton agent add {name} --role ROLE` (see `baton agent list`)"
                    ),
                )
                .into())
            }
            Err(StoreError::Refused(Refusal::Name { error, .. })) => {
                Err(CommandError::new(ErrorKind::NotFound, format!("--as: {error}")).into())
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn dispatch(&self, op: &'static Operation, input: Value) -> Answer<Value> {
        let me = self.me().await?;
        let actor = me.as_ref().map_or(LOCAL_OPERATOR, Passname::as_str);
        Ok(self.app.dispatch(Who::here(actor), op, input).await?)
    }

    fn payload_cap(&self) -> usize {
        self.app.settings().payload_cap
    }

    async fn approve(
        &self,
        me: &Passname,
        id: &str,
        expect_seq: Option<i64>,
        chosen: Option<&[String]>,
    ) -> Answer<Approved> {
        let upstream = baton_mcp::Upstream::new(
            self.app.settings().effect_timeout,
            self.app.settings().payload_cap,
        );
        let approval = self
            .app
            .approve(me, id, expect_seq, chosen, Some(&upstream))
            .await?;
        Ok(Approved::new(&approval, now()))
    }
}
