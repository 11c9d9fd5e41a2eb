//! The secret scan (rule B6): a curated table of credential shapes, matched against every
//! string (and every key) of a document. A finding names the path and the kind of
//! secret, never the secret itself.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde_json::Value;

use super::Finding;
use super::schema::{Seg, pointer};

/// `(name, pattern)`: what kind of secret, and its shape.
pub const RULES: &[(&str, &str)] = &[
    (
        "an AWS access key id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
    ),
    (
        "an AWS secret access key",
        r#"(?i)aws.{0,24}(?:secret|private).{0,24}?[=:"'\s]\s*["']?[A-Za-z0-9/+=]{40}\b"#,
    ),
    ("a Google Cloud API key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    (
        "a Google Cloud service account key",
        r#""type"\s*:\s*"service_account""#,
    ),
    (
        "a private key",
        r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----",
    ),
    (
        "a GitHub token",
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b",
    ),
    (
        "a GitHub fine-grained token",
        r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    ),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    (
        "a Slack webhook URL",
        r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
    ),
    ("an Anthropic API key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    (
        "an OpenAI-style API key",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    ),
    ("a Stripe live key", r"\b(?:sk|rk)_live_[0-9A-Za-z]{16,}"),
    ("an npm token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    (
        "a JSON Web Token",
        r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
    ),
    (
        "a password in a URL",
        r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]+:[^/\s:@]+@[^/\s@]+",
    ),
];

static SET: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(RULES.iter().map(|(_, p)| *p)).unwrap_or_else(|_| RegexSet::empty())
});

/// The password part of a URL, to tell a placeholder (`${DB_PASSWORD}`, `<password>`,
/// `****`) from a real one.
static URL_PASSWORD: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"://[^/\s:@]+:([^/\s:@]+)@").ok());

fn placeholder(password: &str) -> bool {
    password.starts_with('$')
        || (password.starts_with('<') && password.ends_with('>'))
        || (password.starts_with('{') && password.ends_with('}'))
        || password.chars().all(|c| c == '*' || c == 'x' || c == 'X')
}

/// The names of the secret kinds found in `text` (empty: none).
pub fn scan_text(text: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    for i in SET.matches(text).iter() {
        let (name, _) = RULES[i];
        if name == "a password in a URL" {
            let real = URL_PASSWORD.as_ref().is_some_and(|re| {
                re.captures_iter(text)
                    .any(|c| c.get(1).is_some_and(|p| !placeholder(p.as_str())))
            });
            if !real {
                continue;
            }
        }
        out.push(name);
    }
    out
}

/// One B6 finding per string (or key) that looks like a secret.
pub fn scan(doc: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    walk(doc, &mut Vec::new(), &mut out, 0);
    out
}

fn report(kinds: &[&str], path: &[Seg], what: &str, out: &mut Vec<Finding>) {
    if kinds.is_empty() {
        return;
    }
    let p = pointer(path);
    out.push(Finding::invalid(
        "B6",
        if p.is_empty() { "/".to_owned() } else { p },
        format!(
            "{what} looks like {}: remove it; the executor uses its own authorized access",
            kinds.join(" and ")
        ),
    ));
}

fn walk(v: &Value, path: &mut Vec<Seg>, out: &mut Vec<Finding>, depth: usize) {
    if depth > 256 {
        return;
    }
    match v {
        Value::String(s) => report(&scan_text(s), path, "this string", out),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(Seg::Index(i));
                walk(x, path, out, depth + 1);
                path.pop();
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                path.push(Seg::Key(k.clone()));
                report(&scan_text(k), path, "this field name", out);
                walk(x, path, out, depth + 1);
                path.pop();
            }
        }
        _ => {}
    }
}
