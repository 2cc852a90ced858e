//! `rmsweb serve` on loopback with a tiny random checkpoint: the OpenAI wire format,
//! schema-constrained answers, streaming, batching of concurrent requests, error
//! bodies, and the exchange log.

use rmsweb::model::{Decoder, DecoderConfig, tokenizer, weights};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A random tiny model with a byte-level tokenizer, saved as a model folder.
pub(crate) fn tiny_checkpoint(dir: &Path) {
    write_tiny_checkpoint(dir, 1024, &[]);
}

/// A random tiny model of `context` positions; each `(token, boost)` gets that much
/// more weight on one embedding dimension every token shares, so wherever the
/// token is allowed its logit is ahead of every other token's by about 5.6 × boost.
pub(crate) fn write_tiny_checkpoint(dir: &Path, context: usize, favoured: &[(&str, f32)]) {
    let texts = [
        r#"{"memory":"the form is open","action":[{"click":{"index":3}}]}"#,
        r#"{"memory":"done","action":[{"done":{"text":"W-132 is red","success":true}}]}"#,
        "Find the colour of part W-132 on the parts page.",
    ];
    let tok = tokenizer::train_bpe(texts.iter().copied(), 320, 2).unwrap();
    tokenizer::save(&tok, dir).unwrap();
    let cfg = DecoderConfig {
        arch: rmsweb::model::arch::Arch::qwen3(),
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
        max_position_embeddings: context,
        eos_token_id: None,
        rope_scaling: None,
    };
    let mut w = Decoder::random_weights(&cfg, 7).unwrap();
    if !favoured.is_empty() {
        // With tied embeddings, dimension 0 (1.0 in every row) dominates the final
        // hidden state, so a row's dimension 0 sets its token's logit.
        let key = "model.embed_tokens.weight";
        let mut rows: Vec<Vec<f32>> = w[key].to_vec2().unwrap();
        for r in &mut rows {
            r[0] = 1.0;
        }
        for (t, boost) in favoured {
            let id = tok
                .token_to_id(t)
                .unwrap_or_else(|| panic!("no token {t:?}"));
            rows[id as usize][0] += boost;
        }
        let flat: Vec<f32> = rows.concat();
        let e = candle_core::Tensor::from_vec(
            flat,
            (cfg.vocab_size, cfg.hidden_size),
            &candle_core::Device::Cpu,
        )
        .unwrap();
        w.insert(key.into(), e);
    }
    weights::save_file(&w, &dir.join("model.safetensors")).unwrap();
    cfg.save(dir).unwrap();
}

/// The server process; killed if a test fails before it is stopped.
pub(crate) struct Server {
    child: Child,
    pub(crate) base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// How the server process ended, or `None` while it runs.
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }
}

pub(crate) fn start(checkpoint: &Path, log: &Path) -> Server {
    start_with(checkpoint, log, &[])
}

/// `rmsweb serve` on a free loopback port, with `extra` arguments.
pub(crate) fn start_with(checkpoint: &Path, log: &Path, extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .arg("serve")
        .arg("--checkpoint")
        .arg(checkpoint)
        .args(["--port", "0", "--model-name", "tiny", "--max-batch", "8"])
        .arg("--log-dataset")
        .arg(log)
        .args(extra)
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

pub(crate) fn post(client: &reqwest::blocking::Client, base: &str, body: &Value) -> (u16, Value) {
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

    // With a schema and a budget the sampled answers outgrow (about 100 tokens each
    // with 600 allowed), each is closed the shortest way within it: still a whole answer,
    // ended by itself.
    let body = request(
        "Find W-132.",
        json!({"temperature": 1.0, "seed": 7, "n": 4, "max_completion_tokens": 60}),
    );
    let (status, r) = post(&client, &base, &body);
    assert_eq!(status, 200, "{r}");
    assert!(
        r["usage"]["completion_tokens"].as_u64().unwrap() <= 4 * 60,
        "{r}"
    );
    for c in r["choices"].as_array().unwrap() {
        assert_eq!(c["finish_reason"], "stop", "{r}");
        check_agent_output(c["message"]["content"].as_str().unwrap());
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
    assert_eq!(logged.len(), 8);
    assert_eq!(logged[0]["choices"][0]["text"], text.as_str());
    assert_eq!(logged[0]["model"], "tiny");
    // Each exchange was a Browser Use step 1, so each became its own trajectory.
    let ds = rmsweb::trajectory::Dataset::open(&log).unwrap();
    let ts = ds.summaries();
    assert_eq!(ts.len(), 8);
    assert!(
        ts.iter()
            .all(|t| t.as_ref().unwrap().source == "rmsweb-serve")
    );
    assert_eq!(ds.task_count(), 5);
}

/// Browser Use's own `AgentOutput` (seven required keys, 24 kinds of action, free
/// text unbounded): a babbling answer is closed within its budget, a whole answer
/// ended by itself. The search for the close gave up on this schema, and the answer
/// came back cut at `max_completion_tokens`.
#[test]
fn serve_closes_browser_uses_agent_output_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("tiny");
    std::fs::create_dir_all(&ckpt).unwrap();
    // `W` wherever it is allowed: every string runs on until the budget.
    write_tiny_checkpoint(&ckpt, 1024, &[("W", 3.0)]);
    let mut server = start(&ckpt, &dir.path().join("deployed"));
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/browser_use/agent_output_schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let compiled = rmsweb::model::constrain::Schema::compile(&schema).unwrap();
    let mut body = request(
        "Find W-132.",
        json!({"temperature": 0, "max_completion_tokens": 300}),
    );
    body["response_format"]["json_schema"]["schema"] = schema;
    let (status, r) = post(&client, &server.base, &body);
    assert_eq!(status, 200, "{r}");
    for c in r["choices"].as_array().unwrap() {
        let text = c["message"]["content"].as_str().unwrap();
        assert_eq!(c["finish_reason"], "stop", "{text}");
        assert!(compiled.accepts(text), "{text}");
        assert!(
            text.contains("WWWW"),
            "the model's own text is kept: {text}"
        );
    }
    assert!(server.exited().is_none(), "the server is still up");
}

/// The `AgentOutput` schema browser-use 0.13.14 sends (written by
/// `tests/data/browser_use/generate.py --schema-out`) compiles, takes every model
/// output the recorded histories hold, and refuses what Browser Use would reject.
#[test]
fn browser_use_agent_output_schema_constrains_decoding() {
    use rmsweb::model::constrain::Schema;
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

/// The Python of the browser-use venv `.ci/install-browser-use.sh` makes
/// (`$RMSWEB_BROWSER_USE_VENV`, else `~/.cache/rmsweb/venv-browser-use`).
fn browser_use_python() -> PathBuf {
    let venv = std::env::var_os("RMSWEB_BROWSER_USE_VENV")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
                })
                .join("rmsweb/venv-browser-use")
        });
    let python = venv.join("bin/python");
    assert!(
        python.is_file() && venv.join(".rmsweb-browser-use-version").is_file(),
        "browser-use is not installed in {}: run `.ci/install-browser-use.sh`",
        venv.display()
    );
    python
}

/// Runs `cmd` to its end, killed after `limit`; its output, and whether it ended in time.
fn run_for(cmd: &mut Command, limit: Duration) -> (std::process::Output, bool) {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => (out.unwrap(), true),
        Err(_) => {
            // SAFETY: signalling the child this test started (it kills its browser).
            unsafe { libc::kill(pid, libc::SIGTERM) };
            (rx.recv().unwrap().unwrap(), false)
        }
    }
}

fn rmsweb(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The real browser-use 0.13.14 Agent, with its own `ChatOpenAI` client, runs on a
/// MiniWoB page (served on loopback by `generate.py`) against `rmsweb serve` over a
/// random tiny model, and what it records imports and validates cleanly — as does
/// the trajectory serve logged of the same session.
///
/// The model is random but for two favoured tokens: `"` (so every string Browser
/// Use's unbounded `AgentOutput` schema allows ends at once) and `d` (so, of the
/// actions, it picks `done`): its answers are short and the run ends in one step.
/// Needs `.ci/install-browser-use.sh` and `.ci/install-env.sh` (Chromium, MiniWoB).
#[test]
fn browser_use_agent_runs_on_serve_and_its_history_imports_cleanly() {
    use std::ffi::OsStr;
    let python = browser_use_python();
    let pages = rmsweb::env::miniwob::html_root(&rmsweb::env::miniwob::resolve_dir(None))
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(pages.join("miniwob/click-button.html").is_file());
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("tiny");
    std::fs::create_dir_all(&ckpt).unwrap();
    write_tiny_checkpoint(&ckpt, 8192, &[("\"", 40.0), ("d", 10.0)]);
    let deployed = dir.path().join("deployed");
    // Browser Use's own system prompt (24 kB) does not fit a small model's context.
    let mut server = start_with(&ckpt, &deployed, &["--prompt-format", "browser-use"]);

    let run = dir.path().join("run");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/browser_use/generate.py");
    let started = std::time::Instant::now();
    let (out, in_time) = run_for(
        Command::new(&python)
            .arg(&script)
            .args(["--llm-url", &server.base, "--model", "tiny"])
            .args([
                "--task",
                "Open {pages}/miniwob/click-button.html and click the button it asks for.",
            ])
            .args(["--max-steps", "2", "--max-tokens", "600"])
            .arg("--page-root")
            .arg(&pages)
            .arg("--out")
            .arg(&run),
        Duration::from_secs(240),
    );
    let agent_log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(in_time, "the agent ran past 240 s:\n{agent_log}");
    assert!(out.status.success(), "{:?}\n{agent_log}", out.status);
    eprintln!(
        "browser-use agent: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Serve answered the agent, schema-valid, and Browser Use acted on the answer.
    let exchanges = std::fs::read_to_string(deployed.join("serve/exchanges.jsonl")).unwrap();
    let answers: Vec<Value> = exchanges
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            assert_eq!(e["choices"][0]["finish_reason"], "stop", "{e}");
            let text = e["choices"][0]["text"].as_str().unwrap();
            serde_json::from_str(text).unwrap_or_else(|err| panic!("{err}: {text}"))
        })
        .collect();
    assert!(!answers.is_empty(), "serve answered nothing:\n{agent_log}");
    // What it was asked holds the page as Browser Use read it from Chromium.
    assert!(
        exchanges.contains("click-button.html") && exchanges.contains("id=sync-task-cover"),
        "{exchanges}"
    );
    let history: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("history.json")).unwrap()).unwrap();
    let items = history["history"].as_array().unwrap();
    assert!(!items.is_empty());
    let model_steps: Vec<&Value> = items
        .iter()
        .filter(|i| i["metadata"]["step_number"].as_u64() >= Some(1))
        .filter(|i| i["model_output"].is_object())
        .collect();
    assert!(
        !model_steps.is_empty(),
        "no step took a served answer:\n{history:#}\n{agent_log}"
    );
    let action_names = |actions: &Value| -> Vec<String> {
        actions
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_object()?.keys().next().cloned())
            .collect()
    };
    let first = action_names(&model_steps[0]["model_output"]["action"]);
    let served = action_names(&answers[0]["action"]);
    assert!(
        !first.is_empty() && served.starts_with(&first),
        "{first:?} vs {served:?}"
    );
    let results = model_steps[0]["result"].as_array().unwrap();
    assert_eq!(results.len(), first.len(), "{history:#}");

    // The history imports as one trajectory with every step, and validates.
    let ds = dir.path().join("ds");
    let (ok, text) = rmsweb(&[
        OsStr::new("import"),
        OsStr::new("browser-use"),
        run.join("history.json").as_os_str(),
        OsStr::new("--dataset"),
        ds.as_os_str(),
        OsStr::new("--source"),
        OsStr::new("browser-use@0.13.14"),
        OsStr::new("--teacher"),
        OsStr::new("tiny"),
    ]);
    assert!(ok, "{text}");
    assert!(
        text.contains("imported 1 trajectories and 1 new tasks"),
        "{text}"
    );
    let d = rmsweb::trajectory::Dataset::open(&ds).unwrap();
    let t = d.trajectory(0).unwrap();
    assert_eq!(t.steps.len(), items.len(), "{text}");
    assert!(
        text.contains(&format!("(attempt 1, {} steps,", t.steps.len())),
        "{text}"
    );
    assert_eq!(t.teacher, "tiny");
    let imported: Vec<_> = t.steps.iter().filter(|s| s.is_model_step()).collect();
    assert_eq!(imported.len(), model_steps.len(), "{text}");
    // Browser Use's screenshot of the page, found in the folder beside the history.
    assert!(imported[0].state.screenshot.is_some(), "{text}");
    let (ok, text) = rmsweb(&[OsStr::new("validate"), ds.as_os_str()]);
    assert!(ok && text.contains(": 0 errors"), "{text}");

    // Stopped, serve has written the session as a trajectory of its own log.
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    assert!(server.child.wait().unwrap().success());
    let (ok, text) = rmsweb(&[OsStr::new("validate"), deployed.as_os_str()]);
    assert!(
        ok && text.contains("1 trajectories") && text.contains(": 0 errors"),
        "{text}"
    );
}
