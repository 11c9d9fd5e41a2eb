//! `baton handoff check`: an order, a report against its order, or a sub-order against its
//! parent and siblings, checked by `baton_core::awl`; the findings are the answer.

use std::path::{Path, PathBuf};

use baton_app::doc::HandoffCheck;
use baton_core::awl::{
    self, ContractMode, DocumentKind, Finding, FindingKind, SubOrder, has_invalid, order_findings,
    report_findings,
};
use serde_json::Value;

use super::{CheckArgs, ContractArg, KindArg, read_document};
use crate::cli::GlobalArgs;
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::host::Workspace;
use crate::output::{Output, table};
use crate::project::Project;

pub(super) fn check(g: &GlobalArgs, args: CheckArgs) -> CommandResult<Output> {
    let project = match Project::locate(g.project.as_deref()) {
        Ok(p) => Some(p),
        Err(e) if e.kind == ErrorKind::Usage => None,
        Err(e) => return Err(e),
    };
    let mode = match args.contract {
        Some(ContractArg::Required) => ContractMode::Required,
        Some(ContractArg::Optional) => ContractMode::Optional,
        None => project
            .as_ref()
            .map_or(ContractMode::Optional, |p| p.config.contract),
    };
    let doc = match read_document(&args.file)? {
        Ok(doc) => doc,
        Err(f) => return findings_output(&args.file, None, vec![f]),
    };
    let env = Workspace::discover(project.as_ref());
    let kind = match args.kind {
        Some(KindArg::Order) => DocumentKind::Order,
        Some(KindArg::Report) => DocumentKind::Report,
        None => DocumentKind::of(&doc),
    };
    let findings = match kind {
        DocumentKind::Order => {
            if args.order.is_some() || !args.sub_order.is_empty() {
                return Err(CommandError::usage(
                    "--order and --sub-order are for checking a report; this document is an order",
                ));
            }
            match &args.parent {
                Some(parent) => {
                    let parent = read_order(parent, "--parent")?;
                    let siblings = read_sub_orders(&args.sibling, "--sibling")?;
                    let subs: Vec<SubOrder<'_>> = siblings
                        .iter()
                        .map(|(order, state)| SubOrder { order, state })
                        .collect();
                    order_findings(&doc, Some((&parent, &subs)), &env, mode)
                }
                None if !args.sibling.is_empty() => {
                    return Err(CommandError::usage(
                        "--sibling needs --parent: siblings are the parent's other sub-orders",
                    ));
                }
                None => order_findings(&doc, None, &env, mode),
            }
        }
        DocumentKind::Report => {
            let Some(order_file) = &args.order else {
                return Err(CommandError::usage(
                    "a report is checked against its order: pass --order ORDER_FILE",
                ));
            };
            if args.parent.is_some() || !args.sibling.is_empty() {
                return Err(CommandError::usage(
                    "--parent and --sibling are for checking a sub-order; this document is a report",
                ));
            }
            let order = read_order(order_file, "--order")?;
            let subs = read_sub_orders(&args.sub_order, "--sub-order")?;
            let subs: Vec<SubOrder<'_>> = subs
                .iter()
                .map(|(order, state)| SubOrder { order, state })
                .collect();
            report_findings(&doc, &order, &subs, &env, mode)
        }
    };
    findings_output(&args.file, Some(kind), findings)
}

/// The findings as output; with any `invalid` one the command exits 3 after printing them
/// (the findings are the answer either way, so they go to stdout, not to the error stream).
pub(super) fn findings_output(
    file: &Path,
    kind: Option<DocumentKind>,
    findings: Vec<Finding>,
) -> CommandResult<Output> {
    let what = match kind {
        Some(DocumentKind::Order) => "order",
        Some(DocumentKind::Report) => "report",
        None => "document",
    };
    let invalid = findings
        .iter()
        .filter(|f| f.kind == FindingKind::Invalid)
        .count();
    let limit = findings.len() - invalid;
    let human = if findings.is_empty() {
        format!("{}: {what}, no findings", file.display())
    } else {
        let rows: Vec<Vec<String>> = findings
            .iter()
            .map(|f| {
                vec![
                    f.kind.as_str().to_owned(),
                    f.rule.clone(),
                    f.path.clone(),
                    f.message.clone(),
                ]
            })
            .collect();
        format!(
            "{}: {what}, {} finding{} ({invalid} invalid, {limit} limit)\n{}",
            file.display(),
            findings.len(),
            if findings.len() == 1 { "" } else { "s" },
            table(&["KIND", "RULE", "PATH", "MESSAGE"], &rows)
        )
    };
    let out = Output::of(&HandoffCheck { findings }, human);
    // The findings are the answer either way; an invalid one also sets the exit code.
    Ok(if invalid > 0 {
        out.with_exit(ErrorKind::Refused)
    } else {
        out
    })
}

/// A document another one is checked against: it must be readable and a valid order.
fn read_order(path: &Path, role: &str) -> CommandResult<Value> {
    let doc = read_document(path)?.map_err(|f| refused_with(path, role, &[f]))?;
    let findings = awl::check_order(&doc);
    if has_invalid(&findings) {
        return Err(refused_with(path, role, &findings));
    }
    Ok(doc)
}

fn refused_with(path: &Path, role: &str, findings: &[Finding]) -> CommandError {
    let lines: Vec<String> = findings
        .iter()
        .map(|f| format!("  {} {} {}: {}", f.kind.as_str(), f.rule, f.path, f.message))
        .collect();
    CommandError::refused(format!(
        "{} ({role}) is not a valid Work Order; fix it first:\n{}",
        path.display(),
        lines.join("\n")
    ))
}

/// A sibling or sub-order file: a bare order (state `offered`) or `{"order", "state"}`.
fn read_sub_orders(paths: &[PathBuf], role: &str) -> CommandResult<Vec<(Value, String)>> {
    let mut out = Vec::new();
    for p in paths {
        let doc = read_document(p)?.map_err(|f| refused_with(p, role, &[f]))?;
        let (order, state) = match (doc.get("order"), doc.get("state").and_then(Value::as_str)) {
            (Some(order), Some(state)) if doc.as_object().is_some_and(|o| o.len() == 2) => {
                (order.clone(), state.to_owned())
            }
            _ => (doc, "offered".to_owned()),
        };
        let findings = awl::check_order(&order);
        if has_invalid(&findings) {
            return Err(refused_with(p, role, &findings));
        }
        out.push((order, state));
    }
    Ok(out)
}
