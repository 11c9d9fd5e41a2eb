//! The five ways in run one script alike: the command line, the command line over a
//! server, REST, MCP over stdio and MCP over HTTP (the official Python SDK), each on a
//! store of its own set up the same way. `tests/mcp/differential.py` runs the script
//! (operations of every kind, some of them refused) through each edge and checks that every
//! step is taken or refused alike and that the stores end with the same documents and the
//! same exported log, ids, times and key hashes aside.

use serde_json::json;

use crate::common::baton_exe;
use crate::mcp::script;
use crate::server::{Serving, admin, serve};

const EDGES: &[&str] = &["cli", "cli-over-server", "rest", "mcp-stdio", "mcp-http"];
const TEAM: &[(&str, &str)] = &[
    ("planner", "planner"),
    ("impl-1", "executor"),
    ("obs", "observer"),
];

#[test]
fn one_script_through_the_five_edges_ends_with_the_same_documents_and_log() {
    let dirs: Vec<tempfile::TempDir> = EDGES.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let mut servers: Vec<Serving> = Vec::new();
    let mut edges = Vec::new();
    for (edge, dir) in EDGES.iter().zip(&dirs) {
        let url = format!("sqlite:{}", dir.path().join("projects").display());
        admin(&url, None, &["project", "add", "shop"]);
        for (name, role) in TEAM {
            admin(&url, Some("shop"), &["agent", "add", name, "--role", role]);
        }
        let mut tokens = serde_json::Map::new();
        for (name, _) in TEAM {
            let issued = admin(
                &url,
                Some("shop"),
                &["key", "issue", name, "--scope", "write"],
            );
            tokens.insert((*name).to_owned(), issued["token"].clone());
        }
        let base = if matches!(*edge, "cli" | "mcp-stdio") {
            None
        } else {
            let serving = serve(&url);
            let base = serving.base.clone();
            servers.push(serving);
            Some(base)
        };
        edges.push(json!({"edge": edge, "db": url, "base": base, "tokens": tokens}));
    }
    let config = json!({"baton": baton_exe(), "edges": edges});
    let stdout = script("differential.py", &[config.to_string()]);
    assert!(
        stdout.contains("through 5 edges end with the same documents and the same"),
        "{stdout}"
    );
    drop(servers);
}
