//! The HTTP edge over real sockets: a server on an ephemeral loopback port over a real
//! SQLite directory of projects, driven by a real HTTP client (`ureq`). What is checked is
//! what a client sees: documents, statuses derived from refusals, keys and their scopes,
//! projects that do not leak into each other, bodies refused cleanly, and an OpenAPI
//! document that describes every route.

use std::sync::Arc;
use std::time::Duration;

use baton_app::{App, Settings};
use baton_core::ProjectName;
use baton_core::key::Scope;
use baton_store::Database;
use serde_json::{Value, json};
use tempfile::TempDir;

struct Served {
    base: String,
    db: Arc<dyn Database>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    runtime: Arc<tokio::runtime::Runtime>,
    _dir: TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A server over a fresh database with project `shop` (planner, impl-1, owner) and
/// project `docs` (planner).
fn served() -> Served {
    served_with(baton_server::Options::default())
}

/// [`served`], with `options` (its webhook tick made short).
fn served_with(options: baton_server::Options) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    );
    let url = format!("sqlite:{}", dir.path().join("db").display());
    let (db, listener) = runtime.block_on(async {
        let db = baton_store::database(&url, Duration::from_secs(5))
            .await
            .unwrap();
        for (project, people) in [
            (
                "shop",
                &[
                    ("planner", "planner"),
                    ("impl-1", "executor"),
                    ("owner", "owner"),
                ][..],
            ),
            ("docs", &[("planner", "planner")][..]),
        ] {
            let name = ProjectName::new(project).unwrap();
            db.add_project(&name).await.unwrap();
            let app = app(&db, project).await;
            for (who, role) in people {
                app.add_participant("@local", who, role, &Default::default())
                    .await
                    .unwrap();
            }
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        (db, listener)
    });
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = baton_server::Server::with_options(
        Arc::clone(&db),
        Settings {
            payload_cap: 4096,
            // The webhook endpoints here listen on loopback.
            private_webhooks: true,
            ..Settings::default()
        },
        baton_server::Options {
            webhook_tick: Duration::from_millis(50),
            ..options
        },
    );
    let rt = Arc::clone(&runtime);
    let thread = std::thread::spawn(move || {
        rt.block_on(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            let poster = Arc::new(baton_server::HttpPoster::new(true));
            let webhooks = tokio::spawn(Arc::clone(&server).deliver_webhooks(poster));
            baton_server::serve(listener, server, shutdown)
                .await
                .unwrap();
            webhooks.abort();
        });
    });
    Served {
        base,
        db,
        stop: Some(stop),
        thread: Some(thread),
        runtime,
        _dir: dir,
    }
}

async fn app(db: &Arc<dyn Database>, project: &str) -> App {
    let store = db
        .project(&ProjectName::new(project).unwrap())
        .await
        .unwrap();
    App::new(store, Settings::default(), baton_server::host())
}

impl Served {
    /// A key for `who` in `project`, issued where the database is.
    fn key(&self, project: &str, who: &str, scope: Scope) -> String {
        self.runtime.block_on(async {
            let app = app(&self.db, project).await;
            app.issue_key("@local", who, scope, None).await.unwrap().1
        })
    }

    /// The directory holding the projects' files.
    fn projects(&self) -> std::path::PathBuf {
        self._dir.path().join("db")
    }

    fn url(&self, project: &str, path: &str) -> String {
        format!("{}/v1/projects/{project}{path}", self.base)
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// Status and JSON body of a request with `token` (or none), and a JSON body (or none).
fn call(method: &str, url: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let agent = agent();
    let auth = token.map(|t| format!("Bearer {t}"));
    let response = match (method, body) {
        ("GET", _) => {
            let mut request = agent.get(url);
            if let Some(auth) = &auth {
                request = request.header("Authorization", auth);
            }
            request.call()
        }
        (_, body) => {
            let mut request = agent.post(url);
            if let Some(auth) = &auth {
                request = request.header("Authorization", auth);
            }
            request.send_json(body.unwrap_or_else(|| json!({})))
        }
    };
    let mut response = response.expect("the server answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, body)
}

fn raw_post(url: &str, token: &str, bytes: Vec<u8>) -> (u16, Value) {
    let mut response = agent()
        .post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .send(&bytes[..])
        .expect("the server answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn a_request_round_over_http_answers_with_the_cli_documents() {
    let s = served();
    let planner = s.key("shop", "planner", Scope::Write);
    let worker = s.key("shop", "impl-1", Scope::Write);
    let (status, sent) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&planner),
        Some(
            json!({"to": ["impl-1"], "type": "request", "topic": "csv", "body": "keep the filters"}),
        ),
    );
    assert_eq!(status, 200, "{sent}");
    let id = sent["id"].as_str().unwrap().to_owned();
    assert_eq!(sent["duplicate"], false);

    let (status, inbox) = call("GET", &s.url("shop", "/inbox"), Some(&worker), None);
    assert_eq!(status, 200);
    assert_eq!(inbox["participant"], "impl-1", "the key says who is asking");
    assert_eq!(inbox["items"][0]["id"], id.as_str());
    assert_eq!(inbox["items"][0]["status"], "pending");

    let (_, shown) = call(
        "GET",
        &s.url("shop", &format!("/messages/{id}")),
        Some(&worker),
        None,
    );
    assert_eq!(shown["payload"]["body"], "keep the filters");
    assert_eq!(shown["status"], "delivered");

    let (status, step) = call(
        "POST",
        &s.url("shop", &format!("/messages/{id}/complete")),
        Some(&worker),
        Some(json!({"note": "fixed in 4f2a91c"})),
    );
    assert_eq!(status, 200, "{step}");
    assert_eq!(
        (step["end"].as_str(), step["status"].as_str()),
        (Some("recipient"), Some("completed"))
    );
    assert!(
        step["reply"].is_string(),
        "the note went to the sender: {step}"
    );

    let (_, outbox) = call("GET", &s.url("shop", "/outbox"), Some(&planner), None);
    assert_eq!(outbox["items"][0]["status"]["impl-1"], "completed");
    let (_, resume) = call(
        "GET",
        &s.url("shop", "/resume?max_bytes=2000"),
        Some(&planner),
        None,
    );
    assert!(resume["bytes"].as_u64().unwrap() <= 2000, "{resume}");
    assert!(
        resume["text"]
            .as_str()
            .unwrap()
            .contains("# Resume: planner")
    );
}

#[test]
fn statuses_follow_from_the_refusal_kind_and_bodies_name_the_fix() {
    let s = served();
    let planner = s.key("shop", "planner", Scope::Write);
    let worker = s.key("shop", "impl-1", Scope::Write);
    let (_, sent) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&planner),
        Some(json!({"to": ["impl-1"], "type": "request", "topic": "csv", "body": "x"})),
    );
    let id = sent["id"].as_str().unwrap();
    let cases = [
        // Invalid: a hand-back needs a reason.
        (
            "POST",
            format!("/messages/{id}/hand_back"),
            &worker,
            json!({}),
            422,
            "refused",
        ),
        // Invalid: the lifecycle says no (it is pending), and the hint names the steps.
        (
            "POST",
            format!("/messages/{id}/ack"),
            &worker,
            json!({}),
            422,
            "refused",
        ),
        // Not found.
        (
            "GET",
            "/messages/01JZZZZZZZZZZZZZZZZZZZZZZZ".to_owned(),
            &worker,
            json!({}),
            404,
            "not_found",
        ),
        // Forbidden: the planner is not a party to its own delivery step.
        (
            "POST",
            format!("/messages/{id}/hand_back"),
            &planner,
            json!({"reason": "r"}),
            403,
            "forbidden",
        ),
        // Not found: no such recipient, with the registered names in the hint.
        (
            "POST",
            "/messages".to_owned(),
            &planner,
            json!({"to": ["ghost"], "topic": "t", "body": "x"}),
            404,
            "not_found",
        ),
    ];
    for (method, path, token, body, want, code) in cases {
        let body = (method == "POST").then_some(body);
        let (status, answer) = call(method, &s.url("shop", &path), Some(token), body);
        assert_eq!(status, want, "{method} {path}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{method} {path}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    let (_, ack) = call(
        "POST",
        &s.url("shop", &format!("/messages/{id}/ack")),
        Some(&worker),
        Some(json!({})),
    );
    assert!(
        ack["error"]["hint"].as_str().unwrap().contains("/refuse"),
        "{ack}"
    );
    let (_, ghost) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&planner),
        Some(json!({"to": ["ghost"], "topic": "t", "body": "x"})),
    );
    assert!(
        ghost["error"]["hint"].as_str().unwrap().contains("impl-1"),
        "{ghost}"
    );
}

#[test]
fn a_key_decides_who_acts_and_what_it_may_do() {
    let s = served();
    let reader = s.key("shop", "impl-1", Scope::Read);
    let writer = s.key("shop", "impl-1", Scope::Write);
    let admin = s.key("shop", "owner", Scope::Admin);
    let idle = s.key("shop", "planner", Scope::Read);
    let send = json!({"to": ["planner"], "topic": "t", "body": "hello"});
    // A read key reads and changes nothing.
    let (status, _) = call("GET", &s.url("shop", "/inbox"), Some(&reader), None);
    assert_eq!(status, 200);
    let (status, body) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&reader),
        Some(send.clone()),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    // An actor in the request is refused: the key says who acts.
    let mut forged = send.clone();
    forged["as"] = json!("planner");
    let (status, _) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&writer),
        Some(forged),
    );
    assert_eq!(status, 403);
    // Only an admin key issues keys; the token is in that answer and never in a list.
    let (status, _) = call(
        "POST",
        &s.url("shop", "/keys"),
        Some(&writer),
        Some(json!({"participant": "impl-1", "scope": "read"})),
    );
    assert_eq!(status, 403);
    let (status, issued) = call(
        "POST",
        &s.url("shop", "/keys"),
        Some(&admin),
        Some(json!({"participant": "planner", "scope": "write", "expires": "30d"})),
    );
    assert_eq!(status, 200, "{issued}");
    let token = issued["token"].as_str().unwrap().to_owned();
    let (_, listed) = call("GET", &s.url("shop", "/keys"), Some(&admin), None);
    assert!(
        !listed.to_string().contains(&token),
        "a list never shows a token"
    );
    // The new key works; revoking it stops it alone.
    let (status, _) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&token),
        Some(json!({"to": ["impl-1"], "topic": "t", "body": "x"})),
    );
    assert_eq!(status, 200);
    let kid = issued["id"].as_str().unwrap();
    let (status, revoked) = call(
        "POST",
        &s.url("shop", &format!("/keys/{kid}/revoke")),
        Some(&admin),
        None,
    );
    assert_eq!(
        (status, revoked["live"].as_bool()),
        (200, Some(false)),
        "{revoked}"
    );
    let (status, refused) = call("GET", &s.url("shop", "/inbox"), Some(&token), None);
    assert_eq!(status, 401);
    assert!(
        !refused.to_string().contains(&token),
        "an error never echoes the token"
    );
    let (status, _) = call("GET", &s.url("shop", "/inbox"), Some(&writer), None);
    assert_eq!(status, 200, "other keys keep working");
    // The list says when each key was last used: never for one that was not.
    let (_, listed) = call("GET", &s.url("shop", "/keys"), Some(&admin), None);
    let used = |id: &str| {
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {listed}"))["last_used_at"]
            .clone()
    };
    assert!(used(kid).is_string(), "{listed}");
    let idle = baton_core::key::token_key_id(&idle).unwrap();
    assert!(used(idle).is_null(), "{listed}");
}

#[test]
fn a_body_naming_its_actor_is_refused_and_recorded_as_a_security_event() {
    let s = served();
    let writer = s.key("shop", "impl-1", Scope::Write);
    let admin = s.key("shop", "owner", Scope::Admin);
    let generation = || {
        s.runtime
            .block_on(async { app(&s.db, "shop").await.generation().await.unwrap() })
    };
    let before = generation();
    for field in ["as", "actor", "as_name"] {
        let mut forged =
            json!({"to": ["planner"], "topic": "t", "body": "from the planner, honest"});
        forged[field] = json!("planner");
        let (status, body) = call(
            "POST",
            &s.url("shop", "/messages"),
            Some(&writer),
            Some(forged),
        );
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (403, Some("forbidden")),
            "{body}"
        );
    }
    // The first attempt is one event, the security event; the two that repeat it within
    // the minute are counted on it; nothing of any attempt is applied.
    let after = generation();
    assert_eq!(after, before + 1, "one security event and nothing else");
    let (_, listed) = call(
        "GET",
        &s.url("shop", "/security-events"),
        Some(&admin),
        None,
    );
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listed}");
    assert_eq!(items[0]["count"], 3, "every attempt counted: {listed}");
    for (item, seq) in items.iter().zip([after]) {
        assert_eq!(
            item["participant"], "impl-1",
            "the key's participant: {item}"
        );
        assert_eq!(
            item["action"],
            baton_core::authority::ACT_AS_ANOTHER,
            "{item}"
        );
        assert_eq!(item["code"], "forbidden");
        assert_eq!(item["seq"], seq);
    }
    let planner = s.key("shop", "planner", Scope::Read);
    let (_, inbox) = call("GET", &s.url("shop", "/inbox"), Some(&planner), None);
    assert_eq!(inbox["items"], json!([]), "nothing was sent: {inbox}");
}

#[test]
fn actions_beyond_authority_are_refused_and_listed_as_security_events() {
    let s = served();
    let reader = s.key("shop", "impl-1", Scope::Read);
    let writer = s.key("shop", "impl-1", Scope::Write);
    let admin = s.key("shop", "owner", Scope::Admin);
    let ask =
        |topic: &str| json!({"to": ["planner"], "type": "request", "topic": topic, "body": "x"});
    let messages = s.url("shop", "/messages");
    // Beyond the key's scope, and beyond the executor's default policy.
    let (status, _) = call("POST", &messages, Some(&reader), Some(ask("billing")));
    assert_eq!(status, 403);
    let (status, body) = call("POST", &messages, Some(&writer), Some(ask("billing")));
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    let hint = body["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("/participants/impl-1/policy"), "{body}");

    // Only an admin key reads them, newest first.
    let events = s.url("shop", "/security-events");
    let (status, _) = call("GET", &events, Some(&writer), None);
    assert_eq!(status, 403);
    let (status, listed) = call("GET", &events, Some(&admin), None);
    assert_eq!(status, 200, "{listed}");
    let actions: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    // The writer's refused read of the list is itself recorded, newest.
    assert_eq!(actions, ["security-events", "request", "send"], "{listed}");

    // An admin key widens the policy; then the request goes through.
    let (status, set) = call(
        "POST",
        &s.url("shop", "/participants/impl-1/policy"),
        Some(&admin),
        Some(json!({"may": ["request", "send", "accept"], "topics": ["billing-*"]})),
    );
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["policy"]["topics"], json!(["billing-*"]));
    let (status, _) = call("POST", &messages, Some(&writer), Some(ask("billing-api")));
    assert_eq!(status, 200);
    let (status, _) = call("POST", &messages, Some(&writer), Some(ask("docs")));
    assert_eq!(status, 403);
    // A write key cannot change its own policy.
    let (status, _) = call(
        "POST",
        &s.url("shop", "/participants/impl-1/policy"),
        Some(&writer),
        Some(json!({"default": true})),
    );
    assert_eq!(status, 403);
    let (status, bad) = call(
        "POST",
        &s.url("shop", "/participants/impl-1/policy"),
        Some(&admin),
        Some(json!({"may": ["deploy"]})),
    );
    assert_eq!(
        (status, bad["error"]["code"].as_str()),
        (422, Some("refused")),
        "{bad}"
    );
}

#[test]
fn a_key_for_one_project_sees_nothing_of_another() {
    let s = served();
    let shop = s.key("shop", "planner", Scope::Admin);
    let (missing_status, missing) = call("GET", &s.url("nowhere", "/inbox"), Some(&shop), None);
    let (other_status, other) = call("GET", &s.url("docs", "/inbox"), Some(&shop), None);
    let (none_status, _) = call("GET", &s.url("shop", "/inbox"), None, None);
    assert_eq!((missing_status, other_status, none_status), (401, 401, 401));
    assert_eq!(
        missing, other,
        "a missing project and another's answer alike"
    );
    let garbage = "baton_x_0000000000000000000000000000000000000000000000000000000000000000";
    let (status, _) = call("GET", &s.url("shop", "/inbox"), Some(garbage), None);
    assert_eq!(status, 401);
}

#[test]
fn oversized_malformed_and_deeply_nested_bodies_are_refused_cleanly() {
    let s = served();
    let planner = s.key("shop", "planner", Scope::Write);
    let url = s.url("shop", "/messages");
    let big = json!({"to": ["impl-1"], "topic": "t", "body": "x".repeat(100_000)}).to_string();
    let (status, body) = raw_post(&url, &planner, big.into_bytes());
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("too_large")),
        "{body}"
    );
    // Under the transport limit, over the project's payload cap: refused by the rule.
    let over_cap = json!({"to": ["impl-1"], "topic": "t", "body": "x".repeat(5_000)}).to_string();
    let (status, body) = raw_post(&url, &planner, over_cap.into_bytes());
    assert_eq!(status, 422, "{body}");
    let (status, body) = raw_post(&url, &planner, b"{\"to\": [".to_vec());
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_request")),
        "{body}"
    );
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let (status, _) = raw_post(&url, &planner, deep.into_bytes());
    assert_eq!(status, 400);
    let (status, body) = raw_post(
        &url,
        &planner,
        br#"{"to": ["impl-1"], "topic": "t", "body": "x", "colour": "red"}"#.to_vec(),
    );
    assert_eq!(status, 422, "an unknown field is named: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("colour"),
        "{body}"
    );
    // Nothing of it was stored.
    let (_, inbox) = call(
        "GET",
        &s.url("shop", "/inbox"),
        Some(&s.key("shop", "impl-1", Scope::Read)),
        None,
    );
    assert_eq!(inbox["items"].as_array().unwrap().len(), 0);
}

#[test]
fn the_openapi_document_describes_every_route_with_resolvable_schemas() {
    let s = served();
    let (status, doc) = call("GET", &format!("{}/v1/openapi.json", s.base), None, None);
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    for path in [
        "/v1/projects/{project}/inbox",
        "/v1/projects/{project}/messages",
        "/v1/projects/{project}/orders/{id}",
        "/v1/projects/{project}/keys",
    ] {
        assert!(paths.contains_key(path), "{path} is not described");
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let text = doc.to_string();
    let mut refs = 0;
    for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = part.split('"').next().unwrap();
        assert!(
            schemas.contains_key(name),
            "{name} is referenced and not defined"
        );
        refs += 1;
    }
    assert!(refs > 30, "{refs} references");
    // Each documented path answers (with a key) rather than falling through to 404.
    let admin = s.key("shop", "owner", Scope::Admin);
    for (path, item) in paths {
        // Parameters other than the project are not filled in, and a wait would wait.
        if !item.as_object().unwrap().contains_key("get")
            || path.matches('{').count() > 1
            || path.ends_with("/wait")
        {
            continue;
        }
        let url = format!("{}{}", s.base, path.replace("{project}", "shop"));
        let (status, body) = call("GET", &url, Some(&admin), None);
        assert!(status < 500 && status != 404, "GET {path}: {status} {body}");
    }
}

#[test]
fn failures_to_authenticate_are_throttled_and_a_valid_key_never_is() {
    let s = served();
    let good = s.key("shop", "planner", Scope::Read);
    let bad = "baton_x_0000000000000000000000000000000000000000000000000000000000000000";
    let statuses: Vec<u16> = (0..baton_server::FAILURE_LIMIT + 2)
        .map(|_| call("GET", &s.url("shop", "/inbox"), Some(bad), None).0)
        .collect();
    let limit = baton_server::FAILURE_LIMIT as usize;
    assert!(statuses[..limit].iter().all(|s| *s == 401), "{statuses:?}");
    assert!(statuses[limit..].iter().all(|s| *s == 429), "{statuses:?}");
    // A valid key from the same address (behind one proxy, say) is not refused for
    // someone else's failures.
    let (status, body) = call("GET", &s.url("shop", "/inbox"), Some(&good), None);
    assert_eq!(status, 200, "{body}");
    // The address's failures stay throttled, whatever token they try next.
    let other = "baton_y_1111111111111111111111111111111111111111111111111111111111111111";
    let (status, body) = call("GET", &s.url("shop", "/inbox"), Some(other), None);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("too_many_failures"))
    );
}

#[test]
fn a_long_poll_returns_the_news_after_its_point_and_not_the_callers_own() {
    let s = served();
    let planner = s.key("shop", "planner", Scope::Write);
    let worker = s.key("shop", "impl-1", Scope::Write);
    // Nothing for the worker yet: the poll runs to its timeout and says where to go on.
    let (status, idle) = call(
        "GET",
        &s.url("shop", "/wait?after=0&timeout_seconds=1"),
        Some(&worker),
        None,
    );
    assert_eq!(status, 200, "{idle}");
    assert_eq!(idle["events"].as_array().unwrap().len(), 0);
    let after = idle["after"].as_i64().unwrap();
    // A poll answers with what the planner sent the worker after its point, whether it
    // was asked before the send or after (the wait loop's waking is the use cases' test).
    let url = s.url("shop", &format!("/wait?after={after}&timeout_seconds=30"));
    let poll = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let (status, news) = call("GET", &url, Some(&worker), None);
        (status, news, started.elapsed())
    });
    let (_, sent) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&planner),
        Some(json!({"to": ["impl-1"], "topic": "t", "body": "news"})),
    );
    let (status, news, took) = poll.join().unwrap();
    assert_eq!(status, 200, "{news}");
    assert!(took < Duration::from_secs(10), "woke after {took:?}");
    let events = news["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{news}");
    assert_eq!(events[0]["kind"], "message.sent");
    assert_eq!(events[0]["id"], sent["id"]);
    // What the planner did itself is not news to the planner.
    let (_, own) = call(
        "GET",
        &s.url("shop", &format!("/wait?after={after}&timeout_seconds=1")),
        Some(&planner),
        None,
    );
    assert_eq!(own["events"].as_array().unwrap().len(), 0, "{own}");
}

#[test]
fn a_long_poll_in_flight_answers_stopping_at_once_when_the_server_stops() {
    let mut s = served();
    let worker = s.key("shop", "impl-1", Scope::Read);
    let (_, now) = call("GET", &s.url("shop", "/status"), Some(&worker), None);
    let generation = now["generation"].as_i64().unwrap();
    // Two polls with nothing to wake them: the caller's news and the project's status.
    let polls: Vec<_> = [
        format!("/wait?after={generation}&timeout_seconds=60"),
        format!("/status/wait?after={generation}&timeout_seconds=60"),
    ]
    .into_iter()
    .map(|path| {
        let url = s.url("shop", &path);
        let worker = worker.clone();
        std::thread::spawn(move || call("GET", &url, Some(&worker), None))
    })
    .collect();
    std::thread::sleep(Duration::from_millis(500));
    let asked = std::time::Instant::now();
    s.stop.take().unwrap().send(()).unwrap();
    for poll in polls {
        let (status, body) = poll.join().unwrap();
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "stopping", "{body}");
        assert_eq!(body["error"]["retryable"], true, "{body}");
    }
    s.thread.take().unwrap().join().unwrap();
    // Well before either poll's 60 s: the stop did not wait them out.
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
}

/// One request on an open keep-alive connection: `GET path` with `token`; its status once
/// the whole answer is read, or the error that ended the connection.
fn ask(stream: &mut std::net::TcpStream, path: &str, token: &str) -> std::io::Result<u16> {
    use std::io::{BufRead, Read, Write};
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    )?;
    let mut reader = std::io::BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line: {line:?}")))?;
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(status)
}

#[test]
fn a_key_over_its_share_loses_its_oldest_idle_connection_and_a_newcomer_is_heard() {
    let s = served_with(baton_server::Options {
        max_connections: 4,
        ..baton_server::Options::default()
    });
    let hog = s.key("shop", "planner", Scope::Write);
    let other = s.key("shop", "impl-1", Scope::Write);
    let addr = s.base.trim_start_matches("http://").to_owned();
    let path = "/v1/projects/shop/inbox";
    // One key holds every place, each connection kept alive.
    let mut held: Vec<std::net::TcpStream> = (0..4)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    for stream in &mut held {
        assert_eq!(ask(stream, path, &hog).unwrap(), 200);
    }
    // A client with a key of its own is heard.
    let mut newcomer = std::net::TcpStream::connect(&addr).unwrap();
    assert_eq!(
        ask(&mut newcomer, path, &other).expect("the newcomer was closed"),
        200
    );
    // The hog lost its oldest idle connection: the server closed it.
    let mut byte = [0u8; 1];
    held[0]
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    match std::io::Read::read(&mut held[0], &mut byte) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the oldest connection is still open: {other:?}"),
    }
    // Its others are still served, and so is the newcomer.
    for stream in &mut held[1..] {
        assert_eq!(ask(stream, path, &hog).unwrap(), 200);
    }
    assert_eq!(ask(&mut newcomer, path, &other).unwrap(), 200);
}

#[test]
fn with_an_operator_token_metrics_require_it_from_this_machine_too() {
    let s = served_with(baton_server::Options {
        metrics_token: Some("operator-t0ken"),
        ..baton_server::Options::default()
    });
    let scrape = |token: Option<&str>| {
        let mut request = agent().get(&format!("{}/metrics", s.base));
        if let Some(token) = token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        let mut response = request.call().unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap())
    };
    // From loopback (as through a reverse proxy on this host), without the token.
    let (status, body) = scrape(None);
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains("shop"), "{body}");
    let (status, _) = scrape(Some("guess"));
    assert_eq!(status, 403);
    let (status, body) = scrape(Some("operator-t0ken"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("project=\"shop\""), "{body}");
}

#[test]
fn metrics_are_prometheus_text_from_the_log_and_the_traffic() {
    let s = served();
    let planner = s.key("shop", "planner", Scope::Write);
    let worker = s.key("shop", "impl-1", Scope::Write);
    let send = json!({"to": ["impl-1"], "type": "request", "topic": "csv", "body": "x", "idempotency_key": "k1"});
    let (_, sent) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&planner),
        Some(send.clone()),
    );
    let (_, again) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&planner),
        Some(send),
    );
    assert_eq!(again["duplicate"], true);
    call("GET", &s.url("shop", "/inbox"), None, None);
    let scrape = |s: &Served| {
        let mut response = agent().get(&format!("{}/metrics", s.base)).call().unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.body_mut().read_to_string().unwrap()
    };
    let text = scrape(&s);
    for line in [
        "baton_pending_deliveries{project=\"shop\"} 1",
        "baton_open_requests{project=\"shop\"} 1",
        "baton_duplicate_sends_total{project=\"shop\"} 1",
        "baton_failed_authentications_total 1",
        "baton_refusals_total{code=\"unauthenticated\"} 1",
        "baton_http_requests_total{route=\"/v1/projects/{project}/messages\",status=\"200\"} 2",
    ] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
    // The fold moves on with the log: a fetch delivers, a completion is an outcome.
    let id = sent["id"].as_str().unwrap();
    call(
        "GET",
        &s.url("shop", &format!("/messages/{id}")),
        Some(&worker),
        None,
    );
    call(
        "POST",
        &s.url("shop", &format!("/messages/{id}/complete")),
        Some(&worker),
        Some(json!({})),
    );
    let text = scrape(&s);
    assert!(
        text.contains("baton_pending_deliveries{project=\"shop\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("baton_completed_requests{project=\"shop\",topic=\"csv\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("baton_created_to_delivered_seconds_count{project=\"shop\"} 1"),
        "{text}"
    );
}

/// One POST a webhook endpoint received: its headers (lowercased names) and body.
#[derive(Debug, Clone)]
struct Received {
    headers: std::collections::HashMap<String, String>,
    body: Vec<u8>,
}

/// A webhook endpoint on a loopback port that answers each POST with the next status of
/// `statuses` (the last one repeated) and keeps what it received.
fn endpoint(statuses: Vec<u16>) -> (String, Arc<std::sync::Mutex<Vec<Received>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = Arc::clone(&received);
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut headers = std::collections::HashMap::new();
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            loop {
                line.clear();
                reader.read_line(&mut line).unwrap();
                let Some((name, value)) = line.trim_end().split_once(':') else {
                    break;
                };
                headers.insert(name.to_lowercase(), value.trim().to_owned());
            }
            let length: usize = headers["content-length"].parse().unwrap();
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            kept.lock().unwrap().push(Received { headers, body });
            let status = statuses[n.min(statuses.len() - 1)];
            let answer =
                format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (url, received)
}

/// An endpoint that takes connections and never answers; each connection is held open.
fn silent_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    url
}

#[test]
fn a_silent_endpoint_or_a_damaged_project_holds_up_no_other_delivery() {
    let s = served();
    // A damaged file among the projects' files.
    std::fs::write(s.projects().join("broken.db"), b"not a database at all").unwrap();
    let admin = s.key("shop", "owner", Scope::Admin);
    let planner = s.key("shop", "planner", Scope::Write);
    // Two participants told at endpoints that never answer, set first so that they are
    // claimed first, and one told at an endpoint that does.
    for name in ["quiet-1", "quiet-2"] {
        let (status, added) = call(
            "POST",
            &s.url("shop", "/participants"),
            Some(&admin),
            Some(json!({"name": name, "role": "executor"})),
        );
        assert_eq!(status, 200, "{added}");
        let (status, set) = call(
            "POST",
            &s.url("shop", &format!("/participants/{name}/webhook")),
            Some(&admin),
            Some(json!({"url": silent_endpoint()})),
        );
        assert_eq!(status, 200, "{set}");
    }
    let (url, received) = endpoint(vec![200]);
    let (status, set) = call(
        "POST",
        &s.url("shop", "/participants/impl-1/webhook"),
        Some(&admin),
        Some(json!({"url": url})),
    );
    assert_eq!(status, 200, "{set}");
    let started = std::time::Instant::now();
    let (status, sent) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&planner),
        Some(json!({"to": ["quiet-1", "quiet-2", "impl-1"], "topic": "t", "body": "x"})),
    );
    assert_eq!(status, 200, "{sent}");
    // Told while the silent endpoints still hold their posts (each may take up to
    // POST_TIMEOUT): one after the other, it would wait for both.
    let bound = baton_server::POST_TIMEOUT;
    while received.lock().unwrap().is_empty() {
        assert!(
            started.elapsed() < bound,
            "the answering endpoint was not told within {bound:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The damaged project is listed as unavailable; the others are counted.
    let mut response = agent().get(&format!("{}/metrics", s.base)).call().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.body_mut().read_to_string().unwrap();
    assert!(
        text.contains("baton_project_unavailable{project=\"broken\"} 1"),
        "{text}"
    );
    assert!(text.contains("baton_events{project=\"shop\"}"), "{text}");
    assert!(
        text.contains("baton_live_runs{project=\"shop\",source=\"session\"} 0"),
        "{text}"
    );
}

#[test]
fn a_webhook_is_told_metadata_only_signed_and_again_after_a_failure() {
    let s = served();
    let admin = s.key("shop", "owner", Scope::Admin);
    let planner = s.key("shop", "planner", Scope::Write);
    let (url, received) = endpoint(vec![500, 200]);
    let (status, set) = call(
        "POST",
        &s.url("shop", "/participants/impl-1/webhook"),
        Some(&admin),
        Some(json!({"url": url})),
    );
    assert_eq!(status, 200, "{set}");
    let secret = set["secret"].as_str().expect("the secret, once").to_owned();
    assert!(secret.starts_with("whsec_"));
    let (_, listed) = call("GET", &s.url("shop", "/webhooks"), Some(&admin), None);
    assert!(
        !listed.to_string().contains(&secret),
        "a list never shows the secret"
    );

    let (status, sent) = call(
        "POST",
        &s.url("shop", "/messages"),
        Some(&planner),
        Some(json!({"to": ["impl-1"], "type": "request", "topic": "csv",
                    "body": "PAYLOAD-WORDS-NOT-FOR-WEBHOOKS"})),
    );
    assert_eq!(status, 200, "{sent}");
    let id = sent["id"].as_str().unwrap();

    // Told twice: the 500 is retried after its backoff (one second).
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while received.lock().unwrap().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "not retried in time");
        std::thread::sleep(Duration::from_millis(50));
    }
    let posts = received.lock().unwrap().clone();
    for post in &posts {
        let text = String::from_utf8(post.body.clone()).unwrap();
        assert!(!text.contains("PAYLOAD-WORDS"), "never the payload: {text}");
        assert!(
            !text.contains(&planner) && !text.contains(&secret),
            "never a token or secret"
        );
        let timestamp: i64 = post.headers["x-baton-timestamp"].parse().unwrap();
        assert_eq!(
            post.headers["x-baton-signature"],
            baton_core::webhook::signature(&secret, timestamp, &post.body)
        );
        let body: Value = serde_json::from_slice(&post.body).unwrap();
        assert_eq!(body["schema"], "baton/webhook@1");
        assert_eq!(
            (body["project"].as_str(), body["participant"].as_str()),
            (Some("shop"), Some("impl-1"))
        );
        let told = &body["events"][0];
        assert_eq!(
            (
                told["kind"].as_str(),
                told["subject"].as_str(),
                told["topic"].as_str(),
                told["from"].as_str()
            ),
            (Some("message.sent"), Some(id), Some("csv"), Some("planner"))
        );
        assert_eq!(told["to"], json!(["impl-1"]));
    }
    let first: Value = serde_json::from_slice(&posts[0].body).unwrap();
    let second: Value = serde_json::from_slice(&posts[1].body).unwrap();
    assert_eq!(
        first["events"], second["events"],
        "at least once: the same events again"
    );
    assert_ne!(first["delivery"], second["delivery"]);

    // Settled: the cursor moved past the message, no failures left.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (_, listed) = call("GET", &s.url("shop", "/webhooks"), Some(&admin), None);
        let row = &listed["items"][0];
        if row["failures"] == 0 && row["delivered_at"].is_string() {
            assert!(row["last_error"].is_null(), "{row}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never settled: {listed}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // What impl-1 does itself is not told to it; nothing more arrives.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(received.lock().unwrap().len(), 2);

    // Removing it answers without a URL.
    let (status, removed) = call(
        "POST",
        &s.url("shop", "/participants/impl-1/webhook"),
        Some(&admin),
        Some(json!({"url": null})),
    );
    assert_eq!((status, removed.get("url")), (200, None), "{removed}");
}

#[test]
fn the_human_queue_over_http_raises_lists_and_acknowledges_needs() {
    let s = served();
    let worker = s.key("shop", "impl-1", Scope::Write);
    let reader = s.key("shop", "owner", Scope::Read);
    let (status, raised) = call(
        "POST",
        &s.url("shop", "/needs"),
        Some(&worker),
        Some(json!({"text": "which fixture is canonical?"})),
    );
    assert_eq!(status, 200, "{raised}");
    let item = raised["item"].as_str().unwrap().to_owned();
    let (status, queue) = call(
        "GET",
        &s.url("shop", "/queue?lane=needs"),
        Some(&reader),
        None,
    );
    assert_eq!(status, 200, "{queue}");
    assert_eq!(queue["lanes"][0]["items"][0]["id"], item.as_str());
    assert_eq!(queue["lanes"][0]["items"][0]["source"], "need_by_hand");
    // A read key may look, not acknowledge.
    let ack = s.url("shop", &format!("/queue/{item}/ack"));
    let (status, _) = call("POST", &ack, Some(&reader), None);
    assert_eq!(status, 403);
    let (status, acked) = call("POST", &ack, Some(&worker), None);
    assert_eq!(status, 200, "{acked}");
    let (_, queue) = call("GET", &s.url("shop", "/queue"), Some(&reader), None);
    assert_eq!(queue["lanes"].as_array().unwrap().len(), 4);
    assert!(
        queue["lanes"][2]["items"].as_array().unwrap().is_empty(),
        "{queue}"
    );
}

#[test]
fn actions_beyond_authority_over_http_include_memory_an_observer_writes_nothing() {
    let s = served();
    s.runtime.block_on(async {
        app(&s.db, "shop")
            .await
            .add_participant("@local", "watch", "observer", &Default::default())
            .await
            .unwrap();
    });
    let watcher = s.key("shop", "watch", Scope::Write);
    let admin = s.key("shop", "owner", Scope::Admin);
    let (status, body) = call(
        "POST",
        &s.url("shop", "/decisions"),
        Some(&watcher),
        Some(json!({"text": "x", "why": "w"})),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    let (_, state) = call("GET", &s.url("shop", "/state"), Some(&watcher), None);
    assert_eq!(state["decisions"], json!([]), "{state}");
    let (_, listed) = call(
        "GET",
        &s.url("shop", "/security-events"),
        Some(&admin),
        None,
    );
    assert_eq!(listed["items"][0]["participant"], "watch", "{listed}");
}

/// A JSON-RPC request to the MCP endpoint as raw text, with what Streamable HTTP asks for.
fn mcp_post(url: &str, token: &str, text: &str) -> (u16, Value) {
    let mut response = agent()
        .post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .send(text.as_bytes())
        .expect("the server answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn mcp_over_http_holds_a_call_to_the_same_boundary_as_stdio_and_rest() {
    let s = served();
    let planner = s.key("shop", "planner", Scope::Write);
    let url = s.url("shop", "/mcp");
    for payload in [
        r#"{"n":1,"n":2}"#,
        r#"{"n":123456789012345678901234567890}"#,
        r#"{"s":"a\u0000b"}"#,
    ] {
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"send","arguments":{{"to":["impl-1"],"topic":"t","payload":{payload}}}}}}}"#
        );
        let (status, answer) = mcp_post(&url, &planner, &call);
        assert_eq!(status, 400, "{payload}: {answer}");
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }
    // Nothing was stored.
    let (_, outbox) = call(
        "GET",
        &s.url("shop", "/outbox?all=true"),
        Some(&planner),
        None,
    );
    assert_eq!(outbox["items"], json!([]), "{outbox}");
}

#[test]
fn mcp_over_http_refuses_a_request_from_another_origin() {
    let s = served();
    let planner = s.key("shop", "planner", Scope::Write);
    let url = s.url("shop", "/mcp");
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let post = |origin: &str| {
        agent()
            .post(&url)
            .header("Authorization", &format!("Bearer {planner}"))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Origin", origin)
            .send(list.as_bytes())
            .expect("the server answers")
            .status()
            .as_u16()
    };
    assert_eq!(post("http://evil.example"), 403);
    assert_eq!(post("null"), 403);
    // Its own origin, and no origin at all (a program, not a page), are heard.
    assert_eq!(post(&s.base), 200);
    assert_eq!(mcp_post(&url, &planner, list).0, 200);
}

#[test]
fn mcp_over_http_offers_the_keys_role_profile() {
    let s = served();
    let url = s.url("shop", "/mcp");
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let names = |token: &str| -> Vec<String> {
        let (status, answer) = mcp_post(&url, token, list);
        assert_eq!(status, 200, "{answer}");
        let listed = answer["result"]["tools"].as_array().unwrap();
        let bytes = serde_json::to_vec(&answer["result"]).unwrap().len();
        assert!(bytes <= baton_mcp::PROFILE_BUDGET, "{bytes} bytes");
        listed
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let planner = names(&s.key("shop", "planner", Scope::Write));
    let expected: Vec<String> = baton_mcp::Profile::Planner
        .tools()
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    let mut sorted = planner.clone();
    sorted.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(sorted, want);
    // The planner closes its own end of a request.
    for t in ["complete", "archive"] {
        assert!(planner.iter().any(|n| n == t), "{planner:?}");
    }
    let executor = names(&s.key("shop", "impl-1", Scope::Write));
    assert!(!executor.iter().any(|n| n == "send"), "{executor:?}");
}
