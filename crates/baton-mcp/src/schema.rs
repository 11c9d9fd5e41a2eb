//! The tools' schemas as they cross the wire: each operation's input and output schema
//! (`baton_app::ops`), compacted. Every byte of a schema is read into an agent's context
//! by `tools/list`, whose result for a role's profile must stay under its budget;
//! [`compact`] removes what tells a client nothing. An output field that does not apply
//! is absent (the tools leave it out), never `null`, so its schema can say `string` and
//! stay true.

use rmcp::model::JsonObject;
use serde_json::{Map, Value};

/// Which side of a tool a schema describes: what it accepts, or what it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Input,
    Output,
}

/// A schema as generated, less what costs bytes and tells a client nothing it can act on.
/// Every rule keeps the schema true of what the tool accepts or writes:
///
/// - the root `$schema` goes (2020-12 is MCP's default dialect), and `$defs` are inlined
///   where they are used (each is used once per tool);
/// - every `format` goes (`uint32` and the like are not standard formats), as do
///   `additionalProperties: true`, `default: null` and a flag's `default: false` (each is
///   what absence means);
/// - a property missing from `required` loses `null` from its type: an optional input is
///   absent when unset, and an output field is optional only when it is skipped when
///   `None` (the serialize-mode schema keeps a written `null` required, so it keeps its
///   `null`);
/// - outputs lose every `description` (what their fields mean is said once, in the
///   server's instructions), and no output property is `null` (a field that does not
///   apply is left out);
/// - `minimum: 0` goes (an unsigned count's type adds it; the server refuses a negative
///   count whatever the schema says);
/// - outputs also lose `required`, and a nested
///   object with `properties` loses its `type: object` (the root keeps it, as MCP asks):
///   a client reads what is there, and a validator accepts the same documents less
///   strictly, never wrongly.
pub fn compact(schema: &JsonObject, side: Side) -> JsonObject {
    let mut schema = schema.clone();
    schema.remove("$schema");
    let defs = match schema.remove("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => Map::new(),
    };
    trim(&mut schema, &defs, side);
    if side == Side::Output {
        schema.insert("type".into(), Value::from("object"));
    }
    schema
}

/// An output schema as a tool lists it: its own fields by name, each any value (`{}`).
/// The answer is the operation's document: what each field holds, and its rows and
/// nested parts, the server's instructions and the document itself say. Naming the
/// fields tells a model what to look for; their types would cost every profile's budget
/// bytes that tell it nothing it cannot read in the answer, and the schema stays true of
/// every answer.
pub fn shallow(schema: &JsonObject) -> JsonObject {
    let mut schema = schema.clone();
    if let Some(Value::Object(fields)) = schema.get_mut("properties") {
        for field in fields.values_mut() {
            *field = Value::Object(Map::new());
        }
    }
    schema
}

fn trim(schema: &mut JsonObject, defs: &JsonObject, side: Side) {
    if let Some(Value::String(target)) = schema.remove("$ref") {
        let def = target
            .strip_prefix("#/$defs/")
            .and_then(|name| defs.get(name))
            .and_then(Value::as_object);
        match def {
            Some(def) => {
                for (key, value) in def {
                    schema.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            // Not ours to inline: leave it as it was.
            None => {
                schema.insert("$ref".into(), Value::String(target));
            }
        }
    }
    schema.remove("format");
    if schema.get("additionalProperties") == Some(&Value::Bool(true)) {
        schema.remove("additionalProperties");
    }
    if schema.get("default") == Some(&Value::Null)
        || (schema.get("type") == Some(&Value::from("boolean"))
            && schema.get("default") == Some(&Value::Bool(false)))
    {
        schema.remove("default");
    }
    // `minimum: 0` is what an unsigned count's type adds: a client sends no negative
    // count, and the server refuses one whatever the schema said.
    if schema.get("minimum") == Some(&Value::from(0)) {
        schema.remove("minimum");
    }
    if side == Side::Output {
        // Outputs are data the model reads after the call; what their fields mean is said
        // once, in the server's instructions.
        schema.remove("description");
        if schema.contains_key("properties") && schema.get("type") == Some(&Value::from("object")) {
            schema.remove("type");
        }
    }
    let required: Vec<Value> = match side {
        Side::Input => schema.get("required").and_then(Value::as_array).cloned(),
        Side::Output => schema.remove("required").and_then(|r| match r {
            Value::Array(names) => Some(names),
            _ => None,
        }),
    }
    .unwrap_or_default();
    for (key, value) in schema.iter_mut() {
        match (key.as_str(), value) {
            ("properties", Value::Object(named)) => {
                for (name, sub) in named.iter_mut() {
                    if let Value::Object(sub) = sub {
                        // Outputs leave out what does not apply, so no output
                        // property is ever `null`.
                        if side == Side::Output || !required.contains(&Value::String(name.clone()))
                        {
                            drop_null(sub);
                        }
                        trim(sub, defs, side);
                    }
                }
            }
            ("items" | "additionalProperties", Value::Object(sub)) => trim(sub, defs, side),
            ("anyOf" | "oneOf" | "allOf", Value::Array(subs)) => {
                for sub in subs {
                    if let Value::Object(sub) = sub {
                        trim(sub, defs, side);
                    }
                }
            }
            _ => {}
        }
    }
    collapse(schema, side);
}

/// A choice among strings said as briefly as it is true. An output's string is a plain
/// `string` (its values are the inputs' enums, said where a model chooses them); an
/// input's choice of constants is one `enum` (what each constant means is the
/// description's to say). Outputs also lose `pattern` and `default`, and `null` leaves
/// their choices: a client reads what is there.
fn collapse(schema: &mut JsonObject, side: Side) {
    if side == Side::Output {
        schema.remove("pattern");
        schema.remove("default");
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(subs)) = schema.get_mut(key) {
                subs.retain(|s| s != &serde_json::json!({"type": "null"}));
                if subs.len() == 1
                    && let Some(Value::Object(only)) = subs.pop()
                {
                    schema.remove(key);
                    for (k, v) in only {
                        schema.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(subs)) = schema.get(key) else {
            continue;
        };
        let mut values = Vec::new();
        let mut plain = false;
        let strings = subs.iter().all(|sub| {
            let Some(sub) = sub.as_object() else {
                return false;
            };
            if let Some(Value::String(c)) = sub.get("const") {
                values.push(Value::from(c.as_str()));
                return true;
            }
            if let Some(Value::Array(e)) = sub.get("enum") {
                values.extend(e.iter().cloned());
                return e.iter().all(Value::is_string);
            }
            plain |= sub.get("type") == Some(&Value::from("string"));
            sub.get("type") == Some(&Value::from("string")) && !sub.contains_key("properties")
        });
        if !strings {
            continue;
        }
        schema.remove(key);
        schema.insert("type".into(), Value::from("string"));
        if side == Side::Input && !plain {
            schema.insert("enum".into(), Value::Array(values));
        }
    }
    if side == Side::Output
        && let Some(Value::Array(values)) = schema.remove("enum")
    {
        if values.iter().all(Value::is_string) {
            schema.insert("type".into(), Value::from("string"));
        } else {
            schema.insert("enum".into(), Value::Array(values));
        }
    }
    if side == Side::Output && schema.contains_key("const") {
        schema.remove("const");
    }
}

/// An optional property's schema without `null`: `["string", "null"]` becomes `"string"`,
/// a `null` leaves an `enum`, and `anyOf: [X, {"type": "null"}]` becomes X.
fn drop_null(schema: &mut JsonObject) {
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            schema.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(subs)) = schema.get_mut("anyOf") {
        let null = serde_json::json!({"type": "null"});
        subs.retain(|s| s != &null);
        if let [Value::Object(_)] = subs.as_slice() {
            let Some(Value::Array(mut subs)) = schema.remove("anyOf") else {
                return;
            };
            if let Some(Value::Object(only)) = subs.pop() {
                for (key, value) in only {
                    schema.entry(key).or_insert(value);
                }
            }
        }
    }
}
