//! `rmsweb serve` on loopback with a tiny random checkpoint: the OpenAI wire format,
//! schema-constrained answers, streaming, batching of concurrent requests, error
//! bodies, and the exchange log.

use rmsweb::model::{Qwen3, Qwen3Config, tokenizer, weights};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A random tiny model with a byte-level tokenizer, saved as a model folder.
fn tiny_checkpoint(dir: &Path) {
    let texts = [
        r#"{"memory":"the form is open","action":[{"click":{"index":3}}]}"#,
        r#"{"memory":"done","action":[{"done":{"text":"W-132 is red","success":true}}]}"#,
        "Find the colour of part W-132 on the parts page.",
    ];
    let tok = tokenizer::train_bpe(texts.iter().copied(), 320, 2).unwrap();
    tokenizer::save(&tok, dir).unwrap();
    let cfg = Qwen3Config {
        vocab_size: tok.get_vocab_size(true),
        hidden_size: 32,
        intermediate_size: 48,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: Some(2),
        head_dim: Some(8),
        rms_norm_eps: 1e-6,
        rope_theta: 10_000.0,
        tie_word_embeddings: true,
        max_position_embeddings: 1024,
        eos_token_id: None,
        rope_scaling: None,
    };
    let w = Qwen3::random_weights(&cfg, 7).unwrap();
    weights::save_file(&w, &dir.join("model.safetensors")).unwrap();
    cfg.save(dir).unwrap();
}

/// The server process; killed if a test fails before it is stopped.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(checkpoint: &Path, log: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .arg("serve")
        .arg("--checkpoint")
        .arg(checkpoint)
        .args(["--port", "0", "--model-name", "tiny", "--max-batch", "8"])
        .arg("--log-dataset")
        .arg(log)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    Server {
        child,
        base: url.to_string(),
    }
}

/// A Browser Use-like `AgentOutput` schema whose every string, number and list is
/// bounded, so a random model's constrained answer always ends.
fn agent_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "memory": {"type": "string", "maxLength": 12},
            "action": {
                "type": "array", "minItems": 1, "maxItems": 2,
                "items": {"anyOf": [
                    {"type": "object", "properties": {"click": {"type": "object",
                        "properties": {"index": {"type": "integer", "minimum": 1, "maximum": 99}},
                        "required": ["index"], "additionalProperties": false}},
                     "required": ["click"], "additionalProperties": false},
                    {"type": "object", "properties": {"done": {"type": "object",
                        "properties": {"text": {"type": "string", "maxLength": 12}, "success": {"type": "boolean"}},
                        "required": ["text", "success"], "additionalProperties": false}},
                     "required": ["done"], "additionalProperties": false}
                ]}
            }
        },
        "required": ["memory", "action"],
        "additionalProperties": false
    })
}

/// Whether `v` is an answer the schema above accepts.
fn check_agent_output(text: &str) {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    let o = v.as_object().unwrap();
    assert!(o.keys().all(|k| k == "memory" || k == "action"), "{text:?}");
    assert!(
        o["memory"].as_str().unwrap().chars().count() <= 12,
        "{text:?}"
    );
    let actions = o["action"].as_array().unwrap();
    assert!((1..=2).contains(&actions.len()), "{text:?}");
    for a in actions {
        let a = a.as_object().unwrap();
        assert_eq!(a.len(), 1, "{text:?}");
        if let Some(c) = a.get("click") {
            let i = c["index"].as_i64().unwrap();
            assert!((1..=99).contains(&i), "{text:?}");
            assert_eq!(c.as_object().unwrap().len(), 1, "{text:?}");
        } else {
            let d = &a["done"];
            assert!(
                d["text"].as_str().unwrap().chars().count() <= 12,
                "{text:?}"
            );
            assert!(d["success"].is_boolean(), "{text:?}");
            assert_eq!(d.as_object().unwrap().len(), 2, "{text:?}");
        }
    }
}

fn request(task: &str, extra: Value) -> Value {
    let mut body = json!({
        "model": "tiny",
        "messages": [
            {"role": "system", "content": "You are a web agent. Answer in JSON."},
            {"role": "user", "content": [
                {"type": "text", "text": format!("<user_request>\n{task}\n</user_request>\n<browser_state>\nInteractive elements:\n[3]<button />\n\tSubmit\n</browser_state>\n<step_info>Step1 maximum:5</step_info>")},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
            ]}
        ],
        "max_completion_tokens": 600,
        "response_format": {"type": "json_schema", "json_schema": {"name": "agent_output", "strict": true, "schema": agent_schema()}}
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn post(client: &reqwest::blocking::Client, base: &str, body: &Value) -> (u16, Value) {
    let r = client
        .post(format!("{base}/chat/completions"))
        .json(body)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap())
}

/// The text of a streamed answer and the chunks' finish reasons.
fn post_stream(
    client: &reqwest::blocking::Client,
    base: &str,
    body: &Value,
) -> (String, Vec<Value>) {
    let r = client
        .post(format!("{base}/chat/completions"))
        .json(body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    let body = r.text().unwrap();
    let data: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{body}");
    let mut text = String::new();
    let mut chunks = Vec::new();
    for d in &data[..data.len() - 1] {
        let c: Value = serde_json::from_str(d).unwrap();
        assert_eq!(c["object"], "chat.completion.chunk");
        for ch in c["choices"].as_array().unwrap() {
            if let Some(t) = ch["delta"]["content"].as_str() {
                text.push_str(t);
            }
        }
        chunks.push(c);
    }
    (text, chunks)
}

#[test]
fn serve_answers_browser_use_requests_over_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("tiny");
    std::fs::create_dir_all(&ckpt).unwrap();
    tiny_checkpoint(&ckpt);
    let log = dir.path().join("deployed");
    let mut server = start(&ckpt, &log);
    let base = server.base.clone();
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();

    let models: Value = client
        .get(format!("{base}/models"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(models["data"][0]["id"], "tiny");
    assert_eq!(models["data"][0]["max_model_len"], 1024);

    // Greedy and constrained: a well-formed AgentOutput that ends by itself.
    let greedy = request("Find W-132.", json!({"temperature": 0}));
    let (status, r) = post(&client, &base, &greedy);
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["object"], "chat.completion");
    assert_eq!(r["model"], "tiny");
    let choice = &r["choices"][0];
    assert_eq!(choice["finish_reason"], "stop", "{r}");
    assert_eq!(choice["message"]["role"], "assistant");
    let text = choice["message"]["content"].as_str().unwrap().to_string();
    check_agent_output(&text);
    let usage = &r["usage"];
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 10);
    assert!(usage["completion_tokens"].as_u64().unwrap() > 0);

    // The same request streamed: the deltas add up to the same answer.
    let mut streamed = greedy.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let (stext, chunks) = post_stream(&client, &base, &streamed);
    assert_eq!(stext, text);
    let reasons: Vec<&Value> = chunks
        .iter()
        .flat_map(|c| c["choices"].as_array().unwrap())
        .map(|ch| &ch["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(reasons, [&json!("stop")]);
    assert_eq!(chunks.last().unwrap()["usage"], r["usage"]);

    // Concurrent sampled requests (batched together), two choices each: all valid.
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let base = base.clone();
            let client = client.clone();
            let body = request(
                &"Find part W-132 and report its colour. ".repeat(i + 1),
                json!({"temperature": 1.0, "top_p": 0.9, "n": 2, "seed": i}),
            );
            std::thread::spawn(move || post(&client, &base, &body))
        })
        .collect();
    for h in handles {
        let (status, r) = h.join().unwrap();
        assert_eq!(status, 200, "{r}");
        let choices = r["choices"].as_array().unwrap();
        assert_eq!(choices.len(), 2);
        for (i, c) in choices.iter().enumerate() {
            assert_eq!(c["index"], i);
            assert_eq!(c["finish_reason"], "stop", "{r}");
            check_agent_output(c["message"]["content"].as_str().unwrap());
        }
    }

    // Without a schema, `max_tokens` ends the answer.
    let mut free = request("Find W-132.", json!({"temperature": 0, "max_tokens": 5}));
    free.as_object_mut().unwrap().remove("response_format");
    free.as_object_mut()
        .unwrap()
        .remove("max_completion_tokens");
    let (status, r) = post(&client, &base, &free);
    assert_eq!(status, 200, "{r}");
    let fin = &r["choices"][0]["finish_reason"];
    let completion = r["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(
        (fin == "length" && completion == 5) || (fin == "stop" && completion < 5),
        "{r}"
    );

    // Bad requests: OpenAI-style bodies naming the field.
    let (status, e) = post(&client, &base, &request("x", json!({"temperature": 7})));
    assert_eq!(status, 400);
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert_eq!(e["error"]["param"], "temperature");
    let (status, e) = post(&client, &base, &request("x", json!({"model": "gpt-9"})));
    assert_eq!(status, 404);
    assert_eq!(e["error"]["code"], "model_not_found");
    let long = "word ".repeat(3000);
    let (status, e) = post(&client, &base, &request(&long, json!({})));
    assert_eq!(status, 400);
    assert_eq!(e["error"]["code"], "context_length_exceeded");
    let r = client
        .post(format!("{base}/chat/completions"))
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let e: Value = r.json().unwrap();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("malformed")
    );

    // SIGTERM stops the server cleanly; every answered exchange was logged.
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let lines = std::fs::read_to_string(log.join("serve/exchanges.jsonl")).unwrap();
    let logged: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(logged.len(), 7);
    assert_eq!(logged[0]["choices"][0]["text"], text.as_str());
    assert_eq!(logged[0]["model"], "tiny");
    // Each exchange was a Browser Use step 1, so each became its own trajectory.
    let ds = rmsweb::trajectory::Dataset::open(&log).unwrap();
    let ts = ds.summaries();
    assert_eq!(ts.len(), 7);
    assert!(
        ts.iter()
            .all(|t| t.as_ref().unwrap().source == "rmsweb-serve")
    );
    assert_eq!(ds.task_count(), 5);
}

/// The `AgentOutput` schema browser-use 0.13.14 sends (written by
/// `tests/data/browser_use/generate.py --schema-out`) compiles, takes every model
/// output the recorded histories hold, and refuses what Browser Use would reject.
#[test]
fn browser_use_agent_output_schema_constrains_decoding() {
    use rmsweb::serve::constrain::Schema;
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/browser_use");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("agent_output_schema.json")).unwrap(),
    )
    .unwrap();
    let s = Schema::compile(&schema).unwrap();
    let fields = [
        "thinking",
        "evaluation_previous_goal",
        "memory",
        "next_goal",
        "current_plan_item",
        "plan_update",
    ];
    // Each action's required parameters.
    let required: std::collections::HashMap<&str, Vec<&str>> =
        schema["properties"]["action"]["items"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|a| a["properties"].as_object().unwrap())
            .map(|(name, p)| {
                let req = p["required"].as_array().unwrap();
                (
                    name.as_str(),
                    req.iter().map(|r| r.as_str().unwrap()).collect(),
                )
            })
            .collect();
    let mut seen = 0;
    for run in std::fs::read_dir(&data).unwrap() {
        let history = run.unwrap().path().join("history.json");
        let Ok(text) = std::fs::read_to_string(&history) else {
            continue;
        };
        let h: Value = serde_json::from_str(&text).unwrap();
        for item in h["history"].as_array().unwrap() {
            let Some(out) = item["model_output"].as_object() else {
                continue;
            };
            // Browser Use leaves None fields out of its history; strict mode sends null.
            let mut out = out.clone();
            for f in fields {
                out.entry(f).or_insert(Value::Null);
            }
            // A run that offered coordinate clicks sent another schema.
            if out["action"].to_string().contains("coordinate_x") {
                continue;
            }
            for a in out["action"].as_array_mut().unwrap() {
                for (name, params) in a.as_object_mut().unwrap() {
                    for p in &required[name.as_str()] {
                        params
                            .as_object_mut()
                            .unwrap()
                            .entry(*p)
                            .or_insert(Value::Null);
                    }
                }
            }
            let answer = serde_json::to_string(&out).unwrap();
            assert!(s.accepts(&answer), "{}: {answer}", history.display());
            seen += 1;
        }
    }
    assert!(seen >= 10, "{seen} model outputs");
    let answer = |action: Value, extra: Value| {
        let mut v = json!({"thinking": "t", "evaluation_previous_goal": null, "memory": "m",
            "next_goal": "g", "current_plan_item": 1, "plan_update": ["a"], "action": action});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v.to_string()
    };
    assert!(s.accepts(&answer(json!([{"click": {"index": 3}}]), json!({}))));
    assert!(s.accepts(&answer(
        json!([{"done": {"text": "W-132 is red", "success": true, "files_to_display": null}}]),
        json!({})
    )));
    assert!(!s.accepts(&answer(json!([]), json!({}))), "min_items 1");
    assert!(!s.accepts(&answer(json!([{"fly": {"to": "moon"}}]), json!({}))));
    assert!(!s.accepts(&answer(json!([{"click": {"index": "3"}}]), json!({}))));
    assert!(!s.accepts(&answer(
        json!([{"click": {"index": 3}}]),
        json!({"extra": 1})
    )));
    let mut partial: Value =
        serde_json::from_str(&answer(json!([{"click": {"index": 3}}]), json!({}))).unwrap();
    partial.as_object_mut().unwrap().remove("next_goal");
    assert!(
        !s.accepts(&partial.to_string()),
        "strict: every field is required"
    );
}
