//! Work Orders and Work Reports: the Agent Work Layer documents
//! (`awl/work-order@0.1…0.4`, `awl/work-report@0.1…0.3`), their rules O1–O5, R1–R16 and
//! C1–C5 with the findings of the reference validator (`agent-work-layer` 0.5.0), and
//! Baton's contract extension `x-baton` with its rules B1–B9.
//!
//! Everything here is pure: text in, findings out. What needs the world (does a revision
//! exist, is a program on PATH) is asked through [`contract::Environment`], which the
//! binary implements. Nothing here panics on any input; [`parse_document`] turns bytes
//! (malformed, non-UTF-8, huge or deeply nested) into a value or one clear finding.

pub mod contract;
pub mod document;
pub mod pyre;
pub mod rules;
pub mod schema;
pub mod secrets;
pub mod stamp;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use contract::{
    Contract, ContractMode, Environment, NoEnvironment, check_order_contract,
    check_report_contract, missing_contract_fields,
};
pub use document::{OrderVersion, ReportVersion, WorkOrder, WorkReport};
pub use rules::{
    SubOrder, check_child_budgets, check_child_order, check_order, check_own_cost, check_report,
    check_sub_order,
};

/// What a finding does to the document: `invalid` rejects it; `limit` (over budget, past
/// the deadline) is recorded and expires the order.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    Invalid,
    Limit,
}

impl FindingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invalid => "invalid",
            Self::Limit => "limit",
        }
    }
}

/// One result of a check: which rule, what it does, where (a JSON Pointer into the
/// document checked, `/` for the whole document) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    pub rule: String,
    pub kind: FindingKind,
    pub path: String,
    pub message: String,
}

impl Finding {
    pub fn invalid(rule: &str, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            rule: rule.to_owned(),
            kind: FindingKind::Invalid,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Whether any finding rejects the document.
pub fn has_invalid(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.kind == FindingKind::Invalid)
}

/// Every finding on an order: O1–O5 (with C1–C5 against a parent and its other
/// sub-orders), the `x-baton` rules, and B9 when the project requires the contract. What
/// `baton handoff check`, `baton order create` and the MCP `order` tool all check.
pub fn order_findings(
    doc: &Value,
    parent: Option<(&Value, &[SubOrder<'_>])>,
    env: &dyn Environment,
    mode: ContractMode,
) -> Vec<Finding> {
    let mut f = match parent {
        Some((parent, subs)) => check_sub_order(doc, parent, subs),
        None => check_order(doc),
    };
    f.extend(check_order_contract(doc, env));
    if mode == ContractMode::Required {
        f.extend(contract::contract_required_findings(doc));
    }
    f
}

/// Every finding on a report against its order: R1–R16 (R13 with the order's
/// sub-orders), the `x-baton` rules, and B9 when the project requires the contract. What
/// `baton handoff check`, `baton order report` and the MCP `order` tool all check.
pub fn report_findings(
    doc: &Value,
    order: &Value,
    subs: &[SubOrder<'_>],
    env: &dyn Environment,
    mode: ContractMode,
) -> Vec<Finding> {
    let mut f = check_report(doc, order);
    if !f.iter().any(|x| x.rule == "R1") {
        f.extend(check_own_cost(doc, order, subs));
    }
    f.extend(check_report_contract(doc, Some(order), env));
    if mode == ContractMode::Required {
        f.extend(contract::contract_required_findings(doc));
    }
    f
}

/// Largest document Baton reads, in bytes. Larger ones are refused before parsing.
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024 * 1024;

/// The rule id of a document that could not be read at all (not JSON, not UTF-8, too
/// large, nested too deeply, not an object).
pub const UNREADABLE: &str = "B0";

/// Reads a document from bytes. Every failure is one `B0` finding at `/` saying what is
/// wrong and where; this never panics, whatever the bytes.
pub fn parse_document(bytes: &[u8]) -> Result<Value, Finding> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(Finding::invalid(
            UNREADABLE,
            "/",
            format!(
                "the document is {} bytes; the largest accepted is {MAX_DOCUMENT_BYTES}",
                bytes.len()
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Finding::invalid(
            UNREADABLE,
            "/",
            format!(
                "not UTF-8 text: invalid byte at offset {}; save the document as UTF-8",
                e.valid_up_to()
            ),
        )
    })?;
    crate::json::check_text(text, crate::json::MAX_DEPTH)
        .map_err(|problem| Finding::invalid(UNREADABLE, "/", problem.to_string()))?;
    let value: Value = serde_json::from_str(text).map_err(|e| {
        let why = if e.to_string().contains("recursion limit") {
            "nested too deeply (more than 128 levels)".to_owned()
        } else {
            format!("not JSON: {e}")
        };
        Finding::invalid(
            UNREADABLE,
            "/",
            format!("{why} (line {}, column {})", e.line(), e.column()),
        )
    })?;
    if !value.is_object() {
        return Err(Finding::invalid(
            UNREADABLE,
            "/",
            "the document must be a JSON object (a Work Order or a Work Report)",
        ));
    }
    Ok(value)
}

/// Which document a JSON object claims to be, from its `spec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    Order,
    Report,
}

impl DocumentKind {
    /// By `spec` prefix; without one, by the presence of `order_id` (a report's field).
    pub fn of(doc: &Value) -> Self {
        match doc.get("spec").and_then(Value::as_str) {
            Some(s) if s.starts_with("awl/work-report@") => Self::Report,
            Some(s) if s.starts_with("awl/work-order@") => Self::Order,
            _ if doc.get("order_id").is_some() => Self::Report,
            _ => Self::Order,
        }
    }
}

#[cfg(test)]
mod tests;
