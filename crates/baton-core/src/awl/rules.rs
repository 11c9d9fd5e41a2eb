//! The AWL rules: O1–O5 (orders), R1–R16 (reports against their order) and C1–C5
//! (sub-orders against their parent and siblings), with the reference's rule ids, kinds
//! and JSON Pointer paths.
//!
//! Every function takes plain JSON and never panics: a document the rule assumes valid
//! (the order a report answers, say) but is not simply contributes nothing where it is
//! malformed.

use std::cmp::Ordering;
use std::sync::LazyLock;

use serde_json::{Number, Value};

use super::schema::{self, Validator, cmp_num, pointer};
use super::stamp::{instant, later};
use super::{Finding, FindingKind};

/// The AWL Work Order schema (v0.4, reading 0.1–0.4), as published with the format.
static ORDER_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(include_str!("schemas/work-order.schema.json")).unwrap_or(Value::Null)
});
/// The AWL Work Report schema (v0.3, reading 0.1–0.3).
static REPORT_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(include_str!("schemas/work-report.schema.json")).unwrap_or(Value::Null)
});

/// Budget and cost units, in the order the reference reports them.
pub const UNITS: [&str; 4] = ["usd", "tokens", "tool_calls", "seconds"];
/// Units whose sub-order budgets add up (`seconds` is wall-clock: sub-orders run side by
/// side).
const SHARED_UNITS: [&str; 3] = ["usd", "tokens", "tool_calls"];
/// Absorbs floating-point error in sums of money, so 0.1 + 0.2 fits a budget of 0.3.
const EPSILON: f64 = 1e-9;

fn finding(
    rule: &str,
    kind: FindingKind,
    path: impl Into<String>,
    message: impl Into<String>,
) -> Finding {
    Finding {
        rule: rule.to_owned(),
        kind,
        path: path.into(),
        message: message.into(),
    }
}

/// Findings for a schema check, one per error (one per unknown field), `prefix` before
/// each path, `/` for the root.
fn schema_findings(rule: &str, errors: Vec<schema::SchemaError>, prefix: &str) -> Vec<Finding> {
    let mut flat = Vec::new();
    for e in errors {
        e.flatten(&mut flat);
    }
    let mut out = Vec::new();
    for e in flat {
        let mut path = format!("{prefix}{}", pointer(&e.path));
        if path.is_empty() {
            path = "/".to_owned();
        }
        if e.keyword == "additionalProperties" {
            for key in &e.unknown {
                out.push(finding(
                    rule,
                    FindingKind::Invalid,
                    path.clone(),
                    format!("unknown field {key:?}"),
                ));
            }
        } else {
            out.push(finding(rule, FindingKind::Invalid, path, e.message));
        }
    }
    out
}

/// Rule O1 alone: the order's shape.
pub fn order_shape(order: &Value) -> Vec<Finding> {
    schema_findings("O1", Validator::new(&ORDER_SCHEMA).errors(Some(order)), "")
}

/// Rule R1 alone: the report's shape.
pub fn report_shape(report: &Value) -> Vec<Finding> {
    schema_findings(
        "R1",
        Validator::new(&REPORT_SCHEMA).errors(Some(report)),
        "",
    )
}

fn field<'v>(doc: &'v Value, key: &str) -> Option<&'v Value> {
    doc.as_object()?.get(key).filter(|v| !v.is_null())
}

fn str_field<'v>(doc: &'v Value, key: &str) -> Option<&'v str> {
    field(doc, key)?.as_str()
}

fn array<'v>(doc: &'v Value, key: &str) -> &'v [Value] {
    field(doc, key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn strings<'v>(doc: &'v Value, key: &str) -> Vec<&'v str> {
    array(doc, key).iter().filter_map(Value::as_str).collect()
}

fn amount<'v>(doc: &'v Value, section: &str, unit: &str) -> Option<&'v Number> {
    field(doc, section)?.get(unit)?.as_number()
}

fn time_of(doc: &Value, key: &str) -> Option<i64> {
    str_field(doc, key).and_then(instant)
}

/// A caller's `output_schema`, compiled as the reference compiles it: refused when it
/// declares another dialect, breaks the 2020-12 metaschema or has a reference that does
/// not resolve.
fn compile_output_schema(schema: &Value) -> Result<Validator<'_>, String> {
    if let Some(declared) = schema.get("$schema") {
        let ok = matches!(
            declared.as_str(),
            Some(
                "https://json-schema.org/draft/2020-12/schema"
                    | "https://json-schema.org/draft/2020-12/schema#"
            )
        );
        if !ok {
            return Err("unsupported $schema; use JSON Schema 2020-12".into());
        }
    }
    if !schema::schema_is_valid(schema) {
        return Err("it breaks the JSON Schema 2020-12 metaschema".into());
    }
    let v = Validator::new(schema);
    if !v.references_resolve() {
        return Err("a $ref does not resolve (only references inside the schema do)".into());
    }
    Ok(v)
}

/// Does a concrete tool name (`server/tool`) match one of the allowed patterns?
pub fn tool_allowed(tool: &str, patterns: &[&str]) -> bool {
    let server = tool.split('/').next().unwrap_or("");
    patterns
        .iter()
        .any(|p| *p == "*" || *p == tool || p.strip_suffix("/*") == Some(server))
}

/// Is everything a child pattern allows also allowed by the parent's patterns?
pub fn pattern_covered(child: &str, parent: &[&str]) -> bool {
    if parent.contains(&"*") {
        return true;
    }
    if child == "*" {
        return false;
    }
    let parts: Vec<&str> = child.split('/').collect();
    if parts.len() > 1 && parts[1] == "*" {
        return parent.contains(&format!("{}/*", parts[0]).as_str());
    }
    tool_allowed(child, parent)
}

/// Can some tool match both patterns?
fn patterns_overlap(a: &str, b: &str) -> bool {
    if a == "*" || b == "*" || a == b {
        return true;
    }
    let (sa, ta) = a.split_once('/').unwrap_or((a, ""));
    let (sb, tb) = b.split_once('/').unwrap_or((b, ""));
    sa == sb && (ta == "*" || tb == "*")
}

/// Rules O1–O5.
pub fn check_order(order: &Value) -> Vec<Finding> {
    let shape = order_shape(order);
    if !shape.is_empty() {
        return shape;
    }
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in array(order, "criteria").iter().enumerate() {
        let Some(id) = str_field(c, "id") else {
            continue;
        };
        if seen.contains(&id) {
            out.push(finding(
                "O2",
                FindingKind::Invalid,
                format!("/criteria/{i}/id"),
                format!("duplicate criterion id {id:?}"),
            ));
        }
        seen.push(id);
    }
    let (deadline, created) = (time_of(order, "deadline"), time_of(order, "created_at"));
    if matches!((deadline, created), (Some(d), Some(c)) if d <= c) {
        out.push(finding(
            "O3",
            FindingKind::Invalid,
            "/deadline",
            "deadline must be later than created_at",
        ));
    }
    if let Some(schema) = order.get("output_schema")
        && let Err(why) = compile_output_schema(schema)
    {
        out.push(finding(
            "O4",
            FindingKind::Invalid,
            "/output_schema",
            format!("not a valid JSON Schema: {why}"),
        ));
    }
    let tools = strings(order, "tools");
    for (i, p) in strings(order, "staged").iter().enumerate() {
        if !pattern_covered(p, &tools) {
            out.push(finding(
                "O5",
                FindingKind::Invalid,
                format!("/staged/{i}"),
                format!("staged {p:?} is not covered by the order's tools"),
            ));
        }
    }
    out
}

/// An object whose members are `$ref` (a string) and, optionally, `pointer` (a string).
fn reference_of(v: &Value) -> Option<(&str, &str)> {
    let o = v.as_object()?;
    let r = o.get("$ref")?.as_str()?;
    let p = match o.get("pointer") {
        None => "",
        Some(p) => p.as_str()?,
    };
    o.keys()
        .all(|k| k == "$ref" || k == "pointer")
        .then_some((r, p))
}

/// Every reference to an earlier effect's result in an effect's arguments, in document
/// order: `(ref, pointer, path within the arguments)`.
pub fn effect_references(arguments: &Value) -> Vec<(String, String, String)> {
    fn walk(v: &Value, path: String, out: &mut Vec<(String, String, String)>, depth: usize) {
        if depth > 512 {
            return;
        }
        if let Some((r, p)) = reference_of(v) {
            out.push((r.to_owned(), p.to_owned(), path));
            return;
        }
        match v {
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, format!("{path}/{i}"), out, depth + 1);
                }
            }
            Value::Object(o) => {
                for (k, x) in o {
                    walk(
                        x,
                        format!("{path}{}", pointer(&[schema::Seg::Key(k.clone())])),
                        out,
                        depth + 1,
                    );
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(arguments, String::new(), &mut out, 0);
    out
}

fn is_call_number(n: &str) -> bool {
    n.starts_with(|c: char| ('1'..='9').contains(&c)) && n.bytes().all(|b| b.is_ascii_digit())
}

/// Rules R1–R12 and R14–R16: a report against the order it answers (assumed valid).
pub fn check_report(report: &Value, order: &Value) -> Vec<Finding> {
    let shape = report_shape(report);
    if !shape.is_empty() {
        return shape;
    }
    let mut out = Vec::new();
    let mut add =
        |rule: &str, kind, path: String, msg: String| out.push(finding(rule, kind, path, msg));
    let invalid = FindingKind::Invalid;

    let order_id = str_field(order, "id");
    if str_field(report, "order_id") != order_id {
        add(
            "R2",
            invalid,
            "/order_id".into(),
            format!("does not match order id {:?}", order_id.unwrap_or("")),
        );
    }
    let criteria: Vec<&str> = array(order, "criteria")
        .iter()
        .filter_map(|c| str_field(c, "id"))
        .collect();
    let evidence = array(report, "evidence");
    for (i, e) in evidence.iter().enumerate() {
        let c = str_field(e, "criterion").unwrap_or("");
        if !criteria.contains(&c) {
            add(
                "R3",
                invalid,
                format!("/evidence/{i}/criterion"),
                format!("unknown criterion {c:?}"),
            );
        }
    }
    let status = str_field(report, "status").unwrap_or("");
    if status == "done" {
        let proven: Vec<&str> = evidence
            .iter()
            .filter_map(|e| str_field(e, "criterion"))
            .collect();
        for c in &criteria {
            if !proven.contains(c) {
                add(
                    "R4",
                    invalid,
                    "/evidence".into(),
                    format!("no evidence for criterion {c:?}"),
                );
            }
        }
    }
    let tools = strings(order, "tools");
    for (i, t) in strings(report, "tools_used").iter().enumerate() {
        if !tool_allowed(t, &tools) {
            add(
                "R5",
                invalid,
                format!("/tools_used/{i}"),
                format!("tool {t:?} is not allowed by this order"),
            );
        }
    }
    for unit in UNITS {
        let Some(limit) = amount(order, "budget", unit) else {
            continue;
        };
        match amount(report, "cost", unit) {
            None => add(
                "R6",
                invalid,
                "/cost".into(),
                format!("cost must report {unit:?} because the budget sets it"),
            ),
            Some(spent) if cmp_num(spent, limit) == Ordering::Greater => add(
                "R7",
                FindingKind::Limit,
                format!("/cost/{unit}"),
                format!("spent {spent} {unit}, budget is {limit}"),
            ),
            Some(_) => {}
        }
    }
    if later(time_of(report, "finished_at"), time_of(order, "deadline")) {
        add(
            "R8",
            FindingKind::Limit,
            "/finished_at".into(),
            "finished after the deadline".into(),
        );
    }
    let truthy_list = |key: &str| !array(report, key).is_empty();
    if status == "blocked" && !truthy_list("questions") {
        add(
            "R9",
            invalid,
            "/questions".into(),
            "a blocked report must ask at least one question".into(),
        );
    }
    if status == "failed" && str_field(report, "error").is_none_or(str::is_empty) {
        add(
            "R10",
            invalid,
            "/error".into(),
            "a failed report must say what went wrong".into(),
        );
    }
    if status == "done"
        && let Some(schema) = order.get("output_schema")
        && let Ok(v) = compile_output_schema(schema)
    {
        let output = report.get("result").and_then(|r| r.get("output"));
        out.extend(schema_findings("R11", v.errors(output), "/result/output"));
    }
    let mut add =
        |rule: &str, kind, path: String, msg: String| out.push(finding(rule, kind, path, msg));
    if report.get("started_at").is_some()
        && later(
            time_of(report, "started_at"),
            time_of(report, "finished_at"),
        )
    {
        add(
            "R12",
            invalid,
            "/started_at".into(),
            "started_at is after finished_at".into(),
        );
    }
    let staged = strings(order, "staged");
    let mut refs: Vec<String> = Vec::new();
    for (i, e) in array(report, "effects").iter().enumerate() {
        let tool = str_field(e, "tool").unwrap_or("");
        let r = str_field(e, "ref").unwrap_or("");
        if !tool_allowed(tool, &staged) {
            add(
                "R14",
                invalid,
                format!("/effects/{i}/tool"),
                format!("tool {tool:?} is not staged by this order"),
            );
        }
        let prefix = format!("{tool}#");
        match r.strip_prefix(&prefix) {
            Some(n) if is_call_number(n) => {
                if refs.iter().any(|x| x == r) {
                    add(
                        "R15",
                        invalid,
                        format!("/effects/{i}/ref"),
                        format!("ref {r:?} appears twice"),
                    );
                }
            }
            _ => add(
                "R15",
                invalid,
                format!("/effects/{i}/ref"),
                format!("ref {r:?} is not \"{tool}#<n>\""),
            ),
        }
        for (target, ptr, path) in effect_references(e.get("arguments").unwrap_or(&Value::Null)) {
            let path = format!("/effects/{i}/arguments{path}");
            if !refs.contains(&target) {
                add(
                    "R16",
                    invalid,
                    path,
                    format!("{target:?} is not an effect listed before this one"),
                );
            } else if !ptr.is_empty() && !ptr.starts_with('/') {
                add(
                    "R16",
                    invalid,
                    path,
                    format!("{ptr:?} is not a JSON Pointer"),
                );
            }
        }
        refs.push(r.to_owned());
    }
    out
}

/// A sub-order of a parent, with the lifecycle state it is in (`declined` ones hold no
/// budget).
#[derive(Debug, Clone)]
pub struct SubOrder<'a> {
    pub order: &'a Value,
    pub state: &'a str,
}

fn as_f64(n: &Number) -> f64 {
    n.as_f64().unwrap_or(0.0)
}

/// Rounds to 9 decimal places, as the reference rounds its running sums.
fn round9(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

/// The budget an order's sub-orders hold: their budgets added up, declined ones left out.
pub fn held_by_sub_orders(sub_orders: &[SubOrder<'_>]) -> Vec<(&'static str, f64)> {
    let mut held: Vec<(&'static str, f64)> = Vec::new();
    for s in sub_orders.iter().filter(|s| s.state != "declined") {
        for unit in SHARED_UNITS {
            if let Some(n) = amount(s.order, "budget", unit) {
                match held.iter_mut().find(|(u, _)| *u == unit) {
                    Some((_, total)) => *total = round9(*total + as_f64(n)),
                    None => held.push((unit, round9(as_f64(n)))),
                }
            }
        }
    }
    held
}

fn held(held: &[(&str, f64)], unit: &str) -> f64 {
    held.iter()
        .find(|(u, _)| *u == unit)
        .map_or(0.0, |(_, v)| *v)
}

/// Rules C1–C3 and C5: a sub-order may only narrow its parent's budget, tools and
/// deadline, and may not allow a tool its parent stages. Both orders are assumed valid.
pub fn check_child_order(child: &Value, parent: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    let invalid = FindingKind::Invalid;
    for unit in UNITS {
        let Some(limit) = amount(parent, "budget", unit) else {
            continue;
        };
        match amount(child, "budget", unit) {
            None => out.push(finding(
                "C1",
                invalid,
                "/budget",
                format!("must set {unit:?} because the parent does"),
            )),
            Some(asked) if cmp_num(asked, limit) == Ordering::Greater => out.push(finding(
                "C1",
                invalid,
                format!("/budget/{unit}"),
                format!("{asked} exceeds the parent's {limit}"),
            )),
            Some(_) => {}
        }
    }
    let parent_tools = strings(parent, "tools");
    let child_tools = strings(child, "tools");
    for (i, p) in child_tools.iter().enumerate() {
        if !pattern_covered(p, &parent_tools) {
            out.push(finding(
                "C2",
                invalid,
                format!("/tools/{i}"),
                format!("{p:?} is wider than the parent allows"),
            ));
        }
    }
    if later(time_of(child, "deadline"), time_of(parent, "deadline")) {
        out.push(finding(
            "C3",
            invalid,
            "/deadline",
            "later than the parent's deadline",
        ));
    }
    let staged = strings(parent, "staged");
    for (i, p) in child_tools.iter().enumerate() {
        if let Some(s) = staged.iter().find(|s| patterns_overlap(p, s)) {
            out.push(finding(
                "C5",
                invalid,
                format!("/tools/{i}"),
                format!("{p:?} allows {s:?}, which the parent stages"),
            ));
        }
    }
    out
}

/// Rule C4: a parent's sub-orders, this one included, stay within its budget together.
pub fn check_child_budgets(
    child: &Value,
    parent: &Value,
    siblings: &[SubOrder<'_>],
) -> Vec<Finding> {
    let mut all = siblings.to_vec();
    all.push(SubOrder {
        order: child,
        state: "offered",
    });
    let held_now = held_by_sub_orders(&all);
    let mut out = Vec::new();
    for unit in SHARED_UNITS {
        let Some(limit) = amount(parent, "budget", unit) else {
            continue;
        };
        let total = held(&held_now, unit);
        if total - as_f64(limit) > EPSILON {
            out.push(finding(
                "C4",
                FindingKind::Invalid,
                format!("/budget/{unit}"),
                format!("sub-orders would total {total} {unit}, the parent's budget is {limit}"),
            ));
        }
    }
    out
}

/// Rule R13: the order's own cost plus what its sub-orders hold stays within its budget.
/// Units already over on their own are R7's, missing ones R6's.
pub fn check_own_cost(report: &Value, order: &Value, sub_orders: &[SubOrder<'_>]) -> Vec<Finding> {
    let held_now = held_by_sub_orders(sub_orders);
    let mut out = Vec::new();
    for unit in SHARED_UNITS {
        let (Some(limit), Some(spent)) =
            (amount(order, "budget", unit), amount(report, "cost", unit))
        else {
            continue;
        };
        let hold = held(&held_now, unit);
        if cmp_num(spent, limit) == Ordering::Greater || hold == 0.0 {
            continue;
        }
        if as_f64(spent) + hold - as_f64(limit) > EPSILON {
            out.push(finding(
                "R13",
                FindingKind::Limit,
                format!("/cost/{unit}"),
                format!("spent {spent} {unit} while sub-orders hold {hold}; the budget is {limit}"),
            ));
        }
    }
    out
}

/// A sub-order against its parent and siblings: the order rules first (O1–O5); when the
/// sub-order is well-formed, C1–C5.
pub fn check_sub_order(child: &Value, parent: &Value, siblings: &[SubOrder<'_>]) -> Vec<Finding> {
    let mut out = check_order(child);
    if out.iter().any(|f| f.rule == "O1") {
        return out;
    }
    out.extend(check_child_order(child, parent));
    out.extend(check_child_budgets(child, parent, siblings));
    out
}
