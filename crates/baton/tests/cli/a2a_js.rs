//! Participants as A2A 1.0 agents, driven by the official JavaScript SDK (`@a2a-js/sdk`,
//! pinned in `tests/node/package.json`, under Node 22) beside the Python round of
//! `a2a.rs`: the card resolved by the SDK's default resolver, tasks sent, answered in
//! their context, worked on with the command line, read back, listed and canceled, and the
//! errors as the SDK reads them. Then the frames no SDK sends, as raw HTTP: each must be
//! refused with JSON-RPC's own error and change nothing.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{Value, json};

use crate::a2a::{Shop, agent, cli, ok, shop, shop_on_postgresql, state};
use crate::node;
use crate::server::{Serving, admin, serve, serve_with};

/// `tests/node/a2a/client.mjs` under Node 22: each call a line in, its outcome a line out.
struct Js {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Js {
    fn start() -> Self {
        let mut child = node::script("a2a/client.mjs")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start node");
        Self {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    /// One SDK call as `token` on the agent at `base`: `{"ok": …}` or `{"error": …}`.
    fn call(&mut self, base: &str, token: &str, op: &str, mut args: Value) -> Value {
        args["base"] = json!(base);
        args["token"] = json!(token);
        args["op"] = json!(op);
        writeln!(self.input, "{args}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        assert!(
            !line.is_empty(),
            "client.mjs ended without answering {args}"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("client.mjs printed {line:?}: {e}"))
    }
}

impl Drop for Js {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A user message of text parts (and data parts), as ProtoJSON.
fn message(id: &str, context: Option<&str>, task: Option<&str>, parts: Value) -> Value {
    let mut message = json!({"messageId": id, "role": "ROLE_USER", "parts": parts});
    if let Some(context) = context {
        message["contextId"] = json!(context);
    }
    if let Some(task) = task {
        message["taskId"] = json!(task);
    }
    json!({ "message": message })
}

/// The ids of a `ListTasks` answer's tasks, in its order.
fn listed_ids(listed: &Value) -> Vec<&str> {
    listed["tasks"]
        .as_array()
        .map(|tasks| tasks.iter().map(|t| t["id"].as_str().unwrap()).collect())
        .unwrap_or_default()
}

/// A task's status time (ProtoJSON's RFC 3339), in milliseconds.
fn status_time(task: &Value) -> i64 {
    let at = task["status"]["timestamp"].as_str().unwrap_or_default();
    baton_core::time::timestamp(at).unwrap_or_else(|| panic!("a status time: {task}"))
}

/// The error an SDK call ended in: its class; its details, when it has any, a list of
/// objects each naming its type.
fn error<'a>(answer: &'a Value, class: &str) -> &'a Value {
    assert_eq!(answer["error"], class, "{answer}");
    let typed = match &answer["data"] {
        Value::Null => true,
        Value::Array(details) => details.iter().all(|d| d["@type"].is_string()),
        _ => false,
    };
    assert!(typed, "error.data is a list of typed details: {answer}");
    answer
}

#[test]
fn the_a2a_javascript_sdk_hands_work_to_a_participant_and_reads_it_back() {
    js_round(&shop());
}

#[test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
fn the_a2a_javascript_sdk_hands_work_to_a_participant_on_postgresql() {
    js_round(&shop_on_postgresql("js"));
}

fn js_round(shop: &Shop) {
    let server = serve(&shop.url);
    let url = agent(&server, "shop", "impl-1");
    // The agent's URL as a client is given it: with its trailing slash, so the card the
    // resolver looks for relative to it is the participant's.
    let base = format!("{url}/");
    let mut js = Js::start();
    let planner = shop.planner.as_str();

    // The card, as the SDK's default resolver finds it.
    let card = ok(js.call(&base, planner, "card", json!({})));
    assert_eq!(card["name"], "impl-1", "{card}");
    assert_eq!(card["supportedInterfaces"][0]["url"], url.as_str());
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    // Without the slash the resolver looks beside the participant, where there is no card.
    let bare = js.call(&url, planner, "card", json!({}));
    let said = bare["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("/a2a/.well-known/agent-card.json: 404"),
        "{bare}"
    );

    // A task is a request in the participant's inbox; the same messageId again is it too.
    let first = message(
        "js-1",
        Some("billing"),
        None,
        json!([{"text": "Fix the invoice rounding"}]),
    );
    let sent = ok(js.call(&base, planner, "send", first.clone()));
    let task = &sent["task"];
    let id = task["id"].as_str().unwrap().to_owned();
    assert_eq!(state(task), "TASK_STATE_SUBMITTED", "{sent}");
    assert_eq!(task["contextId"], "billing");
    assert_eq!(
        task["history"][0]["parts"],
        json!([{"text": "Fix the invoice rounding"}])
    );
    // The client's message keeps the id the client gave it; the task is Baton's request.
    assert_eq!(task["history"][0]["messageId"], "js-1", "{sent}");
    assert_ne!(task["id"], "js-1");
    let submitted_at = status_time(task);
    let again = ok(js.call(&base, planner, "send", first));
    assert_eq!(again["task"]["id"], id.as_str());
    assert_eq!(again["task"]["history"][0]["messageId"], "js-1");
    let inbox = cli(&server, &shop.executor, &["inbox"]);
    assert_eq!(inbox["items"].as_array().unwrap().len(), 1, "{inbox}");

    // Read (working), a question back (input required), the answer in the task's context.
    cli(&server, &shop.executor, &["show", &id]);
    let working = ok(js.call(&base, planner, "get", json!({"id": id})));
    assert_eq!(state(&working), "TASK_STATE_WORKING", "{working}");
    // The status time is when the recipient's status moved: its read, after the send.
    let delivered_at = status_time(&working);
    assert!(delivered_at > submitted_at, "{working}");
    let question = cli(
        &server,
        &shop.executor,
        &["send", "--reply-to", &id, "--body", "Half-even or half-up?"],
    );
    let asked = ok(js.call(&base, planner, "get", json!({"id": id})));
    assert_eq!(state(&asked), "TASK_STATE_INPUT_REQUIRED", "{asked}");
    assert_eq!(
        asked["status"]["message"]["parts"],
        json!([{"text": "Half-even or half-up?"}])
    );
    assert_eq!(asked["status"]["message"]["role"], "ROLE_AGENT");
    // The participant's message, sent without a key, goes by Baton's id.
    assert_eq!(asked["status"]["message"]["messageId"], question["id"]);
    let answered = ok(js.call(
        &base,
        planner,
        "send",
        message(
            "js-2",
            Some("billing"),
            Some(&id),
            json!([{"text": "Half-even"}, {"data": {"places": 2}}]),
        ),
    ));
    assert_eq!(answered["task"]["id"], id.as_str());
    assert_eq!(state(&answered["task"]), "TASK_STATE_WORKING", "{answered}");
    let last = answered["task"]["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "ROLE_USER");
    assert_eq!(last["messageId"], "js-2", "{answered}");
    assert_eq!(
        last["parts"],
        json!([{"text": "Half-even"}, {"data": {"places": 2}, "mediaType": "application/json"}])
    );
    let ids: Vec<&str> = answered["task"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["messageId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["js-1", question["id"].as_str().unwrap(), "js-2"],
        "{answered}"
    );
    // A follow-up naming another context is refused, and adds nothing to the thread.
    let elsewhere = js.call(
        &base,
        planner,
        "send",
        message(
            "js-3",
            Some("billing-eu"),
            Some(&id),
            json!([{"text": "Wrong place"}]),
        ),
    );
    error(&elsewhere, "RequestMalformedError");
    assert_eq!(elsewhere["code"], -32602);

    // Completed with a note: an artifact.
    let note = "Rounded half-even to two places";
    cli(&server, &shop.executor, &["complete", &id, "--note", note]);
    let done = ok(js.call(&base, planner, "get", json!({"id": id})));
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(done["artifacts"][0]["name"], "completion note", "{done}");
    assert_eq!(done["artifacts"][0]["parts"], json!([{"text": note}]));
    let short = ok(js.call(&base, planner, "get", json!({"id": id, "historyLength": 1})));
    assert_eq!(short["history"].as_array().unwrap().len(), 1, "{short}");

    // Two more tasks; the list is newest first, counted whole, a page at a time.
    let mut send = |message_id: &str, text: &str| -> String {
        let sent = ok(js.call(
            &base,
            planner,
            "send",
            message(message_id, Some("billing"), None, json!([{ "text": text }])),
        ));
        sent["task"]["id"].as_str().unwrap().to_owned()
    };
    let second = send("js-4", "Rename the invoices");
    let third = send("js-5", "Archive last year");
    let listed = ok(js.call(&base, planner, "list", json!({"request": {}})));
    assert_eq!(
        listed_ids(&listed),
        [third.as_str(), second.as_str(), id.as_str()],
        "{listed}"
    );
    // The list is by status time, not by sending: the second, read, comes first.
    cli(&server, &shop.executor, &["show", &second]);
    let listed = ok(js.call(&base, planner, "list", json!({"request": {}})));
    let ids = listed_ids(&listed);
    assert_eq!(
        ids,
        [second.as_str(), third.as_str(), id.as_str()],
        "{listed}"
    );
    let times: Vec<i64> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(status_time)
        .collect();
    assert!(times.windows(2).all(|w| w[0] > w[1]), "{listed}");
    assert_eq!(listed["totalSize"], 3, "{listed}");
    assert!(
        listed["tasks"][2].get("artifacts").is_none(),
        "artifacts only when asked for: {listed}"
    );
    // A task that moves while a client pages goes to the front; the token keeps its
    // place, so the pages give every task once.
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let page = ok(js.call(
            &base,
            planner,
            "list",
            json!({"request": {"pageSize": 2, "pageToken": token}}),
        ));
        assert_eq!(page["totalSize"], 3, "{page}");
        pages.extend(listed_ids(&page).into_iter().map(str::to_owned));
        token = page["nextPageToken"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if token.is_empty() {
            break;
        }
        if pages.len() == 2 {
            cli(&server, &shop.executor, &["show", &third]);
        }
    }
    assert_eq!(pages, ids, "pages of two give the whole list, once each");
    // Only what changed after a time: the third's read came after the second's.
    let since = ok(js.call(
        &base,
        planner,
        "list",
        json!({"request": {"statusTimestampAfter": listed["tasks"][0]["status"]["timestamp"]}}),
    ));
    assert_eq!(listed_ids(&since), [third.as_str()], "{since}");
    assert_eq!(since["totalSize"], 1, "{since}");
    let finished = ok(js.call(
        &base,
        planner,
        "list",
        json!({"request": {"status": "TASK_STATE_COMPLETED", "includeArtifacts": true}}),
    ));
    assert_eq!(finished["totalSize"], 1, "{finished}");
    assert_eq!(finished["tasks"][0]["id"], id.as_str());
    assert_eq!(
        finished["tasks"][0]["artifacts"][0]["name"],
        "completion note"
    );
    // A state of the protocol's that no Baton task waits in: a valid filter, none kept.
    let authenticating = ok(js.call(
        &base,
        planner,
        "list",
        json!({"request": {"status": "TASK_STATE_AUTH_REQUIRED"}}),
    ));
    // (ProtoJSON leaves a zero out.)
    assert_eq!(authenticating.get("totalSize"), None, "{authenticating}");
    assert_eq!(authenticating.get("tasks"), None, "{authenticating}");

    // Cancel: an unfinished task's sender closes its end; a finished one cannot be
    // canceled.
    let canceled = ok(js.call(&base, planner, "cancel", json!({"id": second})));
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED", "{canceled}");
    let refused = js.call(&base, planner, "cancel", json!({"id": id}));
    error(&refused, "TaskNotCancelableError");

    // Errors as the SDK reads them.
    let missing = js.call(&base, planner, "get", json!({"id": "01NOTATASK"}));
    assert_eq!(
        error(&missing, "TaskNotFoundError")["data"][0]["reason"],
        "TASK_NOT_FOUND"
    );
    let own = js.call(&base, &shop.executor, "get", json!({"id": id}));
    error(&own, "TaskNotFoundError");
    let extended = js.call(&base, planner, "extended", json!({}));
    error(&extended, "UnsupportedOperationError");
    let file = js.call(
        &base,
        planner,
        "send",
        message(
            "js-6",
            Some("billing"),
            None,
            json!([{"url": "https://example.com/a.pdf"}]),
        ),
    );
    error(&file, "ContentTypeNotSupportedError");
    let beyond = js.call(
        &base,
        planner,
        "send",
        message("js-7", Some("payroll"), None, json!([{"text": "Pay them"}])),
    );
    let beyond = error(&beyond, "RequestMalformedError");
    assert_eq!(beyond["code"], -32600);
    assert_eq!(beyond["data"][0]["domain"], "baton", "{beyond}");
    let stranger = js.call(&base, &shop.stranger, "get", json!({"id": id}));
    assert!(
        stranger["message"]
            .as_str()
            .unwrap_or_default()
            .contains(": 401"),
        "another project's key finds no card: {stranger}"
    );
    let listed = ok(js.call(&base, planner, "list", json!({"request": {}})));
    assert_eq!(
        listed["totalSize"], 3,
        "nothing refused made a task: {listed}"
    );
}

// ---- frames no SDK sends ----------------------------------------------------------------

/// A server of `shop` and a way to post raw bodies to participant `impl-1` as `token`.
struct Raw {
    shop: Shop,
    server: Serving,
    http: ureq::Agent,
}

impl Raw {
    fn new() -> Self {
        let shop = shop();
        let server = serve(&shop.url);
        let http = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Self { shop, server, http }
    }

    fn base(&self) -> String {
        agent(&self.server, "shop", "impl-1")
    }

    /// POSTs `body` as the planner: the HTTP status and the body's text.
    fn post(&self, body: &str) -> (u16, String) {
        let mut response = self
            .http
            .post(&self.base())
            .header("Authorization", &format!("Bearer {}", self.shop.planner))
            .header("A2A-Version", "1.0")
            .header("Content-Type", "application/json")
            .send(body)
            .unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap())
    }

    /// POSTs `body`: its JSON-RPC answer.
    fn rpc(&self, body: &str) -> Value {
        let (status, text) = self.post(body);
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    /// How many requests the participant holds (none of these frames may make one).
    fn held(&self) -> usize {
        let inbox = cli(&self.server, &self.shop.executor, &["inbox", "--all"]);
        inbox["items"].as_array().unwrap().len()
    }
}

fn send_params() -> Value {
    json!({"message": {"messageId": "raw-1", "role": "ROLE_USER", "contextId": "billing",
                       "parts": [{"text": "Fix the invoice rounding"}]}})
}

#[test]
fn a2a_a_bare_array_is_not_a_request_and_creates_nothing() {
    let raw = Raw::new();
    let bare = json!(["2.0", 1, "SendMessage", send_params()]).to_string();
    let answer = raw.rpc(&bare);
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], Value::Null);
    // A batch of one well-formed request is refused alike: A2A has no batches.
    let batch =
        json!([{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params()}]);
    let answer = raw.rpc(&batch.to_string());
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(raw.held(), 0);
}

#[test]
fn a2a_params_given_by_position_are_invalid_params_and_create_nothing() {
    let raw = Raw::new();
    let send = json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": [send_params()["message"]]});
    let answer = raw.rpc(&send.to_string());
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["id"], 3);
    let get = json!({"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": ["01ABC"]});
    let answer = raw.rpc(&get.to_string());
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(raw.held(), 0);
}

#[test]
fn a2a_a_notification_is_neither_run_nor_answered() {
    let raw = Raw::new();
    let notification = json!({"jsonrpc": "2.0", "method": "SendMessage", "params": send_params()});
    let (status, body) = raw.post(&notification.to_string());
    assert_eq!(status, 204, "{body}");
    assert_eq!(body, "");
    assert_eq!(raw.held(), 0);
    // The same frame with an id is a request: it runs, and is answered.
    let mut request = notification;
    request["id"] = json!(9);
    let answer = raw.rpc(&request.to_string());
    assert_eq!(answer["id"], 9);
    assert_eq!(
        state(&answer["result"]["task"]),
        "TASK_STATE_SUBMITTED",
        "{answer}"
    );
    assert_eq!(raw.held(), 1);
}

#[test]
fn a2a_a_part_with_two_contents_is_refused_whole() {
    let raw = Raw::new();
    let mut params = send_params();
    params["message"]["parts"] = json!([{"text": "Fix it", "data": {"places": 2}}]);
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params});
    let answer = raw.rpc(&send.to_string());
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let said = answer["error"]["message"].as_str().unwrap();
    assert!(said.contains("text and data"), "{said}");
    assert_eq!(raw.held(), 0);
}

#[test]
fn a2a_an_unknown_method_is_said_back_cut_short() {
    let raw = Raw::new();
    let method = "X".repeat(400 * 1024);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}});
    let (status, body) = raw.post(&call.to_string());
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], -32601, "{body:.300}");
    assert!(body.len() < 1024, "{} bytes answer a long name", body.len());
}

#[test]
fn a2a_errors_carry_typed_details() {
    let raw = Raw::new();
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "01ABC"}});
    let answer = raw.rpc(&get.to_string());
    assert_eq!(
        answer["error"]["data"],
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}]),
        "{answer}"
    );
    // A rule's refusal: the reason is Baton's code; the whole error rides as a Struct.
    let mut params = send_params();
    params["message"]["contextId"] = json!("payroll");
    let send = json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": params});
    let answer = raw.rpc(&send.to_string());
    let details = answer["error"]["data"].as_array().expect("a list");
    assert!(details.iter().all(|d| d["@type"].is_string()), "{answer}");
    assert_eq!(
        details[0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    assert_eq!(details[0]["domain"], "baton");
    assert_eq!(
        details[1]["@type"],
        "type.googleapis.com/google.protobuf.Struct"
    );
    assert_eq!(
        details[0]["reason"],
        details[1]["value"]["code"]
            .as_str()
            .unwrap()
            .to_ascii_uppercase()
    );
}

#[test]
fn a2a_the_card_is_cached_and_revalidated() {
    let raw = Raw::new();
    let card = format!("{}/.well-known/agent-card.json", raw.base());
    let fetch = |tag: Option<&str>| {
        let mut request = raw
            .http
            .get(&card)
            .header("Authorization", &format!("Bearer {}", raw.shop.planner));
        if let Some(tag) = tag {
            request = request.header("If-None-Match", tag);
        }
        let mut response = request.call().unwrap();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let (etag, cache) = (header("etag"), header("cache-control"));
        let status = response.status().as_u16();
        (
            status,
            etag,
            cache,
            response.body_mut().read_to_string().unwrap(),
        )
    };
    let (status, etag, cache, body) = fetch(None);
    assert_eq!(status, 200);
    let etag = etag.expect("an ETag");
    assert!(
        cache.as_deref().is_some_and(|c| c.contains("max-age=")),
        "{cache:?}"
    );
    let (status, again, _, empty) = fetch(Some(&etag));
    assert_eq!(status, 304);
    assert_eq!(again.as_deref(), Some(etag.as_str()));
    assert_eq!(empty, "");
    let (status, _, _, fresh) = fetch(Some("\"another\""));
    assert_eq!(status, 200);
    assert_eq!(fresh, body);
}

#[test]
fn a2a_the_card_names_the_public_url_not_what_the_request_headers_say() {
    let shop = shop();
    let card_url = |server: &Serving| {
        let card: Value = ureq::get(&format!(
            "{}/.well-known/agent-card.json",
            agent(server, "shop", "impl-1")
        ))
        .header("Authorization", &format!("Bearer {}", shop.planner))
        .header("X-Forwarded-Proto", "https")
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
        card["supportedInterfaces"][0]["url"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // Without a public URL, the request's own headers are all there is to go by.
    let plain = serve(&shop.url);
    assert!(
        card_url(&plain).starts_with("https://127.0.0.1:"),
        "{}",
        card_url(&plain)
    );
    drop(plain);
    // With one, the operator's word stands, whatever a client or a proxy forwards.
    let public = serve_with(&shop.url, &["--public-url", "https://baton.example.com/"]);
    assert_eq!(
        card_url(&public),
        "https://baton.example.com/v1/projects/shop/a2a/impl-1"
    );
}

#[test]
fn a2a_a_participant_that_takes_no_work_still_lists_a_skill() {
    let raw = Raw::new();
    admin(
        &raw.shop.url,
        Some("shop"),
        &["agent", "add", "watcher", "--role", "observer"],
    );
    let card: Value = raw
        .http
        .get(&format!(
            "{}/.well-known/agent-card.json",
            agent(&raw.server, "shop", "watcher")
        ))
        .header("Authorization", &format!("Bearer {}", raw.shop.planner))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    let skills = card["skills"].as_array().unwrap();
    assert_eq!(skills.len(), 1, "{card}");
    assert_eq!(skills[0]["id"], "no-requests");
}

#[test]
fn a2a_the_card_address_without_a_participant_says_which_url_to_give() {
    let raw = Raw::new();
    let beside = format!(
        "{}/v1/projects/shop/a2a/.well-known/agent-card.json",
        raw.server.base
    );
    let mut response = raw
        .http
        .get(&beside)
        .header("Authorization", &format!("Bearer {}", raw.shop.planner))
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let answer: Value = response.body_mut().read_json().unwrap();
    let hint = answer["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("…/a2a/PARTICIPANT/"), "{answer}");
    // Without a key it says nothing of the project, as every route.
    let keyless = raw.http.get(&beside).call().unwrap();
    assert_eq!(keyless.status().as_u16(), 401);
}
