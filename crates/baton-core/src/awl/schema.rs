//! JSON Schema 2020-12, evaluated the way the reference validator's engine (Python
//! `jsonschema` 4.x with the reference's format checker and regex rewrite) evaluates it:
//! which errors arise, at which instance paths, and when a caller's schema is refused.
//!
//! It serves three callers: the shape rules O1 and R1 (the AWL schemas), rule R11 (a
//! caller's `output_schema`) and rule O4 (is that schema valid and are its references
//! resolvable). It does no I/O: a reference to a remote document is unresolvable.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Number, Value};

use super::pyre::{self, PyRegex};
use super::stamp;

/// One step of an instance path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// `segs` as a JSON Pointer (`""` for the root).
pub fn pointer(segs: &[Seg]) -> String {
    let mut out = String::new();
    for s in segs {
        out.push('/');
        match s {
            Seg::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Seg::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

/// One error as the engine reports it.
#[derive(Debug, Clone)]
pub struct SchemaError {
    pub path: Vec<Seg>,
    /// The keyword that failed (`"false"` for a false schema).
    pub keyword: &'static str,
    pub message: String,
    /// For a failed `anyOf`/`oneOf`: the errors of every branch tried.
    pub context: Vec<SchemaError>,
    /// For `additionalProperties: false`: the unknown keys, judged with JavaScript-like
    /// patterns as the reference's finding builder judges them.
    pub unknown: Vec<String>,
}

impl SchemaError {
    /// This error and its context, flattened: each branch's errors come before the failed
    /// `anyOf`/`oneOf` itself.
    pub fn flatten(self, out: &mut Vec<SchemaError>) {
        let SchemaError {
            path,
            keyword,
            message,
            context,
            unknown,
        } = self;
        if keyword == "anyOf" || keyword == "oneOf" {
            for c in context {
                c.flatten(out);
            }
        }
        out.push(SchemaError {
            path,
            keyword,
            message,
            context: Vec::new(),
            unknown,
        });
    }
}

/// Deeper than this, evaluation stops with an error instead of exhausting the stack (the
/// reference would raise `RecursionError`).
const MAX_DEPTH: usize = 256;

/// Metaschema and vocabulary URIs the reference's registry knows without fetching.
const KNOWN_SPECS: &[&str] = &[
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/meta/core",
    "https://json-schema.org/draft/2020-12/meta/applicator",
    "https://json-schema.org/draft/2020-12/meta/unevaluated",
    "https://json-schema.org/draft/2020-12/meta/validation",
    "https://json-schema.org/draft/2020-12/meta/meta-data",
    "https://json-schema.org/draft/2020-12/meta/format-annotation",
    "https://json-schema.org/draft/2020-12/meta/format-assertion",
    "https://json-schema.org/draft/2020-12/meta/content",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-03/schema",
];

const IN_VALUE: &[&str] = &[
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
];
const IN_SUBARRAY: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
const IN_SUBVALUES: &[&str] = &[
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
];

/// What a reference resolved to.
#[derive(Clone, Copy)]
enum Target<'s> {
    Schema(&'s Value, usize),
    /// A metaschema the registry knows: evaluated as "is a valid schema".
    Metaschema,
}

/// A schema with its references indexed, ready to evaluate instances.
pub struct Validator<'s> {
    root: &'s Value,
    root_base: String,
    /// Resources by absolute URI (fragment removed).
    resources: HashMap<String, &'s Value>,
    anchors: HashMap<(String, String), &'s Value>,
    /// The base URI in force inside each crawled subschema (by address).
    bases: HashMap<usize, usize>,
    base_names: Vec<String>,
    regexes: RefCell<HashMap<(String, bool), Option<PyRegex>>>,
}

fn addr(v: &Value) -> usize {
    v as *const Value as usize
}

impl<'s> Validator<'s> {
    pub fn new(root: &'s Value) -> Self {
        let mut v = Self {
            root,
            root_base: String::new(),
            resources: HashMap::new(),
            anchors: HashMap::new(),
            bases: HashMap::new(),
            base_names: Vec::new(),
            regexes: RefCell::new(HashMap::new()),
        };
        let root_base = id_of(root).map(|id| urljoin("", id)).unwrap_or_default();
        v.root_base = root_base.clone();
        v.resources.insert(root_base.clone(), root);
        v.crawl(root, &root_base, 0);
        v
    }

    fn base_index(&mut self, base: &str) -> usize {
        if let Some(i) = self.base_names.iter().position(|b| b == base) {
            return i;
        }
        self.base_names.push(base.to_owned());
        self.base_names.len() - 1
    }

    fn crawl(&mut self, node: &'s Value, base: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Value::Object(obj) = node else {
            return;
        };
        let mut base = base.to_owned();
        if let Some(id) = id_of(node) {
            base = urljoin(&base, id);
            self.resources.entry(base.clone()).or_insert(node);
        }
        for key in ["$anchor", "$dynamicAnchor"] {
            if let Some(Value::String(name)) = obj.get(key) {
                self.anchors
                    .entry((base.clone(), name.clone()))
                    .or_insert(node);
            }
        }
        let bi = self.base_index(&base);
        self.bases.insert(addr(node), bi);
        for (k, v) in obj {
            if IN_VALUE.contains(&k.as_str()) {
                self.crawl(v, &base, depth + 1);
            } else if IN_SUBARRAY.contains(&k.as_str()) {
                if let Value::Array(items) = v {
                    for item in items {
                        self.crawl(item, &base, depth + 1);
                    }
                }
            } else if IN_SUBVALUES.contains(&k.as_str())
                && let Value::Object(map) = v
            {
                for item in map.values() {
                    self.crawl(item, &base, depth + 1);
                }
            }
        }
    }

    fn base_of(&self, node: &Value, fallback: usize) -> usize {
        self.bases.get(&addr(node)).copied().unwrap_or(fallback)
    }

    fn root_base_index(&self) -> usize {
        self.base_of(self.root, 0)
    }

    /// Resolves `reference` against the base at `base`, as the reference's `referencing`
    /// library would (no retrieval of remote documents).
    fn lookup(&self, reference: &str, base: usize) -> Option<Target<'s>> {
        let base_uri = self.base_names.get(base).map_or("", String::as_str);
        let (uri, fragment) = if let Some(frag) = reference.strip_prefix('#') {
            (base_uri.to_owned(), frag.to_owned())
        } else {
            let full = urljoin(base_uri, reference);
            match full.split_once('#') {
                Some((u, f)) => (u.to_owned(), f.to_owned()),
                None => (full, String::new()),
            }
        };
        let uri = uri.trim_end_matches('#').to_owned();
        let resource = match self.resources.get(&uri) {
            Some(r) => *r,
            None if KNOWN_SPECS.contains(&uri.as_str()) => return Some(Target::Metaschema),
            None => return None,
        };
        let uri_base = self
            .base_names
            .iter()
            .position(|b| *b == uri)
            .unwrap_or(base);
        if fragment.starts_with('/') {
            let node = resolve_pointer(resource, &fragment)?;
            return Some(Target::Schema(node, self.base_of(node, uri_base)));
        }
        if !fragment.is_empty() {
            let node = self.anchors.get(&(uri, fragment))?;
            return Some(Target::Schema(node, self.base_of(node, uri_base)));
        }
        Some(Target::Schema(resource, self.base_of(resource, uri_base)))
    }

    fn regex(&self, pattern: &str, ascii: bool) -> Option<PyRegex> {
        let key = (pattern.to_owned(), ascii);
        if let Some(r) = self.regexes.borrow().get(&key) {
            return r.clone();
        }
        let compiled = PyRegex::compile(pattern, ascii).ok();
        self.regexes.borrow_mut().insert(key, compiled.clone());
        compiled
    }

    /// Python's `re.search(pattern, text)`; a pattern Python refuses matches nothing here.
    fn py_search(&self, pattern: &str, text: &str) -> bool {
        self.regex(pattern, false).is_some_and(|r| r.search(text))
    }

    /// The reference's JavaScript-like search: `$` rewritten, ASCII classes.
    fn js_search(&self, pattern: &str, text: &str) -> bool {
        self.regex(&pyre::js_rewrite(pattern), true)
            .is_some_and(|r| r.search(text))
    }

    /// Every error of `instance` (`None`: a missing value, of no JSON type) under the root
    /// schema.
    pub fn errors(&self, instance: Option<&Value>) -> Vec<SchemaError> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.eval(
            self.root,
            instance,
            &mut path,
            self.root_base_index(),
            false,
            0,
            &mut out,
        );
        out
    }

    fn is_valid_at(&self, schema: &Value, inst: Option<&Value>, base: usize, depth: usize) -> bool {
        let mut out = Vec::new();
        self.eval(schema, inst, &mut Vec::new(), base, true, depth, &mut out);
        out.is_empty()
    }

    #[allow(clippy::too_many_arguments)]
    fn eval(
        &self,
        schema: &Value,
        inst: Option<&Value>,
        path: &mut Vec<Seg>,
        base: usize,
        first_only: bool,
        depth: usize,
        out: &mut Vec<SchemaError>,
    ) {
        let error = |path: &[Seg], keyword: &'static str, message: String| SchemaError {
            path: path.to_vec(),
            keyword,
            message,
            context: Vec::new(),
            unknown: Vec::new(),
        };
        if depth > MAX_DEPTH {
            out.push(error(
                path,
                "$ref",
                "schema nested or recursive too deeply".into(),
            ));
            return;
        }
        let obj = match schema {
            Value::Bool(true) => return,
            Value::Object(obj) => obj,
            _ => {
                out.push(error(path, "false", "no value is allowed here".into()));
                return;
            }
        };
        let base = match id_of(schema) {
            Some(_) => self.base_of(schema, base),
            None => base,
        };
        let done = |out: &Vec<SchemaError>| first_only && !out.is_empty();
        for (keyword, value) in obj {
            if done(out) {
                return;
            }
            let kw = keyword.as_str();
            match kw {
                "$ref" | "$dynamicRef" => {
                    let Value::String(r) = value else { continue };
                    match self.lookup(r, base) {
                        Some(Target::Schema(target, tb)) => {
                            self.eval(target, inst, path, tb, first_only, depth + 1, out);
                        }
                        Some(Target::Metaschema) => {
                            if let Some(v) = inst
                                && !schema_is_valid(v)
                            {
                                out.push(error(path, "$ref", "not a valid schema".into()));
                            }
                        }
                        None => {
                            out.push(error(path, "$ref", format!("unresolvable reference {r:?}")))
                        }
                    }
                }
                "properties" => {
                    let (Some(Value::Object(o)), Value::Object(props)) = (inst, value) else {
                        continue;
                    };
                    for (name, sub) in props {
                        if let Some(v) = o.get(name) {
                            self.descend(
                                sub,
                                Some(v),
                                path,
                                Seg::Key(name.clone()),
                                base,
                                first_only,
                                depth + 1,
                                out,
                            );
                        }
                    }
                }
                "patternProperties" => {
                    let (Some(Value::Object(o)), Value::Object(pats)) = (inst, value) else {
                        continue;
                    };
                    for (pat, sub) in pats {
                        for (k, v) in o {
                            if self.py_search(pat, k) {
                                self.descend(
                                    sub,
                                    Some(v),
                                    path,
                                    Seg::Key(k.clone()),
                                    base,
                                    first_only,
                                    depth + 1,
                                    out,
                                );
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    let Some(Value::Object(o)) = inst else {
                        continue;
                    };
                    let extras = self.additional(o, obj);
                    if value.is_object() {
                        for k in extras {
                            if let Some(v) = o.get(&k) {
                                self.descend(
                                    value,
                                    Some(v),
                                    path,
                                    Seg::Key(k),
                                    base,
                                    first_only,
                                    depth + 1,
                                    out,
                                );
                            }
                        }
                    } else if !truthy(value) && !extras.is_empty() {
                        let unknown = self.unknown_keys(o, obj);
                        out.push(SchemaError {
                            unknown,
                            ..error(path, "additionalProperties", "unknown fields".into())
                        });
                    }
                }
                "propertyNames" => {
                    let Some(Value::Object(o)) = inst else {
                        continue;
                    };
                    for k in o.keys() {
                        let name = Value::String(k.clone());
                        self.eval(value, Some(&name), path, base, first_only, depth + 1, out);
                    }
                }
                "prefixItems" => {
                    let (Some(Value::Array(a)), Value::Array(subs)) = (inst, value) else {
                        continue;
                    };
                    for (i, (item, sub)) in a.iter().zip(subs).enumerate() {
                        self.descend(
                            sub,
                            Some(item),
                            path,
                            Seg::Index(i),
                            base,
                            first_only,
                            depth + 1,
                            out,
                        );
                    }
                }
                "items" => {
                    let Some(Value::Array(a)) = inst else {
                        continue;
                    };
                    let prefix = obj
                        .get("prefixItems")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    if a.len() <= prefix {
                        continue;
                    }
                    if value == &Value::Bool(false) {
                        out.push(error(path, "items", "has too many items".into()));
                    } else {
                        for (i, item) in a.iter().enumerate().skip(prefix) {
                            self.descend(
                                value,
                                Some(item),
                                path,
                                Seg::Index(i),
                                base,
                                first_only,
                                depth + 1,
                                out,
                            );
                        }
                    }
                }
                "contains" => {
                    let Some(Value::Array(a)) = inst else {
                        continue;
                    };
                    let min = obj.get("minContains").and_then(as_count).unwrap_or(1.0);
                    let max = obj
                        .get("maxContains")
                        .and_then(as_count)
                        .unwrap_or(a.len() as f64);
                    let mut matches = 0f64;
                    let mut too_many = false;
                    for item in a {
                        if self.is_valid_at(value, Some(item), base, depth + 1) {
                            matches += 1.0;
                            if matches > max {
                                out.push(error(path, "maxContains", "too many items match".into()));
                                too_many = true;
                                break;
                            }
                        }
                    }
                    if !too_many && matches < min {
                        let kw = if matches == 0.0 {
                            "contains"
                        } else {
                            "minContains"
                        };
                        out.push(error(path, kw, "too few items match".into()));
                    }
                }
                "allOf" => {
                    let Value::Array(subs) = value else { continue };
                    for sub in subs {
                        self.eval(sub, inst, path, base, first_only, depth + 1, out);
                    }
                }
                "anyOf" => {
                    let Value::Array(subs) = value else { continue };
                    let mut all = Vec::new();
                    let mut ok = false;
                    for sub in subs {
                        let mut errs = Vec::new();
                        self.eval(sub, inst, path, base, false, depth + 1, &mut errs);
                        if errs.is_empty() {
                            ok = true;
                            break;
                        }
                        all.extend(errs);
                    }
                    if !ok {
                        out.push(SchemaError {
                            context: all,
                            ..error(
                                path,
                                "anyOf",
                                "is not valid under any of the given schemas".into(),
                            )
                        });
                    }
                }
                "oneOf" => {
                    let Value::Array(subs) = value else { continue };
                    let mut all = Vec::new();
                    let mut first_valid = None;
                    for (i, sub) in subs.iter().enumerate() {
                        let mut errs = Vec::new();
                        self.eval(sub, inst, path, base, false, depth + 1, &mut errs);
                        if errs.is_empty() {
                            first_valid = Some(i);
                            break;
                        }
                        all.extend(errs);
                    }
                    match first_valid {
                        None => out.push(SchemaError {
                            context: all,
                            ..error(
                                path,
                                "oneOf",
                                "is not valid under any of the given schemas".into(),
                            )
                        }),
                        Some(i) => {
                            let more = subs
                                .iter()
                                .skip(i + 1)
                                .any(|s| self.is_valid_at(s, inst, base, depth + 1));
                            if more {
                                out.push(error(
                                    path,
                                    "oneOf",
                                    "is valid under more than one of the given schemas".into(),
                                ));
                            }
                        }
                    }
                }
                "not" => {
                    if self.is_valid_at(value, inst, base, depth + 1) {
                        out.push(error(
                            path,
                            "not",
                            "should not be valid under the given schema".into(),
                        ));
                    }
                }
                "if" => {
                    if self.is_valid_at(value, inst, base, depth + 1) {
                        if let Some(then) = obj.get("then") {
                            self.eval(then, inst, path, base, first_only, depth + 1, out);
                        }
                    } else if let Some(els) = obj.get("else") {
                        self.eval(els, inst, path, base, first_only, depth + 1, out);
                    }
                }
                "dependentSchemas" => {
                    let (Some(Value::Object(o)), Value::Object(deps)) = (inst, value) else {
                        continue;
                    };
                    for (prop, sub) in deps {
                        if o.contains_key(prop) {
                            self.eval(sub, inst, path, base, first_only, depth + 1, out);
                        }
                    }
                }
                "unevaluatedItems" => {
                    let Some(Value::Array(a)) = inst else {
                        continue;
                    };
                    let seen = self.evaluated_indexes(schema, a, inst, base, depth + 1);
                    if (0..a.len()).any(|i| !seen.contains(&i)) {
                        out.push(error(
                            path,
                            "unevaluatedItems",
                            "unevaluated items are not allowed".into(),
                        ));
                    }
                }
                "unevaluatedProperties" => {
                    let Some(Value::Object(o)) = inst else {
                        continue;
                    };
                    let seen = self.evaluated_keys(schema, o, inst, base, depth + 1);
                    let bad = o.iter().any(|(k, v)| {
                        !seen.contains(k) && !self.is_valid_at(value, Some(v), base, depth + 1)
                    });
                    if bad {
                        out.push(error(
                            path,
                            "unevaluatedProperties",
                            "unevaluated properties are not allowed".into(),
                        ));
                    }
                }
                _ => self.leaf(kw, value, inst, path, out),
            }
        }
    }

    /// Evaluates a subschema at `path` + `seg`. A `false` subschema reports at `path`
    /// itself: the reference's engine adds the step only to errors of keywords.
    #[allow(clippy::too_many_arguments)]
    fn descend(
        &self,
        schema: &Value,
        inst: Option<&Value>,
        path: &mut Vec<Seg>,
        seg: Seg,
        base: usize,
        first_only: bool,
        depth: usize,
        out: &mut Vec<SchemaError>,
    ) {
        if schema == &Value::Bool(false) {
            self.eval(schema, inst, path, base, first_only, depth, out);
            return;
        }
        path.push(seg);
        self.eval(schema, inst, path, base, first_only, depth, out);
        path.pop();
    }

    /// Keywords that look at the instance alone (no subschema). Kept out of [`Self::eval`]
    /// so that its recursive frames stay small.
    #[inline(never)]
    fn leaf(
        &self,
        kw: &str,
        value: &Value,
        inst: Option<&Value>,
        path: &[Seg],
        out: &mut Vec<SchemaError>,
    ) {
        let error = |path: &[Seg], keyword: &'static str, message: String| SchemaError {
            path: path.to_vec(),
            keyword,
            message,
            context: Vec::new(),
            unknown: Vec::new(),
        };
        match kw {
            "type" => {
                let types: Vec<&str> = match value {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => return,
                };
                if !types.iter().any(|t| is_type(inst, t)) {
                    out.push(error(path, "type", format!("is not of type {types:?}")));
                }
            }
            "enum" => {
                let Value::Array(options) = value else { return };
                if !options.iter().any(|o| inst.is_some_and(|i| equal(i, o))) {
                    out.push(error(
                        path,
                        "enum",
                        "is not one of the allowed values".into(),
                    ));
                }
            }
            "const" if !inst.is_some_and(|i| equal(i, value)) => {
                out.push(error(path, "const", format!("{value} was expected")));
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                let (Some(Value::Number(n)), Value::Number(limit)) = (inst, value) else {
                    return;
                };
                let ord = cmp_num(n, limit);
                let bad = match kw {
                    "minimum" => ord == Ordering::Less,
                    "maximum" => ord == Ordering::Greater,
                    "exclusiveMinimum" => ord != Ordering::Greater,
                    _ => ord != Ordering::Less,
                };
                if bad {
                    let kw: &'static str = match kw {
                        "minimum" => "minimum",
                        "maximum" => "maximum",
                        "exclusiveMinimum" => "exclusiveMinimum",
                        _ => "exclusiveMaximum",
                    };
                    out.push(error(
                        path,
                        kw,
                        format!("{n} is out of range ({kw} {limit})"),
                    ));
                }
            }
            "multipleOf" => {
                let (Some(Value::Number(n)), Value::Number(d)) = (inst, value) else {
                    return;
                };
                if !is_multiple(n, d) {
                    out.push(error(
                        path,
                        "multipleOf",
                        format!("{n} is not a multiple of {d}"),
                    ));
                }
            }
            "minLength" | "maxLength" => {
                let (Some(Value::String(s)), Some(limit)) = (inst, as_count(value)) else {
                    return;
                };
                // Python counts code points.
                let len = s.chars().count() as f64;
                if (kw == "minLength" && len < limit) || (kw == "maxLength" && len > limit) {
                    let kw = if kw == "minLength" {
                        "minLength"
                    } else {
                        "maxLength"
                    };
                    out.push(error(path, kw, format!("length {len} is out of range")));
                }
            }
            "pattern" => {
                let (Some(Value::String(s)), Value::String(p)) = (inst, value) else {
                    return;
                };
                if !self.js_search(p, s) {
                    out.push(error(path, "pattern", format!("does not match {p:?}")));
                }
            }
            "format" => {
                let (Some(v), Value::String(f)) = (inst, value) else {
                    return;
                };
                if !format_ok(f, v) {
                    out.push(error(path, "format", format!("is not a {f:?}")));
                }
            }
            "minItems" | "maxItems" => {
                let (Some(Value::Array(a)), Some(limit)) = (inst, as_count(value)) else {
                    return;
                };
                let len = a.len() as f64;
                if (kw == "minItems" && len < limit) || (kw == "maxItems" && len > limit) {
                    let kw = if kw == "minItems" {
                        "minItems"
                    } else {
                        "maxItems"
                    };
                    out.push(error(path, kw, format!("has {len} items")));
                }
            }
            "uniqueItems" => {
                if value != &Value::Bool(true) {
                    return;
                }
                let Some(Value::Array(a)) = inst else { return };
                if !unique(a) {
                    out.push(error(path, "uniqueItems", "has non-unique elements".into()));
                }
            }
            "minProperties" | "maxProperties" => {
                let (Some(Value::Object(o)), Some(limit)) = (inst, as_count(value)) else {
                    return;
                };
                let len = o.len() as f64;
                if (kw == "minProperties" && len < limit) || (kw == "maxProperties" && len > limit)
                {
                    let kw = if kw == "minProperties" {
                        "minProperties"
                    } else {
                        "maxProperties"
                    };
                    out.push(error(path, kw, format!("has {len} properties")));
                }
            }
            "required" => {
                let (Some(Value::Object(o)), Value::Array(names)) = (inst, value) else {
                    return;
                };
                for name in names.iter().filter_map(Value::as_str) {
                    if !o.contains_key(name) {
                        out.push(error(
                            path,
                            "required",
                            format!("{name:?} is a required property"),
                        ));
                    }
                }
            }
            "dependentRequired" => {
                let (Some(Value::Object(o)), Value::Object(deps)) = (inst, value) else {
                    return;
                };
                for (prop, needs) in deps {
                    if !o.contains_key(prop) {
                        continue;
                    }
                    for need in needs
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                    {
                        if !o.contains_key(need) {
                            out.push(error(
                                path,
                                "dependentRequired",
                                format!("{need:?} is a dependency of {prop:?}"),
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Keys not covered by `properties` or by the joined `patternProperties` (Python `re`).
    fn additional(&self, o: &Map<String, Value>, schema: &Map<String, Value>) -> Vec<String> {
        let props = schema.get("properties").and_then(Value::as_object);
        let patterns: Vec<&str> = schema
            .get("patternProperties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let joined = patterns.join("|");
        let joined_re = (!joined.is_empty())
            .then(|| self.regex(&joined, false))
            .flatten();
        o.keys()
            .filter(|k| !props.is_some_and(|p| p.contains_key(*k)))
            .filter(|k| {
                if patterns.is_empty() {
                    return true;
                }
                match &joined_re {
                    Some(re) => !re.search(k),
                    None => !patterns.iter().any(|p| self.py_search(p, k)),
                }
            })
            .cloned()
            .collect()
    }

    /// The keys the reference lists as unknown for an `additionalProperties: false` error.
    fn unknown_keys(&self, o: &Map<String, Value>, schema: &Map<String, Value>) -> Vec<String> {
        let props = schema.get("properties").and_then(Value::as_object);
        let patterns: Vec<&String> = schema
            .get("patternProperties")
            .and_then(Value::as_object)
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        o.keys()
            .filter(|k| !props.is_some_and(|p| p.contains_key(*k)))
            .filter(|k| !patterns.iter().any(|p| self.js_search(p, k)))
            .cloned()
            .collect()
    }

    fn resolve_for_annotations(&self, r: &str, base: usize) -> Option<(&'s Value, usize)> {
        match self.lookup(r, base)? {
            Target::Schema(v, b) => Some((v, b)),
            Target::Metaschema => None,
        }
    }

    fn evaluated_indexes(
        &self,
        schema: &Value,
        a: &[Value],
        inst: Option<&Value>,
        base: usize,
        depth: usize,
    ) -> HashSet<usize> {
        let mut seen = HashSet::new();
        let Value::Object(obj) = schema else {
            return seen;
        };
        if depth > MAX_DEPTH {
            return seen;
        }
        if obj.contains_key("items") {
            return (0..a.len()).collect();
        }
        for key in ["$ref", "$dynamicRef"] {
            if let Some(Value::String(r)) = obj.get(key)
                && let Some((target, tb)) = self.resolve_for_annotations(r, base)
            {
                seen.extend(self.evaluated_indexes(target, a, inst, tb, depth + 1));
            }
        }
        if let Some(Value::Array(p)) = obj.get("prefixItems") {
            seen.extend(0..p.len());
        }
        if let Some(cond) = obj.get("if") {
            if self.is_valid_at(cond, inst, base, depth + 1) {
                seen.extend(self.evaluated_indexes(cond, a, inst, base, depth + 1));
                if let Some(then) = obj.get("then") {
                    seen.extend(self.evaluated_indexes(then, a, inst, base, depth + 1));
                }
            } else if let Some(els) = obj.get("else") {
                seen.extend(self.evaluated_indexes(els, a, inst, base, depth + 1));
            }
        }
        for key in ["contains", "unevaluatedItems"] {
            if let Some(sub) = obj.get(key) {
                for (i, item) in a.iter().enumerate() {
                    if self.is_valid_at(sub, Some(item), base, depth + 1) {
                        seen.insert(i);
                    }
                }
            }
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            if let Some(Value::Array(subs)) = obj.get(key) {
                for sub in subs {
                    if self.is_valid_at(sub, inst, base, depth + 1) {
                        seen.extend(self.evaluated_indexes(sub, a, inst, base, depth + 1));
                    }
                }
            }
        }
        seen
    }

    fn evaluated_keys(
        &self,
        schema: &Value,
        o: &Map<String, Value>,
        inst: Option<&Value>,
        base: usize,
        depth: usize,
    ) -> HashSet<String> {
        let mut seen = HashSet::new();
        let Value::Object(obj) = schema else {
            return seen;
        };
        if depth > MAX_DEPTH {
            return seen;
        }
        for key in ["$ref", "$dynamicRef"] {
            if let Some(Value::String(r)) = obj.get(key)
                && let Some((target, tb)) = self.resolve_for_annotations(r, base)
            {
                seen.extend(self.evaluated_keys(target, o, inst, tb, depth + 1));
            }
        }
        if let Some(Value::Object(props)) = obj.get("properties") {
            seen.extend(props.keys().filter(|k| o.contains_key(*k)).cloned());
        }
        for key in ["additionalProperties", "unevaluatedProperties"] {
            if let Some(sub) = obj.get(key) {
                for (k, v) in o {
                    if self.is_valid_at(sub, Some(v), base, depth + 1) {
                        seen.insert(k.clone());
                    }
                }
            }
        }
        if let Some(Value::Object(pats)) = obj.get("patternProperties") {
            for k in o.keys() {
                if pats.keys().any(|p| self.py_search(p, k)) {
                    seen.insert(k.clone());
                }
            }
        }
        if let Some(Value::Object(deps)) = obj.get("dependentSchemas") {
            for (prop, sub) in deps {
                if o.contains_key(prop) {
                    seen.extend(self.evaluated_keys(sub, o, inst, base, depth + 1));
                }
            }
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            if let Some(Value::Array(subs)) = obj.get(key) {
                for sub in subs {
                    if self.is_valid_at(sub, inst, base, depth + 1) {
                        seen.extend(self.evaluated_keys(sub, o, inst, base, depth + 1));
                    }
                }
            }
        }
        if let Some(cond) = obj.get("if") {
            if self.is_valid_at(cond, inst, base, depth + 1) {
                seen.extend(self.evaluated_keys(cond, o, inst, base, depth + 1));
                if let Some(then) = obj.get("then") {
                    seen.extend(self.evaluated_keys(then, o, inst, base, depth + 1));
                }
            } else if let Some(els) = obj.get("else") {
                seen.extend(self.evaluated_keys(els, o, inst, base, depth + 1));
            }
        }
        seen
    }

    /// Whether every `$ref`/`$dynamicRef` in the schema resolves from the root's base (the
    /// reference checks them all up front, from the root, before evaluating anything).
    pub fn references_resolve(&self) -> bool {
        let mut refs = Vec::new();
        collect_refs(self.root, &mut refs, 0);
        let base = self.root_base_index();
        refs.iter().all(|r| self.lookup(r, base).is_some())
    }
}

fn collect_refs<'v>(v: &'v Value, out: &mut Vec<&'v str>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("$ref" | "$dynamicRef", Value::String(s)) => out.push(s),
                    ("const" | "enum" | "default" | "examples", _) => {}
                    _ => collect_refs(v, out, depth + 1),
                }
            }
        }
        Value::Array(a) => {
            for v in a {
                collect_refs(v, out, depth + 1);
            }
        }
        _ => {}
    }
}

fn id_of(v: &Value) -> Option<&str> {
    v.as_object()?.get("$id")?.as_str()
}

/// Python's truthiness of a JSON value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A count limit (`minLength: 2`, `2.0` too), as a float to compare with lengths.
fn as_count(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// The JSON type test, as Python's `jsonschema` draft 2020-12 type checker does it.
pub fn is_type(v: Option<&Value>, t: &str) -> bool {
    let Some(v) = v else { return false };
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => false,
    }
}

fn int_of(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Numeric comparison: exact for integers, as floats otherwise.
pub fn cmp_num(a: &Number, b: &Number) -> Ordering {
    match (int_of(a), int_of(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => {
            let x = a.as_f64().unwrap_or(f64::NAN);
            let y = b.as_f64().unwrap_or(f64::NAN);
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
    }
}

fn is_multiple(n: &Number, d: &Number) -> bool {
    if d.is_f64() {
        let (x, y) = (n.as_f64().unwrap_or(0.0), d.as_f64().unwrap_or(1.0));
        let q = x / y;
        if q.is_finite() {
            return q.trunc() == q;
        }
        // The reference falls back to exact fractions here; a float quotient that
        // overflows is a huge value over a tiny divisor, taken as not a multiple.
        return false;
    }
    match (int_of(n), int_of(d)) {
        (Some(x), Some(y)) if y != 0 => x % y == 0,
        _ => {
            let (x, y) = (n.as_f64().unwrap_or(0.0), d.as_f64().unwrap_or(1.0));
            // Python's float modulo takes the sign of the divisor; only zero matters here.
            x % y == 0.0
        }
    }
}

/// JSON equality with Python's number semantics (`1 == 1.0`) and booleans apart from
/// numbers.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_num(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

/// A canonical text per equality class, so uniqueness is checked in linear time.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Number(n) => match int_of(n) {
            Some(i) => out.push_str(&format!("n{i}")),
            None => {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() == 0.0 && f.abs() < 1e18 {
                    out.push_str(&format!("n{}", f as i128));
                } else {
                    out.push_str(&format!("f{f:e}"));
                }
            }
        },
        Value::Array(a) => {
            out.push('[');
            for x in a {
                canonical(x, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                canonical(&o[k], out);
                out.push(',');
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn unique(a: &[Value]) -> bool {
    let mut seen = HashSet::new();
    a.iter().all(|v| {
        let mut key = String::new();
        canonical(v, &mut key);
        seen.insert(key)
    })
}

// ---- formats ------------------------------------------------------------------------------

/// The reference's format checker: only these formats are asserted; others pass.
fn format_ok(format: &str, v: &Value) -> bool {
    let Value::String(s) = v else { return true };
    match format {
        "date-time" => stamp::is_date_time(s),
        "date" => stamp::is_date(s),
        "email" | "idn-email" => s.contains('@'),
        "ipv4" => is_ipv4(s),
        "ipv6" => is_ipv6(s),
        "regex" => pyre::is_valid(s),
        "time" => is_hms(s),
        "uuid" => is_uuid(s),
        _ => true,
    }
}

/// Python's `IPv4Address`: four decimal octets, no leading zeros.
fn is_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && !(p.len() > 1 && p.starts_with('0'))
                && p.parse::<u32>().is_ok_and(|n| n <= 255)
        })
}

/// Python's `IPv6Address`, without a scope id.
fn is_ipv6(s: &str) -> bool {
    if s.is_empty() || s.contains('%') {
        return false;
    }
    let mut parts: Vec<&str> = s.split(':').collect();
    if parts.len() < 3 {
        return false;
    }
    if parts.last().is_some_and(|p| p.contains('.')) {
        if !parts.pop().is_some_and(is_ipv4) {
            return false;
        }
        parts.push("0");
        parts.push("0");
    }
    if parts.len() > 9 {
        return false;
    }
    let n = parts.len();
    let mut skip = None;
    for (i, p) in parts.iter().enumerate().take(n - 1).skip(1) {
        if p.is_empty() {
            if skip.is_some() {
                return false;
            }
            skip = Some(i);
        }
    }
    let (hi, lo) = match skip {
        Some(k) => {
            let (mut hi, mut lo) = (k, n - k - 1);
            if parts[0].is_empty() {
                hi -= 1;
                if hi != 0 {
                    return false;
                }
            }
            if parts[n - 1].is_empty() {
                lo -= 1;
                if lo != 0 {
                    return false;
                }
            }
            if hi + lo >= 8 {
                return false;
            }
            (hi, lo)
        }
        None if n == 8 => (8, 0),
        None => return false,
    };
    let hextet =
        |p: &&str| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_hexdigit());
    parts[..hi].iter().all(hextet) && parts[n - lo..].iter().all(hextet)
}

/// `datetime.strptime(s, "%H:%M:%S")`.
fn is_hms(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    let [h, m, sec] = parts.as_slice() else {
        return false;
    };
    let num = |p: &str, max: u32| {
        (1..=2).contains(&p.len())
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| n <= max)
    };
    num(h, 23) && num(m, 59) && num(sec, 59)
}

/// Python's `UUID(s)` plus dashes at 8, 13, 18 and 23.
fn is_uuid(s: &str) -> bool {
    let hex = s.replace("urn:", "").replace("uuid:", "");
    let hex = hex.trim_matches(|c| c == '{' || c == '}').replace('-', "");
    if hex.chars().count() != 32 || pyre::python_int_hex(&hex).is_none() {
        return false;
    }
    let chars: Vec<char> = s.chars().collect();
    [8, 13, 18, 23].iter().all(|i| chars.get(*i) == Some(&'-'))
}

// ---- references ---------------------------------------------------------------------------

/// RFC 3986 reference resolution, as Python's `urljoin` does it for the usual schemes.
pub fn urljoin(base: &str, reference: &str) -> String {
    if base.is_empty() {
        return reference.to_owned();
    }
    if reference.is_empty() {
        return base.to_owned();
    }
    let has_scheme = |s: &str| {
        s.find(':').is_some_and(|i| {
            i > 0
                && s[..i].starts_with(|c: char| c.is_ascii_alphabetic())
                && s[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
    };
    if has_scheme(reference) {
        return reference.to_owned();
    }
    let without_fragment = base.split('#').next().unwrap_or(base);
    if reference.starts_with('#') {
        return format!("{without_fragment}{reference}");
    }
    let (scheme, rest) = match base.find(':') {
        Some(i) if has_scheme(base) => (&base[..=i], &base[i + 1..]),
        _ => ("", base),
    };
    let (authority, path) = match rest.strip_prefix("//") {
        Some(r) => {
            let end = r.find(['/', '?', '#']).unwrap_or(r.len());
            (format!("//{}", &r[..end]), &r[end..])
        }
        None => (String::new(), rest),
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    if reference.starts_with("//") {
        return format!("{scheme}{reference}");
    }
    if reference.starts_with('?') {
        return format!("{scheme}{authority}{path}{reference}");
    }
    let (ref_path, ref_tail) = match reference.find(['?', '#']) {
        Some(i) => (&reference[..i], &reference[i..]),
        None => (reference, ""),
    };
    let merged = if ref_path.starts_with('/') {
        ref_path.to_owned()
    } else {
        let dir = match path.rfind('/') {
            Some(i) => &path[..=i],
            None if !authority.is_empty() => "/",
            None => "",
        };
        format!("{dir}{ref_path}")
    };
    format!("{scheme}{authority}{}{ref_tail}", remove_dots(&merged))
}

fn remove_dots(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segs: Vec<&str> = path.split('/').collect();
    for (i, seg) in segs.iter().enumerate() {
        match *seg {
            "." => {
                if i == segs.len() - 1 {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 || (out.len() == 1 && !out[0].is_empty()) {
                    out.pop();
                }
                if i == segs.len() - 1 {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    out.join("/")
}

/// Percent-decoding, as Python's `unquote` (invalid UTF-8 replaced).
fn unquote(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON Pointer walk as `referencing` does it: arrays (and strings) are indexed with
/// Python's `int()`, negative indexes count from the end.
fn resolve_pointer<'v>(root: &'v Value, fragment: &str) -> Option<&'v Value> {
    let decoded = unquote(&fragment[1..]);
    let mut node = root;
    for seg in decoded.split('/') {
        node = match node {
            Value::Array(a) => {
                let i = pyre::python_int(seg)?;
                let idx = if i < 0 { a.len() as i64 + i } else { i };
                a.get(usize::try_from(idx).ok()?)?
            }
            Value::Object(o) => o.get(&seg.replace("~1", "/").replace("~0", "~"))?,
            // Strings are sequences in Python, but a character is no schema; refuse.
            _ => return None,
        };
    }
    Some(node)
}

// ---- the metaschema -----------------------------------------------------------------------

/// Python `re.search` of an anchored pattern whose `$` also matches before a final newline.
fn full_or_before_newline(s: &str, pred: impl Fn(&str) -> bool) -> bool {
    pred(s) || s.strip_suffix('\n').is_some_and(pred)
}

fn anchor_ok(s: &str) -> bool {
    full_or_before_newline(s, |t| {
        let mut c = t.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|x| x.is_ascii_alphanumeric() || "-._".contains(x))
    })
}

fn id_ok(s: &str) -> bool {
    full_or_before_newline(s, |t| {
        let body = t.strip_suffix('#').unwrap_or(t);
        !body.contains('#')
    })
}

fn non_negative_integer(v: &Value) -> bool {
    is_type(Some(v), "integer")
        && match v {
            Value::Number(n) => n.as_f64().is_some_and(|f| f >= 0.0),
            _ => false,
        }
}

fn string_array(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.iter().all(Value::is_string) && unique(a),
        _ => false,
    }
}

const SIMPLE_TYPES: &[&str] = &[
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// Whether `schema` is valid against the JSON Schema 2020-12 metaschema, as the reference's
/// `check_schema` decides (the `regex` format checked with Python's rules).
pub fn schema_is_valid(schema: &Value) -> bool {
    schema_valid_at(schema, 0)
}

fn schema_valid_at(schema: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let obj = match schema {
        Value::Bool(_) => return true,
        Value::Object(o) => o,
        _ => return false,
    };
    let sub = |v: &Value| schema_valid_at(v, depth + 1);
    let schema_map = |v: &Value| match v {
        Value::Object(m) => m.values().all(sub),
        _ => false,
    };
    let schema_array = |v: &Value| match v {
        Value::Array(a) => !a.is_empty() && a.iter().all(sub),
        _ => false,
    };
    obj.iter().all(|(k, v)| match k.as_str() {
        "$id" => v.as_str().is_some_and(id_ok),
        "$schema" | "$ref" | "$dynamicRef" | "$recursiveRef" | "$comment" | "title"
        | "description" | "format" | "contentEncoding" | "contentMediaType" => v.is_string(),
        "$anchor" | "$dynamicAnchor" | "$recursiveAnchor" => v.as_str().is_some_and(anchor_ok),
        "$vocabulary" => v
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_boolean)),
        "$defs" | "definitions" | "properties" | "dependentSchemas" => schema_map(v),
        "patternProperties" => {
            schema_map(v)
                && v.as_object()
                    .is_some_and(|m| m.keys().all(|p| pyre::is_valid(p)))
        }
        "dependencies" => v
            .as_object()
            .is_some_and(|m| m.values().all(|d| sub(d) || string_array(d))),
        "prefixItems" | "allOf" | "anyOf" | "oneOf" => schema_array(v),
        "items"
        | "contains"
        | "additionalProperties"
        | "propertyNames"
        | "if"
        | "then"
        | "else"
        | "not"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "contentSchema" => sub(v),
        "type" => match v {
            Value::String(t) => SIMPLE_TYPES.contains(&t.as_str()),
            Value::Array(ts) => {
                !ts.is_empty()
                    && unique(ts)
                    && ts
                        .iter()
                        .all(|t| t.as_str().is_some_and(|t| SIMPLE_TYPES.contains(&t)))
            }
            _ => false,
        },
        "enum" | "examples" => v.is_array(),
        "multipleOf" => match v {
            Value::Number(n) => n.as_f64().is_some_and(|f| f > 0.0),
            _ => false,
        },
        "maximum" | "exclusiveMaximum" | "minimum" | "exclusiveMinimum" => v.is_number(),
        "maxLength" | "minLength" | "maxItems" | "minItems" | "maxContains" | "minContains"
        | "maxProperties" | "minProperties" => non_negative_integer(v),
        "pattern" => v.as_str().is_some_and(pyre::is_valid),
        "uniqueItems" | "deprecated" | "readOnly" | "writeOnly" => v.is_boolean(),
        "required" => string_array(v),
        "dependentRequired" => v.as_object().is_some_and(|m| m.values().all(string_array)),
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(schema: &Value, inst: &Value) -> Vec<String> {
        let v = Validator::new(schema);
        let mut flat = Vec::new();
        for e in v.errors(Some(inst)) {
            e.flatten(&mut flat);
        }
        flat.iter().map(|e| pointer(&e.path)).collect()
    }

    #[test]
    fn errors_carry_instance_paths() {
        let s = json!({"type": "object", "required": ["a"], "properties": {"b": {"type": "array", "items": {"type": "integer"}}}});
        let mut p = paths(&s, &json!({"b": [1, "x", 2.0]}));
        p.sort();
        assert_eq!(p, vec!["", "/b/1"]);
    }

    #[test]
    fn any_of_reports_each_branch_then_itself() {
        let s = json!({"anyOf": [{"properties": {"a": {"type": "string"}}}, {"required": ["z"]}]});
        let p = paths(&s, &json!({"a": 1}));
        assert_eq!(p, vec!["/a", "", ""]);
    }

    #[test]
    fn references_resolve_locally_only() {
        let ok = json!({"$defs": {"a": {"$anchor": "x"}}, "properties": {"p": {"$ref": "#/$defs/a"}, "q": {"$ref": "#x"}}});
        assert!(Validator::new(&ok).references_resolve());
        let bad = json!({"properties": {"p": {"$ref": "#/$defs/missing"}}});
        assert!(!Validator::new(&bad).references_resolve());
        let remote = json!({"$ref": "https://example.com/s.json"});
        assert!(!Validator::new(&remote).references_resolve());
    }

    #[test]
    fn the_metaschema_rules_are_applied() {
        assert!(schema_is_valid(
            &json!({"type": "string", "pattern": "^a+$"})
        ));
        assert!(!schema_is_valid(&json!({"type": "text"})));
        assert!(!schema_is_valid(&json!({"pattern": "("})));
        assert!(!schema_is_valid(&json!({"minLength": -1})));
        assert!(schema_is_valid(&json!({"minLength": 1.0})));
        assert!(!schema_is_valid(&json!({"required": ["a", "a"]})));
        assert!(!schema_is_valid(&json!({"allOf": []})));
    }

    #[test]
    fn formats_follow_python() {
        assert!(format_ok("ipv4", &json!("127.0.0.1")));
        assert!(!format_ok("ipv4", &json!("127.0.0.01")));
        assert!(format_ok("ipv6", &json!("::1")));
        assert!(format_ok("ipv6", &json!("2001:db8::8a2e:370:7334")));
        assert!(!format_ok("ipv6", &json!("2001:db8:::1")));
        assert!(format_ok(
            "uuid",
            &json!("123e4567-e89b-12d3-a456-426614174000")
        ));
        assert!(!format_ok(
            "uuid",
            &json!("123e4567e89b12d3a456426614174000")
        ));
        assert!(format_ok("time", &json!("1:2:3")));
        assert!(!format_ok("time", &json!("24:00:00")));
    }
}
