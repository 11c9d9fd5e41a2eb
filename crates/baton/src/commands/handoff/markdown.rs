//! `baton handoff render`: an order or a report as Markdown for a person to review (goal,
//! acceptance and stop conditions first, constraints recapped last, the JSON embedded).

use baton_app::doc::HandoffRender;
use baton_core::awl::DocumentKind;
use serde_json::Value;

use super::check::findings_output;
use super::{RenderArgs, read_document};
use crate::error::CommandResult;
use crate::output::Output;

pub(super) fn render(args: RenderArgs) -> CommandResult<Output> {
    let doc = match read_document(&args.file)? {
        Ok(doc) => doc,
        Err(f) => return findings_output(&args.file, None, vec![f]),
    };
    let markdown = match DocumentKind::of(&doc) {
        DocumentKind::Order => render_order(&doc),
        DocumentKind::Report => render_report(&doc),
    };
    let human = markdown.clone();
    Ok(Output::of(&HandoffRender { markdown }, human))
}

fn s<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn list(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn bullets(out: &mut String, items: &[String], empty: &str) {
    if items.is_empty() {
        out.push_str(&format!("- {empty}\n"));
    }
    for i in items {
        out.push_str(&format!("- {}\n", one_line(i)));
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn field_line(out: &mut String, label: &str, value: Option<&str>) {
    if let Some(v) = value {
        out.push_str(&format!("- **{label}:** {}\n", one_line(v)));
    }
}

fn amounts(v: Option<&Value>) -> String {
    let Some(Value::Object(o)) = v else {
        return "none".into();
    };
    o.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn machine_block(out: &mut String, doc: &Value) {
    out.push_str("\n## Machine-readable document\n\n```json\n");
    out.push_str(&serde_json::to_string_pretty(doc).unwrap_or_default());
    out.push_str("\n```\n");
}

fn render_order(doc: &Value) -> String {
    let mut out = String::new();
    let id = s(doc, "/id").unwrap_or("(no id)");
    out.push_str(&format!("# Work Order {id}\n\n"));
    out.push_str(&format!(
        "{} → {} · deadline {} · {}\n\n",
        s(doc, "/from").unwrap_or("?"),
        s(doc, "/to").unwrap_or("?"),
        s(doc, "/deadline").unwrap_or("?"),
        s(doc, "/spec").unwrap_or("no spec")
    ));
    out.push_str(&format!(
        "## Goal\n\n{}\n\n",
        one_line(s(doc, "/goal").unwrap_or("(none)"))
    ));
    out.push_str("## Acceptance criteria\n\n");
    let criteria: Vec<String> = doc
        .pointer("/criteria")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    format!(
                        "**{}** {}",
                        s(c, "/id").unwrap_or("?"),
                        s(c, "/text").unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    bullets(&mut out, &criteria, "(none)");
    let c = "/x-baton";
    if let Some(owner) = s(doc, &format!("{c}/acceptance/owner")) {
        out.push_str(&format!("\nAccepted by **{}**", one_line(owner)));
        let reviewers = list(doc, &format!("{c}/acceptance/reviewers"));
        if !reviewers.is_empty() {
            out.push_str(&format!(", reviewed by {}", reviewers.join(", ")));
        }
        out.push_str(".\n");
    }
    out.push_str("\n## Stop when\n\n");
    bullets(
        &mut out,
        &list(doc, &format!("{c}/stop_when")),
        "(no stop conditions given)",
    );
    if let Some(resume) = s(doc, &format!("{c}/decision/resume_at")) {
        out.push_str(&format!("\n## Start here\n\n{}\n", one_line(resume)));
    }
    if doc.pointer(&format!("{c}/context")).is_some() {
        out.push_str("\n## Context\n\n");
        for (label, key) in [
            ("Repository", "repository"),
            ("Base revision", "base_revision"),
            ("Reproduction", "reproduction"),
            ("Expected", "expected"),
        ] {
            field_line(&mut out, label, s(doc, &format!("{c}/context/{key}")));
        }
        let fixtures = list(doc, &format!("{c}/context/fixtures"));
        if !fixtures.is_empty() {
            out.push_str(&format!("- **Fixtures:** {}\n", fixtures.join(", ")));
        }
    }
    if doc.pointer(&format!("{c}/execution")).is_some() {
        out.push_str("\n## Execution\n\n");
        for (label, key) in [
            ("Operator", "operator"),
            ("Setup", "setup_command"),
            ("Test", "test_command"),
            ("Permissions", "permissions"),
        ] {
            field_line(&mut out, label, s(doc, &format!("{c}/execution/{key}")));
        }
    }
    if let Some(d) = doc.pointer(&format!("{c}/decision")) {
        out.push_str("\n## Decision\n\n");
        field_line(&mut out, "Decision", s(d, "/decision"));
        let evidence = list(d, "/evidence");
        if !evidence.is_empty() {
            out.push_str(&format!("- **Because:** {}\n", evidence.join("; ")));
        }
        if let Some(Value::Array(rejected)) = d.get("rejected") {
            for r in rejected {
                out.push_str(&format!(
                    "- **Rejected:** {} — {}\n",
                    s(r, "/option").unwrap_or("?"),
                    s(r, "/reason").unwrap_or("?")
                ));
            }
        }
        field_line(&mut out, "Rollback", s(d, "/rollback"));
    }
    if let Some(h) = doc.get("handoff") {
        out.push_str("\n## Handoff\n\n");
        field_line(&mut out, "Summary", s(h, "/summary"));
        field_line(&mut out, "Next step", s(h, "/next_step"));
        for q in list(h, "/open_questions") {
            out.push_str(&format!("- **Open question:** {}\n", one_line(&q)));
        }
    }
    let delivery = list(doc, &format!("{c}/delivery/required"));
    if !delivery.is_empty() {
        out.push_str(&format!(
            "\n## Evidence required\n\n{}\n",
            delivery.join(", ")
        ));
    }
    // The constraints again, last: a long document's middle is what readers lose.
    out.push_str("\n## Constraints (recap)\n\n");
    let allowed = list(doc, &format!("{c}/scope/allowed"));
    let excluded = list(doc, &format!("{c}/scope/excluded"));
    if !allowed.is_empty() {
        out.push_str(&format!("- **May change:** {}\n", allowed.join("; ")));
    }
    if !excluded.is_empty() {
        out.push_str(&format!("- **Must not change:** {}\n", excluded.join("; ")));
    }
    for inv in list(doc, &format!("{c}/decision/invariants")) {
        out.push_str(&format!("- **Invariant:** {}\n", one_line(&inv)));
    }
    out.push_str(&format!(
        "- **Tools:** {}\n",
        list(doc, "/tools").join(", ")
    ));
    let staged = list(doc, "/staged");
    if !staged.is_empty() {
        out.push_str(&format!(
            "- **Held until approval:** {}\n",
            staged.join(", ")
        ));
    }
    out.push_str(&format!("- **Budget:** {}\n", amounts(doc.get("budget"))));
    out.push_str(&format!(
        "- **Deadline:** {}\n",
        s(doc, "/deadline").unwrap_or("?")
    ));
    let stops = list(doc, &format!("{c}/stop_when"));
    if !stops.is_empty() {
        out.push_str(&format!("- **Stop when:** {}\n", stops.join("; ")));
    }
    machine_block(&mut out, doc);
    out
}

fn render_report(doc: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Work Report for {}\n\n{} · status **{}** · finished {}\n\n",
        s(doc, "/order_id").unwrap_or("?"),
        s(doc, "/from").unwrap_or("?"),
        s(doc, "/status").unwrap_or("?"),
        s(doc, "/finished_at").unwrap_or("?")
    ));
    out.push_str(&format!(
        "## Summary\n\n{}\n\n## Evidence per criterion\n\n",
        one_line(s(doc, "/result/summary").unwrap_or("(none)"))
    ));
    let evidence: Vec<String> = doc
        .pointer("/evidence")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    format!(
                        "**{}** ({}) {} {}",
                        s(e, "/criterion").unwrap_or("?"),
                        s(e, "/type").unwrap_or("?"),
                        s(e, "/ref").unwrap_or(""),
                        s(e, "/note").unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    bullets(&mut out, &evidence, "(no evidence)");
    for q in list(doc, "/questions") {
        out.push_str(&format!("- **Question:** {}\n", one_line(&q)));
    }
    field_line(&mut out, "Error", s(doc, "/error"));
    if let Some(ev) = doc.pointer("/x-baton/evidence") {
        out.push_str("\n## Verification record\n\n");
        for part in ["before", "after"] {
            if let Some(run) = ev.get(part) {
                out.push_str(&format!(
                    "- **{part}:** `{}` → exit {} {}\n",
                    s(run, "/command").unwrap_or("?"),
                    run.get("exit_code")
                        .map_or("unknown".to_owned(), |c| c.to_string()),
                    s(run, "/receipt")
                        .map(|r| format!("(receipt {r})"))
                        .unwrap_or_default()
                ));
            }
        }
        if let Some(Value::Array(changes)) = ev.get("change") {
            for c in changes {
                out.push_str(&format!(
                    "- **changed** {}: {}\n",
                    s(c, "/file").unwrap_or("?"),
                    s(c, "/reason").unwrap_or("?")
                ));
            }
        }
        match ev.get("uncertainty") {
            Some(Value::Array(items)) if !items.is_empty() => {
                for i in items {
                    out.push_str(&format!(
                        "- **not checked:** {}\n",
                        i.as_str().unwrap_or("?")
                    ));
                }
            }
            Some(Value::Object(_)) => out.push_str("- **not checked:** nothing (claimed)\n"),
            _ => out.push_str("- **not checked:** NOT STATED\n"),
        }
        if let Some(r) = ev.get("review") {
            out.push_str(&format!(
                "- **review:** commit {} for {}\n",
                s(r, "/commit").unwrap_or("?"),
                s(r, "/acceptance_owner").unwrap_or("?")
            ));
        }
    }
    out.push_str("\n## Cost and tools (recap)\n\n");
    out.push_str(&format!("- **Cost:** {}\n", amounts(doc.get("cost"))));
    out.push_str(&format!(
        "- **Tools used:** {}\n",
        list(doc, "/tools_used").join(", ")
    ));
    if let Some(Value::Array(effects)) = doc.get("effects") {
        for e in effects {
            out.push_str(&format!(
                "- **Runs on approval:** {} ({})\n",
                s(e, "/ref").unwrap_or("?"),
                s(e, "/tool").unwrap_or("?")
            ));
        }
    }
    machine_block(&mut out, doc);
    out
}
