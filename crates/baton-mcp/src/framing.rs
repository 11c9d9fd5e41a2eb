//! The stdio framing in front of rmcp: one JSON-RPC message a line. rmcp drops a line it
//! cannot parse without a word; JSON-RPC 2.0 answers it with an error (`id` null for a
//! line that is not JSON, `-32700`; the request's `id` for an object that is no request,
//! `-32600`), so a client learns its line was refused. Lines that are messages go to rmcp
//! unchanged. rmcp's answers and these errors share one writer, so lines never interleave.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

const PIPE: usize = 1 << 16;
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The tasks that feed rmcp's input and drain its output.
pub struct Framed {
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Framed {
    /// After rmcp stopped: stop reading the client and write out every answer.
    pub async fn finish(self) {
        self.reader.abort();
        let _ = self.reader.await;
        let _ = self.writer.await;
    }
}

/// Frames `input` and `output` (stdin and stdout) for rmcp: the streams rmcp serves on
/// (what it reads, what it writes), and the tasks behind them.
pub fn frame<R, W>(input: R, output: W) -> ((DuplexStream, DuplexStream), Framed)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (mut to_rmcp, rmcp_in) = tokio::io::duplex(PIPE);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = rx.recv().await {
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let answers = tx.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if answers.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let reader = tokio::spawn(async move {
        let mut lines = BufReader::new(input);
        loop {
            let mut line = Vec::new();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            match refusal(&line) {
                None => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if to_rmcp.write_all(&line).await.is_err() {
                        break;
                    }
                }
                Some(answer) => {
                    let mut answer = answer.to_string().into_bytes();
                    answer.push(b'\n');
                    if tx.send(answer).await.is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping `to_rmcp` closes rmcp's input: it ends as it would at the end of stdin.
    });
    ((rmcp_in, rmcp_out), Framed { reader, writer })
}

/// The error response a line earns instead of going to rmcp, or `None` to pass it on
/// (a message, a blank line, or a notification rmcp may choose to ignore: notifications
/// are never answered).
fn refusal(line: &[u8]) -> Option<Value> {
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    if line.trim_ascii().is_empty() {
        return None;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Some(error(
                Value::Null,
                -32700,
                format!("Parse error: the line is not JSON ({e})"),
            ));
        }
    };
    let id = match &value {
        Value::Object(o) => o.get("id").cloned(),
        _ => Some(Value::Null),
    };
    if serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(value).is_ok() {
        return None;
    }
    id.map(|id| {
        error(
            match id {
                Value::String(_) | Value::Number(_) => id,
                _ => Value::Null,
            },
            -32600,
            "Invalid Request: not a JSON-RPC 2.0 request or notification".to_owned(),
        )
    })
}

fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn garbage_lines_earn_errors_and_messages_pass() {
        let code = |line: &str| refusal(line.as_bytes()).map(|v| v["error"]["code"].clone());
        assert_eq!(code("this is not json\n"), Some((-32700).into()));
        assert_eq!(
            code(r#"{"jsonrpc": "2.0", "id": "x", "method": "#),
            Some((-32700).into())
        );
        assert_eq!(
            code(&("[".repeat(10_000) + &"]".repeat(10_000))),
            Some((-32700).into())
        );
        assert_eq!(code("[1]"), Some((-32600).into()));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":7}"#), Some((-32600).into()));
        assert_eq!(refusal(br#"{"jsonrpc":"2.0","id":7}"#).unwrap()["id"], 7);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), None);
        assert_eq!(code("\n"), None);
    }
}
