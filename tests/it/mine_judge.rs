//! `rmsweb mine --judge-url`: the LLM judge labels pairs through the chat client, and
//! a judge that fails leaves the heuristic label with a note.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// A one-thread chat-completions endpoint on 127.0.0.1 that answers every request
/// with `status` and an assistant message `content`, and records request bodies.
fn endpoint(status: u16, content: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    endpoint_with(status, move |_| content.to_string())
}

/// Like [`endpoint`], with the assistant message computed from the request's first
/// message (the judge prompt).
pub fn endpoint_with(
    status: u16,
    answer: impl Fn(&str) -> String + Send + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len];
            let _ = reader.read_exact(&mut body);
            let body = String::from_utf8_lossy(&body).into_owned();
            let prompt = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["messages"][0]["content"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let content = answer(&prompt);
            log.lock().unwrap().push(body);
            let reply = serde_json::json!({"choices": [{"index": 0,
                "message": {"role": "assistant", "content": content}}]})
            .to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (url, seen)
}

fn mine(dir: &Path, url: &str) -> Vec<serde_json::Value> {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures-src/mine.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["mine", "--dataset"])
        .arg(dir)
        .arg("--config")
        .arg(cfg)
        .args(["--judge-url", url, "--judge-model", "judge-7b"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(dir.join("mined/pairs.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_llm_judge_labels_every_pair_through_the_chat_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    crate::tui_data::copy_fixtures(dir.path());
    let (url, seen) = endpoint(
        200,
        r#"{"category": "missed_constraint", "confidence": 0.9}"#,
    );
    let pairs = mine(dir.path(), &url);
    assert!(!pairs.is_empty());
    for p in &pairs {
        assert_eq!(p["failure_mode"]["source"], "judge", "{p}");
        assert_eq!(p["failure_mode"]["category"], "missed_constraint");
    }
    let requests = seen.lock().unwrap();
    assert!(!requests.is_empty());
    let body: serde_json::Value = serde_json::from_str(&requests[0]).unwrap();
    assert_eq!(body["model"], "judge-7b");
}

#[test]
fn a_failing_judge_falls_back_to_the_heuristic_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    crate::tui_data::copy_fixtures(dir.path());
    let (url, _) = endpoint(400, "bad request");
    let pairs = mine(dir.path(), &url);
    assert!(!pairs.is_empty());
    for p in &pairs {
        assert_eq!(p["failure_mode"]["source"], "heuristic", "{p}");
        let evidence = p["evidence"].to_string();
        assert!(evidence.contains("judge"), "{evidence}");
    }
}
