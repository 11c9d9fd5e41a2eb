//! The stdio framing in front of the MCP server: every line the client sends is read here
//! first, within a byte cap, and checked as the rest of Baton checks untrusted JSON
//! ([`baton_core::json`]). A line that cannot be handed to the server — too large, not
//! UTF-8, not JSON, too deep, a number that cannot be kept, a duplicate key, arguments that
//! are not an object — is answered here with the JSON-RPC error that fits, carrying the
//! request's `id` when one can be found, and the session goes on. Good lines pass through
//! unchanged.

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use baton_core::json::{Unfit, boundary, top_level_scalar};
pub(crate) use baton_core::packet::clip;

/// JSON-RPC's codes for what the gate refuses.
const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's code for a refusal of the server's own (a request it will not serve).
pub(crate) const SERVER_ERROR: i64 = -32000;

/// Levels a JSON-RPC frame adds around a payload (`params.arguments.payload` and a little
/// room): a payload at [`MAX_DEPTH`] still passes.
const FRAME_LEVELS: usize = 8;

/// The longest line read: a payload at the cap twice over (escapes) and room for the rest.
pub(crate) fn max_frame(payload_cap: usize) -> usize {
    payload_cap
        .saturating_mul(2)
        .saturating_add(64 * 1024)
        .max(1024 * 1024)
}

/// One line as the client sent it: its first bytes (up to the cap), whether it was longer,
/// and its last bytes when it was (where an `id` written last is found).
struct Line {
    head: Vec<u8>,
    over: bool,
    tail: Vec<u8>,
}

const TAIL: usize = 4096;

/// Reads one line of at most `cap` bytes, discarding (but not holding) the rest of a
/// longer one. `None` at the end of input.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    cap: usize,
) -> std::io::Result<Option<Line>> {
    let mut line = Line {
        head: Vec::new(),
        over: false,
        tail: Vec::new(),
    };
    let mut any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(any.then_some(line));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], Some(at + 1)),
            None => (buf, None),
        };
        let room = cap.saturating_sub(line.head.len());
        if chunk.len() <= room && !line.over {
            line.head.extend_from_slice(chunk);
        } else {
            if !line.over {
                line.head.extend_from_slice(&chunk[..room]);
                line.over = true;
            }
            line.tail.extend_from_slice(chunk);
            if line.tail.len() > TAIL {
                line.tail.drain(..line.tail.len() - TAIL);
            }
        }
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(Some(line));
        }
    }
}

/// What to do with one line: pass it to the server, answer it here, or ignore it (a
/// blank line, or a broken notification, which JSON-RPC never answers).
pub enum Verdict {
    Pass(String),
    Answer(Value),
    Ignore,
}

fn error(id: Option<Value>, code: i64, message: String) -> Verdict {
    Verdict::Answer(error_value(id, code, message))
}

/// A JSON-RPC error answering the request `id` (null when none could be found). The
/// message is cut at [`MESSAGE`] bytes: what it quotes of the refused request (a
/// parser's excerpt, a name) never comes back whole.
pub fn error_value(id: Option<Value>, code: i64, message: String) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code, "message": clip(&message, MESSAGE)},
    })
}

/// The longest error message the gate writes, in bytes.
const MESSAGE: usize = 300;
/// The most of a name (a method, a prompt, a resource) an answer quotes, in bytes.
pub(crate) const ECHO: usize = 64;

/// An error answering `id`, or nothing for a notification (which JSON-RPC never answers).
fn refuse(id: Option<&Value>, code: i64, message: String) -> Verdict {
    match id {
        Some(id) => error(Some(id.clone()), code, message),
        None => Verdict::Ignore,
    }
}

/// An `id` written last in a line too long to keep: `"id": 7}` at its very end.
fn id_at_end(tail: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(tail);
    let text = text.trim_end().strip_suffix('}')?;
    let at = text.rfind("\"id\"")?;
    let value = text[at + 4..].trim_start().strip_prefix(':')?;
    let value: Value = serde_json::from_str(value.trim()).ok()?;
    (value.is_string() || value.is_number()).then_some(value)
}

fn judge(line: Line, cap: usize) -> Verdict {
    let lossy = String::from_utf8_lossy(&line.head);
    if line.over {
        let id = top_level_scalar(&lossy, "id").or_else(|| id_at_end(&line.tail));
        return error(
            id,
            INVALID_REQUEST,
            format!("request too large: over {cap} bytes (a line is one JSON-RPC message)"),
        );
    }
    if lossy.trim().is_empty() {
        return Verdict::Ignore;
    }
    let Ok(text) = std::str::from_utf8(&line.head) else {
        return error(
            top_level_scalar(&lossy, "id"),
            PARSE_ERROR,
            "parse error: the message is not UTF-8 text".to_owned(),
        );
    };
    judge_text(text)
}

/// What to do with one message's text, whatever carried it (a line on stdio, a POST's
/// body over HTTP): the one boundary of every MCP edge. The whole message is held to
/// `baton_core::json`'s rules — depth, numbers kept exactly, no duplicate key, no U+0000 —
/// wherever in it they fall: what a tool passes on (a gateway's held call, run after
/// approval) must be what the client sent, not a rounded or last-key-wins copy.
pub fn judge_text(text: &str) -> Verdict {
    let id = top_level_scalar(text, "id");
    let value = match boundary(text, FRAME_LEVELS) {
        Ok(value) => value,
        Err(Unfit::NotJson(e)) => return error(id, PARSE_ERROR, format!("parse error: {e}")),
        Err(Unfit::Refused(problem)) => {
            return match id {
                Some(id) => error(
                    Some(id),
                    INVALID_PARAMS,
                    format!("invalid params: {problem}"),
                ),
                // A notification (an object with a method and no id) is never answered;
                // anything else is an invalid request, answered with id null.
                None if text.trim_start().starts_with('{') && !text.contains("\"id\"") => {
                    Verdict::Ignore
                }
                None => error(None, INVALID_REQUEST, format!("invalid request: {problem}")),
            };
        }
    };
    // A request, a notification or a response (to the server's own requests): an object
    // with a method, or a result or an error. Anything else (`[1]`, `7`) is answered.
    let message = value.as_object().is_some_and(|o| {
        o.contains_key("method") || o.contains_key("result") || o.contains_key("error")
    });
    if !message {
        return error(
            value.get("id").cloned(),
            INVALID_REQUEST,
            "invalid request: a line must be one JSON-RPC message object".to_owned(),
        );
    }
    // Not JSON-RPC 2.0, or an id that is not a string, a number or null: answered here,
    // with the id as it came, rather than by a server that would leave it out.
    let version = value.get("jsonrpc").and_then(Value::as_str);
    let id = value.get("id");
    if version != Some("2.0")
        || id.is_some_and(|id| !(id.is_string() || id.is_number() || id.is_null()))
    {
        return match id {
            Some(id) => error(
                Some(id.clone()),
                INVALID_REQUEST,
                "invalid request: a message is JSON-RPC 2.0 (`\"jsonrpc\": \"2.0\"`) with a \
                 string or number `id`"
                    .to_owned(),
            ),
            // A notification is never answered.
            None => Verdict::Ignore,
        };
    }
    // A method is a short name and its params an object (every MCP request's are): anything
    // else is answered here, with its id, rather than by a server that could not read the
    // id (its answer would never reach the request) or would quote the whole name.
    if let Some(method) = value.get("method") {
        let Some(method) = method.as_str() else {
            return refuse(
                id,
                INVALID_REQUEST,
                "invalid request: `method` must be a string".to_owned(),
            );
        };
        if method.len() > ECHO {
            return refuse(
                id,
                METHOD_NOT_FOUND,
                format!("method not found: {:?}", clip(method, ECHO)),
            );
        }
        if value
            .get("params")
            .is_some_and(|p| !p.is_object() && !p.is_null())
        {
            return refuse(
                id,
                INVALID_PARAMS,
                "invalid params: `params` must be an object".to_owned(),
            );
        }
    }
    let arguments = value.pointer("/params/arguments");
    if value.get("method").and_then(Value::as_str) == Some("tools/call")
        && arguments.is_some_and(|a| !a.is_object() && !a.is_null())
    {
        return refuse(
            id,
            INVALID_PARAMS,
            "invalid params: `arguments` must be an object of the tool's arguments".to_owned(),
        );
    }
    // The last check is the server's own reading: a message rmcp cannot read as a client's
    // would be answered without its id, or not at all.
    if let Err(e) = rmcp::model::ClientJsonRpcMessage::deserialize(&value) {
        return refuse(id, INVALID_REQUEST, format!("invalid request: {e}"));
    }
    Verdict::Pass(text.to_owned())
}

/// Reads `input` line by line: good lines go to `server`, the others are answered on
/// `answers`. Ends at the end of input (then `server` is closed, so the server ends too).
pub async fn gate<R, W>(
    mut input: R,
    mut server: W,
    answers: tokio::sync::mpsc::UnboundedSender<Value>,
    cap: usize,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    while let Some(line) = read_line(&mut input, cap).await? {
        match judge(line, cap) {
            Verdict::Pass(text) => {
                server.write_all(text.as_bytes()).await?;
                server.write_all(b"\n").await?;
                server.flush().await?;
            }
            Verdict::Answer(answer) => {
                let _ = answers.send(answer);
            }
            Verdict::Ignore => {}
        }
    }
    server.shutdown().await
}

/// Writes the server's lines and the gate's answers to `out`, one whole line at a time,
/// until both have ended.
pub async fn merge<R, W>(
    server: R,
    mut answers: tokio::sync::mpsc::UnboundedReceiver<Value>,
    mut out: W,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = server.lines();
    let (mut server_open, mut answers_open) = (true, true);
    while server_open || answers_open {
        tokio::select! {
            line = lines.next_line(), if server_open => match line? {
                Some(line) => {
                    out.write_all(line.as_bytes()).await?;
                    out.write_all(b"\n").await?;
                    out.flush().await?;
                }
                None => server_open = false,
            },
            answer = answers.recv(), if answers_open => match answer {
                Some(answer) => {
                    out.write_all(answer.to_string().as_bytes()).await?;
                    out.write_all(b"\n").await?;
                    out.flush().await?;
                }
                None => answers_open = false,
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Line {
        Line {
            head: text.as_bytes().to_vec(),
            over: false,
            tail: Vec::new(),
        }
    }

    fn answer(v: Verdict) -> Value {
        match v {
            Verdict::Answer(a) => a,
            Verdict::Pass(t) => panic!("passed: {t}"),
            Verdict::Ignore => panic!("ignored"),
        }
    }

    #[test]
    fn broken_requests_are_answered_with_their_id() {
        // Not JSON-RPC 2.0, or an id of another type: answered here, the id kept.
        for (text, id) in [
            (r#"{"jsonrpc":"1.0","id":9,"method":"ping"}"#, json!(9)),
            (r#"{"id":"n","method":"ping"}"#, json!("n")),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                json!({"a": 1}),
            ),
            (r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#, json!([1])),
        ] {
            let a = answer(judge(line(text), 1 << 20));
            assert_eq!(
                (a["id"].clone(), a["error"]["code"].clone()),
                (id, json!(-32600)),
                "{text}"
            );
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"send","arguments":{}}}}}"#,
            "[".repeat(130) + &"]".repeat(130)
        );
        let a = answer(judge(line(&deep), 1 << 20));
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!(3), json!(-32602))
        );
        let a = answer(judge(
            line(r#"{"id":"x","method":"m","params":{"n":1e400}}"#),
            1 << 20,
        ));
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!("x"), json!(-32602))
        );
        let a = answer(judge(
            line(
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"inbox","arguments":"str"}}"#,
            ),
            1 << 20,
        ));
        assert_eq!(a["error"]["code"], json!(-32602));
        let a = answer(judge(
            Line {
                head: br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"#.to_vec(),
                over: true,
                tail: Vec::new(),
            },
            10,
        ));
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!(5), json!(-32600))
        );
        let a = answer(judge(
            Line {
                head: b"{\"jsonrpc\"".to_vec(),
                over: true,
                tail: b"xxxx\"]}, \"id\": 9}".to_vec(),
            },
            10,
        ));
        assert_eq!(a["id"], json!(9));
        assert!(matches!(
            judge(line(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), 1 << 20),
            Verdict::Pass(_)
        ));
        // Anywhere in a call, not only in a payload: a gateway passes a held call's
        // arguments on as they were recorded.
        for held in [
            r#"{"n":1,"n":2}"#,
            r#"{"n":123456789012345678901234567890}"#,
            r#"{"s":"a\u0000b"}"#,
        ] {
            let frame = format!(
                r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"create_issue","arguments":{held}}}}}"#
            );
            let a = answer(judge(line(&frame), 1 << 20));
            assert_eq!(
                (a["id"].clone(), a["error"]["code"].clone()),
                (json!(6), json!(-32602)),
                "{held}"
            );
        }
        // JSON that is no message is answered with id null; a notification never is.
        for garbage in ["[1]", "7", &("[".repeat(200) + &"]".repeat(200))] {
            let a = answer(judge(line(garbage), 1 << 20));
            assert_eq!(
                (a["id"].clone(), a["error"]["code"].clone()),
                (json!(null), json!(-32600))
            );
        }
        assert!(matches!(
            judge(
                line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
                1 << 20
            ),
            Verdict::Pass(_)
        ));
    }

    #[test]
    fn params_that_are_not_an_object_are_answered_with_their_id() {
        for (params, code) in [
            (r#""x""#, -32602),
            ("[1]", -32602),
            ("7", -32602),
            // An object rmcp cannot read as a client's message is answered here too.
            (r#"{"name":"inbox","arguments":{},"_meta":7}"#, -32600),
        ] {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":"r-1","method":"tools/call","params":{params}}}"#
            );
            let a = answer(judge(line(&text), 1 << 20));
            assert_eq!(
                (a["id"].clone(), a["error"]["code"].clone()),
                (json!("r-1"), json!(code)),
                "{params}: {a}"
            );
        }
        let a = answer(judge(
            line(r#"{"jsonrpc":"2.0","id":8,"method":5}"#),
            1 << 20,
        ));
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!(8), json!(-32600))
        );
        // A notification is never answered, however broken.
        assert!(matches!(
            judge(
                line(r#"{"jsonrpc":"2.0","method":"notifications/x","params":[1]}"#),
                1 << 20
            ),
            Verdict::Ignore
        ));
        // Omitted and null params pass on to the server, which reads them as none.
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}"#,
        ] {
            assert!(
                matches!(judge(line(text), 1 << 20), Verdict::Pass(_)),
                "{text}"
            );
        }
    }

    #[test]
    fn an_answer_quotes_at_most_a_short_prefix_of_what_it_refuses() {
        let long = "m".repeat(400 * 1024);
        let text = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"{long}"}}"#);
        let a = answer(judge(line(&text), 1 << 20));
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!(3), json!(-32601))
        );
        let message = a["error"]["message"].as_str().unwrap();
        assert!(message.contains("mmm") && message.len() <= 100, "{message}");
        // A parser's or a rule's words are cut as well.
        let a = error_value(Some(json!(1)), -32602, format!("invalid params: {long}"));
        assert!(a["error"]["message"].as_str().unwrap().len() <= MESSAGE);
    }
}
