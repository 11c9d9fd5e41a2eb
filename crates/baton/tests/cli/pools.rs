//! Pools over real processes: work sent to `role:ROLE` (a request, an order), listed for
//! the role's holders and on the status and the resume packet; sixteen processes claiming
//! one item, queued behind a held write lock, exactly one winning each round (by `claim`
//! and by `next`); sixteen clients over two `baton serve` on one PostgreSQL; and bad
//! addresses refused with the field named and nothing stored.

use std::sync::{Arc, Barrier};

use serde_json::{Value, json};

use crate::common::{Project, code, queued, stderr, work_order};

fn team() -> Project {
    Project::new(&[
        ("impl-1", "executor"),
        ("impl-2", "executor"),
        ("planner", "planner"),
        ("boss", "owner"),
    ])
}

/// Writes the shared Work Order under `id` into the project and returns its path.
fn order_file(p: &Project, id: &str) -> String {
    let path = p.path().join(format!("{id}.json"));
    std::fs::write(&path, work_order(id).to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn a_pool_request_is_listed_for_its_role_claimed_by_next_and_then_in_the_claimants_inbox() {
    let p = team();
    let after = p.generation().to_string();
    let sent = p.json(
        Some("planner"),
        &[
            "send",
            "--to",
            "role:executor",
            "--type",
            "request",
            "--topic",
            "billing",
            "--body",
            "fix invoice rounding",
        ],
    );
    let id = sent["id"].as_str().unwrap().to_owned();

    // News to every holder of the role (`baton wait` returns it), not to others.
    let news = p.json(
        Some("impl-2"),
        &["wait", "--after", &after, "--timeout", "5s"],
    );
    assert!(news.to_string().contains(&id), "{news}");
    let looked = p.json(
        Some("boss"),
        &["wait", "--after", &after, "--timeout", "0s"],
    );
    assert_eq!(
        looked["events"],
        json!([]),
        "not news to an owner: {looked}"
    );

    // Visible to would-be claimants before anyone claims it.
    let pool = p.json(Some("impl-2"), &["pool"]);
    assert_eq!(pool["schema"], "baton/pool@1");
    assert_eq!(pool["pool"], "role:executor");
    assert_eq!(pool["items"][0]["message"], id.as_str());
    let status = p.json(None, &["status"]);
    assert_eq!(
        status["pools"]["items"][0]["message"],
        id.as_str(),
        "{status}"
    );
    let packet = p.ok(Some("impl-1"), &["resume"]);
    assert!(packet.contains("Ready in my role's pool"), "{packet}");
    assert!(packet.contains(&id), "{packet}");
    assert!(
        p.ok(Some("planner"), &["pool", "--role", "executor"])
            .contains("fix invoice rounding")
    );

    let claimed = p.json(Some("impl-1"), &["next"]);
    assert_eq!(claimed["schema"], "baton/claimed@1");
    assert_eq!(claimed["item"]["message"], id.as_str());
    assert_eq!(claimed["item"]["claimed_by"], "impl-1");
    let inbox = p.json(Some("impl-1"), &["inbox"]);
    assert_eq!(inbox["items"][0]["id"], id.as_str());
    assert!(
        p.json(Some("impl-2"), &["inbox"])["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        p.json(Some("impl-2"), &["pool"])["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Nothing left: exit 4 with a line saying so, nothing written.
    let before = p.generation();
    let out = p.run(Some("impl-2"), &["next"]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing is ready for impl-2 in pool role:executor"),
        "{}",
        stderr(&out)
    );
    // The loser of an explicit claim exits 6 naming the winner.
    let out = p.run(Some("impl-2"), &["claim", &id]);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("impl-1 claimed it first"),
        "{}",
        stderr(&out)
    );
    assert_eq!(p.generation(), before);
}

#[test]
fn an_order_to_a_pool_is_claimed_then_accepted_by_its_claimant() {
    let p = team();
    let file = order_file(&p, "wo_7");
    let made = p.json(
        Some("planner"),
        &["order", "create", &file, "--to", "role:executor"],
    );
    assert_eq!(made["order"]["to"], "role:executor");
    let out = p.run(Some("impl-1"), &["order", "accept", "wo_7"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("baton claim wo_7"),
        "the refusal says how to claim it: {}",
        stderr(&out)
    );
    let claimed = p.json(Some("impl-2"), &["claim", "wo_7", "--seq", "1"]);
    assert_eq!(claimed["order"]["to"], "impl-2");
    assert_eq!(claimed["order"]["seq"], 2);
    // Claimed: the worker's now, no longer anyone else's to claim.
    let out = p.run(Some("impl-1"), &["claim", "wo_7"]);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    p.ok(Some("impl-2"), &["order", "accept", "wo_7"]);
}

#[test]
fn bad_pool_addresses_are_refused_naming_the_field_and_nothing_is_stored() {
    let p = team();
    let file = order_file(&p, "wo_9");
    let before = p.generation();
    for (args, named) in [
        (
            &[
                "send",
                "--to",
                "role:nobody",
                "--type",
                "request",
                "--topic",
                "t",
                "--body",
                "x",
            ][..],
            "no participant holds role \"nobody\"",
        ),
        (
            &[
                "send", "--to", "team:a", "--type", "request", "--topic", "t", "--body", "x",
            ][..],
            "only role pools exist",
        ),
        (
            &[
                "send", "--to", "role:", "--type", "request", "--topic", "t", "--body", "x",
            ][..],
            "it names no role",
        ),
        (
            &[
                "send",
                "--to",
                "role:executor",
                "--type",
                "info",
                "--topic",
                "t",
                "--body",
                "x",
            ][..],
            "only a request or an order goes to a pool",
        ),
        (
            &[
                "send",
                "--to",
                "role:executor,impl-1",
                "--type",
                "request",
                "--topic",
                "t",
                "--body",
                "x",
            ][..],
            "the only recipient",
        ),
        (
            &["order", "create", &file, "--to", "role:nobody"][..],
            "no participant holds role \"nobody\"",
        ),
    ] {
        let out = p.run(Some("planner"), args);
        assert_eq!(code(&out), 3, "{args:?}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(said.contains(named), "{args:?}: {said}");
        assert!(
            said.contains("--to") || said.contains("\"to\""),
            "{args:?} names the field: {said}"
        );
    }
    assert_eq!(p.generation(), before, "nothing stored");
}

#[test]
fn sixteen_processes_claiming_one_item_exactly_one_wins_every_round() {
    let names: Vec<String> = (0..16).map(|n| format!("w-{n}")).collect();
    let mut cast: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "executor")).collect();
    cast.push(("planner", "planner"));
    let p = Project::new(&cast);
    p.configure("busy_timeout = \"5s\"", "busy_timeout = \"60s\"");
    for round in 0..4 {
        // An order claimed at the seq every claimant read, by id.
        let id = format!("wo_{round}");
        let file = order_file(&p, &id);
        p.ok(
            Some("planner"),
            &["order", "create", &file, "--to", "role:executor"],
        );
        let before = p.generation();
        let outs = queued(&p, &names, &["--json", "claim", &id, "--seq", "1"]);
        let won: Vec<Value> = outs
            .iter()
            .filter(|o| o.status.success())
            .map(|o| serde_json::from_slice(&o.stdout).unwrap())
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {} won", won.len());
        let winner = won[0]["item"]["claimed_by"].as_str().unwrap().to_owned();
        for out in outs.iter().filter(|o| !o.status.success()) {
            assert_eq!(code(out), 6, "{}", stderr(out));
            let err: Value = serde_json::from_slice(&out.stderr).unwrap();
            assert_eq!(err["error"]["kind"], "contention", "{err}");
            assert!(
                err["error"]["message"].as_str().unwrap().contains(&winner),
                "the loser names the winner: {err}"
            );
        }
        assert_eq!(p.generation(), before + 2, "one claim and its order's step");
        let shown = p.json(None, &["order", "show", &id]);
        assert_eq!(shown["order"]["to"], winner.as_str());

        // A request taken by `next`: one gets it, the rest find nothing ready.
        p.ok(
            Some("planner"),
            &[
                "send",
                "--to",
                "role:executor",
                "--type",
                "request",
                "--topic",
                "t",
                "--body",
                &format!("round {round}"),
            ],
        );
        let before = p.generation();
        let outs = queued(&p, &names, &["--json", "next"]);
        let won = outs.iter().filter(|o| o.status.success()).count();
        assert_eq!(won, 1, "round {round}: next won {won} times");
        for out in outs.iter().filter(|o| !o.status.success()) {
            assert_eq!(code(out), 4, "{}", stderr(out));
        }
        assert_eq!(p.generation(), before + 1, "one claim");
    }
}

#[test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
fn two_servers_on_one_postgresql_let_one_of_sixteen_clients_claim_each_item() {
    use crate::race::post;
    use crate::server::{admin, client, member, serve};
    const CLIENTS: usize = 16;
    const ITEMS: usize = 8;
    let schema = format!("baton_pool_{}", std::process::id());
    let url = crate::common::postgres_schema(&schema);
    admin(&url, None, &["project", "add", "shop"]);
    let issue = |who: &str, role: &str| member(&url, "shop", who, role);
    let planner = issue("planner", "planner");
    let tokens: Vec<String> = (0..CLIENTS)
        .map(|n| issue(&format!("w-{n}"), "executor"))
        .collect();
    let servers = [serve(&url), serve(&url)];
    let bases: Vec<String> = servers
        .iter()
        .map(|s| format!("{}/v1/projects/shop", s.base))
        .collect();
    let agent = client();
    let items: Vec<String> = (0..ITEMS)
        .map(|i| {
            let body = json!({"to": ["role:executor"], "type": "request", "topic": "race", "body": format!("item {i}")});
            let (status, sent) = post(&agent, &format!("{}/messages", bases[i % 2]), &planner, body);
            assert_eq!(status, 200, "{sent}");
            sent["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let start = Arc::new(Barrier::new(CLIENTS));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (bases, token, agent, start, items) = (
                bases.clone(),
                tokens[c].clone(),
                agent.clone(),
                Arc::clone(&start),
                items.clone(),
            );
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    start.wait();
                    let url = format!("{}/pool/{item}/claim", bases[(c + i) % 2]);
                    answers.push(post(&agent, &url, &token, json!({})));
                }
                answers
            })
        })
        .collect();
    let answers: Vec<Vec<(u16, Value)>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (i, item) in items.iter().enumerate() {
        let won: Vec<&Value> = answers
            .iter()
            .map(|a| &a[i])
            .filter(|(status, _)| *status == 200)
            .map(|(_, body)| body)
            .collect();
        assert_eq!(won.len(), 1, "{item} won by {}", won.len());
        let winner = won[0]["item"]["claimed_by"].as_str().unwrap();
        for (status, body) in answers.iter().map(|a| &a[i]).filter(|(s, _)| *s != 200) {
            assert_eq!(*status, 409, "{body}");
            assert_eq!(body["error"]["retryable"], true, "{body}");
            assert!(
                body["error"]["message"].as_str().unwrap().contains(winner),
                "{body}"
            );
        }
        // Both servers see the claim at once: the winner's delivery, nobody else's.
        for base in &bases {
            let mut response = agent
                .get(&format!("{base}/messages/{item}"))
                .header("Authorization", &format!("Bearer {planner}"))
                .call()
                .unwrap();
            let shown: Value = response.body_mut().read_json().unwrap();
            assert_eq!(shown["to"], json!([winner]), "{base}: {shown}");
        }
    }
    drop(servers);
    crate::common::drop_postgres_schema(&schema);
}
