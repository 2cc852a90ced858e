//! Hostile requests to `rmsweb serve` on loopback (round 3): `response_format`
//! schemas that loop, multiply their alternatives or accept nothing are refused with
//! a 400 saying where and why, and the server keeps answering; sizes are checked
//! before any work; a streaming client that goes away stops its rows.

use super::serve::{Server, post, start_with, write_tiny_checkpoint};
use serde_json::{Map, Value, json};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// A tiny random model (context 1024) served with `extra` flags.
fn server(dir: &Path, favoured: &[(&str, f32)], extra: &[&str]) -> Server {
    let ckpt = dir.join("tiny");
    std::fs::create_dir_all(&ckpt).unwrap();
    write_tiny_checkpoint(&ckpt, 1024, favoured);
    start_with(&ckpt, &dir.join("log"), extra)
}

fn ask(schema: Value) -> Value {
    json!({
        "model": "tiny",
        "messages": [{"role": "user", "content": "Answer in JSON."}],
        "max_tokens": 64,
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    })
}

/// `{"$defs": {name: def, ...}, "$ref": "#/$defs/<first>"}`.
fn defs(items: Vec<(String, Value)>) -> Value {
    let first = items[0].0.clone();
    let map: Map<String, Value> = items.into_iter().collect();
    json!({"$defs": map, "$ref": format!("#/$defs/{first}")})
}

fn r(name: &str) -> Value {
    json!({"$ref": format!("#/$defs/{name}")})
}

/// Asserts an error with `status` on `field` (`param`, or `code` for a code) whose
/// message holds `says`.
fn error_on(body: &Value, status: (u16, u16), field: (&str, &str), says: &str) {
    assert_eq!(status.0, status.1, "{body}");
    assert_eq!(body["error"][field.0], field.1, "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains(says), "{msg:?} does not say {says:?}");
}

/// Asserts a 400 on the schema field whose message holds every one of `says`.
fn refused(what: &str, status: u16, body: &Value, says: &[&str]) {
    assert_eq!(status, 400, "{what}: {body}");
    let e = &body["error"];
    assert_eq!(
        e["param"], "response_format.json_schema.schema",
        "{what}: {body}"
    );
    let msg = e["message"].as_str().unwrap();
    for s in says {
        assert!(msg.contains(s), "{what}: {msg:?} does not say {s:?}");
    }
    assert!(msg.len() < 2000, "{what}: a {}-byte message", msg.len());
}

fn alive(c: &reqwest::blocking::Client, base: &str) {
    let r = c.get(format!("{base}/models")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

/// A `$ref` to itself, two definitions that refer to each other, and a chain of
/// 100,000 `$ref`s: each overflowed a stack and aborted the server.
#[test]
fn response_format_ref_loops_are_refused_and_the_server_lives() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[], &[]);
    let c = client();
    let cases = [
        (
            "self",
            defs(vec![("a".into(), r("a"))]),
            vec!["#/$defs/a", "refers back to itself"],
        ),
        (
            "mutual",
            defs(vec![
                ("a".into(), json!({"anyOf": [r("b"), {"type": "null"}]})),
                ("b".into(), r("a")),
            ]),
            vec!["#/$defs/", "refers back to itself"],
        ),
        (
            "chain",
            defs(
                (0..100_000)
                    .map(|i| {
                        let v = if i < 99_999 {
                            r(&format!("d{}", i + 1))
                        } else {
                            json!({"type": "string"})
                        };
                        (format!("d{i}"), v)
                    })
                    .collect(),
            ),
            vec!["deeper than 64"],
        ),
    ];
    for (what, schema, says) in cases {
        let (status, body) = post(&c, &s.base, &ask(schema));
        refused(what, status, &body, &says);
        alive(&c, &s.base);
    }
    // Recursion through an object is a schema like any other: a tree answers.
    let tree = defs(vec![(
        "node".into(),
        json!({"type": "object", "properties": {"kids": {"type": "array", "maxItems": 2, "items": r("node")}},
            "additionalProperties": false}),
    )]);
    let (status, body) = post(&c, &s.base, &ask(tree));
    assert_eq!(status, 200, "{body}");
}

/// Alternatives that all lead to the same next definition, 40 levels deep, took
/// 2^40 work on the engine thread; alternatives past the budget are refused naming
/// their count.
#[test]
fn response_format_alternatives_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[], &[]);
    let c = client();
    let many = json!({"anyOf": (0..2000).map(|i| json!({"const": i})).collect::<Vec<_>>()});
    let (status, body) = post(&c, &s.base, &ask(many));
    refused(
        "2000 alternatives",
        status,
        &body,
        &["2000", "alternatives"],
    );
    // Nested lists of alternatives count together.
    let piled = json!({"anyOf": (0..4).map(|k| json!({"anyOf":
        (0..100).map(|i| json!({"const": k * 100 + i})).collect::<Vec<_>>()})).collect::<Vec<_>>()});
    let (status, body) = post(&c, &s.base, &ask(piled));
    refused(
        "piled alternatives",
        status,
        &body,
        &["400", "alternatives"],
    );
    // Each level's two alternatives lead to the same next one: 2^depth paths, one
    // value. 40 levels are past the nesting limit; 28 are answered at once.
    let doubling = |depth: usize| {
        defs(
            (0..=depth)
                .map(|i| {
                    let v = if i < depth {
                        let next = r(&format!("d{}", i + 1));
                        json!({"anyOf": [next.clone(), next]})
                    } else {
                        json!({"type": "integer", "minimum": 0, "maximum": 9})
                    };
                    (format!("d{i}"), v)
                })
                .collect(),
        )
    };
    let (status, body) = post(&c, &s.base, &ask(doubling(40)));
    refused("2^40", status, &body, &["deeper than 64"]);
    let doubling = doubling(28);
    let (status, body) = post(&c, &s.base, &ask(doubling));
    assert_eq!(status, 200, "{body}");
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    let v: i64 = text
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert!((0..=9).contains(&v), "{text}");
    alive(&c, &s.base);
}

/// Schemas no value satisfies were answered with 200, text that is no value of
/// theirs and `finish_reason: "stop"`; each is now refused saying why.
#[test]
fn unsatisfiable_response_formats_are_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &[], &[]);
    let c = client();
    let cases = [
        (
            json!({"type": "integer", "minimum": 5, "maximum": 3}),
            vec!["minimum 5", "maximum 3"],
        ),
        (
            json!({"type": "number", "minimum": 1.5, "maximum": -1}),
            vec!["minimum 1.5", "maximum -1"],
        ),
        (
            json!({"type": "integer", "minimum": 0.5, "maximum": 0.7}),
            vec!["no integer"],
        ),
        (
            json!({"type": "string", "minLength": 9, "maxLength": 2}),
            vec!["minLength 9", "maxLength 2"],
        ),
        (
            json!({"type": "array", "minItems": 3, "maxItems": 1}),
            vec!["minItems 3", "maxItems 1"],
        ),
        (json!({"enum": []}), vec!["enum", "no value"]),
        (json!({"anyOf": []}), vec!["anyOf", "no value"]),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"],
                "additionalProperties": false}),
            vec!["`b`", "required"],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 1}}}),
            vec!["properties.a", "minLength 3"],
        ),
        (
            defs(vec![(
                "n".into(),
                json!({"type": "object", "properties": {"next": r("n")}, "required": ["next"]}),
            )]),
            vec!["#/$defs/n", "no finite value"],
        ),
        (
            json!({"type": "integer", "minimum": 1e30}),
            vec!["minimum", "24"],
        ),
    ];
    for (schema, says) in cases {
        let what = schema.to_string();
        let (status, body) = post(&c, &s.base, &ask(schema));
        refused(&what, status, &body, &says);
    }
    alive(&c, &s.base);
}

/// Limits are flags: a message, a stop string and a body over theirs are refused
/// naming the field before anything is tokenized, and a prompt whose bytes alone
/// show it cannot fit the context is refused from that estimate.
#[test]
fn sizes_are_checked_before_work() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(
        dir.path(),
        &[],
        &[
            "--max-body-bytes",
            "40000000",
            "--max-message-bytes",
            "100000",
            "--max-stop-bytes",
            "64",
        ],
    );
    let c = client();
    let msg = |text: String| {
        json!({"model": "tiny", "max_tokens": 4, "messages": [
            {"role": "system", "content": "s"}, {"role": "user", "content": text}]})
    };
    let (status, body) = post(&c, &s.base, &msg("x".repeat(100_001)));
    error_on(
        &body,
        (status, 400),
        ("param", "messages[1].content"),
        "100000",
    );
    let mut m = msg("hi".into());
    m["stop"] = json!(["ok", "y".repeat(65)]);
    let (status, body) = post(&c, &s.base, &m);
    error_on(&body, (status, 400), ("param", "stop[1]"), "64");
    // A prompt of many small messages: their count alone is past the context.
    let many: Vec<Value> = (0..2000)
        .map(|_| json!({"role": "user", "content": "x"}))
        .collect();
    let (status, body) = post(
        &c,
        &s.base,
        &json!({"model": "tiny", "max_tokens": 4, "messages": many}),
    );
    error_on(
        &body,
        (status, 400),
        ("code", "context_length_exceeded"),
        "at least",
    );
    // A body over the limit: an OpenAI-style error, not a bare text.
    // Its connection is closed (the rest of the body is not read), and says so:
    // the next request goes on a new one.
    let big = msg("z".repeat(41_000_000));
    let r = c
        .post(format!("{}/chat/completions", s.base))
        .json(&big)
        .send()
        .unwrap();
    let close = r.headers().get("connection").map(|v| v.as_bytes().to_vec());
    assert_eq!(close.as_deref(), Some(&b"close"[..]));
    let status = r.status().as_u16();
    let body: Value = r.json().unwrap();
    error_on(
        &body,
        (status, 413),
        ("param", "(body)"),
        "--max-body-bytes",
    );
    alive(&c, &s.base);
    // The limits and their defaults are in --help.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--max-body-bytes",
        "--max-message-bytes",
        "--max-stop-bytes",
    ] {
        let line = help
            .lines()
            .skip_while(|l| !l.contains(flag))
            .take(6)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(line.contains("[default:"), "{flag}: {line}");
    }
}

/// Streaming clients that hang up with answer bytes still unread (their kernel
/// answers the next chunk with a reset) leave the server running: the write that
/// finds the connection gone is that connection's error, not a SIGPIPE that ends
/// the process and every other client's answer with it.
#[test]
fn clients_that_hang_up_mid_stream_leave_the_server_running() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut s = server(dir.path(), &[("W", 3.0)], &[]);
    let addr = s
        .base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let body = json!({"model": "tiny", "n": 4, "max_tokens": 900, "stream": true,
        "messages": [{"role": "user", "content": "Write a long answer."}]})
    .to_string();
    for i in 0..48 {
        let mut t = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            t,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut first = [0u8; 16];
        t.read_exact(&mut first).unwrap();
        // More chunks arrive and stay unread: closing now resets the connection,
        // and the server's next write finds it gone.
        std::thread::sleep(Duration::from_millis(5));
        let _ = t.shutdown(std::net::Shutdown::Both);
        drop(t);
        assert!(
            s.exited().is_none(),
            "the server ended after client {i}: {:?}",
            s.exited()
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.exited(), None, "the server ended");
    alive(&client(), &s.base);
}

/// 64 streaming clients asking for 16 long answers each drop after the first
/// chunk; their rows stop, so the next short request is answered at once instead
/// of after every dropped answer was decoded to its end.
#[test]
fn a_client_that_goes_away_stops_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    // Every row favours a token that never stops it: answers run to max_tokens.
    let s = server(dir.path(), &[("W", 3.0)], &[]);
    let c = client();
    let long = json!({"model": "tiny", "n": 16, "max_tokens": 900, "stream": true,
        "messages": [{"role": "user", "content": "Write a long answer."}]});
    let started = Instant::now();
    for _ in 0..64 {
        let mut r = c
            .post(format!("{}/chat/completions", s.base))
            .json(&long)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let mut first = [0u8; 64];
        let _ = r.read(&mut first).unwrap();
        drop(r);
    }
    let dropped_in = started.elapsed();
    let t = Instant::now();
    let (status, body) = post(
        &c,
        &s.base,
        &json!({"model": "tiny", "max_tokens": 4,
            "messages": [{"role": "user", "content": "Short."}]}),
    );
    assert_eq!(status, 200, "{body}");
    let waited = t.elapsed();
    // 64 × 16 rows × 900 tokens take minutes on this model; rows that stop at
    // their client's departure leave the engine free within seconds.
    assert!(
        waited < Duration::from_secs(30),
        "the next request waited {waited:?} (dropping took {dropped_in:?})"
    );
}
