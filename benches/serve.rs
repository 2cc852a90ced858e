//! `rmsweb serve` under load: requests/s, completion tokens/s and time to first
//! token (streaming) with 1, 4 and 16 concurrent clients, each sending Browser
//! Use-like requests one after another (the `browser-use` format's system prompt, a
//! state message recorded by Browser Use 0.13.14, its `AgentOutput` schema as
//! `response_format`, a fixed `max_completion_tokens`).
//!
//! Setup (not timed): a random model of the `tiny` SFT preset's size (vocab 4096,
//! hidden 256, 4 layers) with a BPE tokenizer trained on the recorded histories,
//! served by the built binary on loopback (`--max-batch 16`, the CLI default).
//!
//! `cargo bench --bench serve -- [--requests N] [--max-tokens N] [--clients 1,4,16]
//! [--free] [--model DIR] [--peer URL]` (N requests per concurrency level, default 64,
//! also set by `RMSWEB_SERVE_BENCH_REQUESTS`; `--free` sends no `response_format`, to
//! see what the constraint costs; `--model` serves that model folder, e.g. SmolLM2
//! imported by `rmsweb model import`, instead of a random one; `--peer` measures
//! another OpenAI-compatible server too, with the same requests: start llama.cpp's
//! on the same GGUF with `scripts/llama-cpp-peer.sh` (it turns off the server's
//! `interrupt_requests`, which cuts answers short under concurrency), pass
//! `--peer http://127.0.0.1:8089/v1` and add `--peer-json-object`: it takes the
//! schema as `{"type": "json_object", "schema"}`).
//!
//! Every request carries the `browser-use` format's system prompt itself, so a peer
//! sees the very messages `rmsweb serve` does.
//! Under `cargo test --all-targets` it runs a smoke: a far smaller model, 4
//! requests per level.

use rmsweb::model::{Decoder, DecoderConfig, tokenizer, weights};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The state messages of the recorded Browser Use histories.
fn state_messages(repo: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for run in ["parts", "login", "tabs", "newsletter", "broken"] {
        let path = repo
            .join("tests/data/browser_use")
            .join(run)
            .join("history.json");
        let h: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        for item in h["history"].as_array().into_iter().flatten() {
            if let Some(m) = item["state_message"].as_str() {
                out.push(m.to_string());
            }
        }
    }
    anyhow::ensure!(
        !out.is_empty(),
        "no state messages in tests/data/browser_use"
    );
    Ok(out)
}

/// Writes a random model folder: the tiny preset's sizes, or a far smaller model.
fn checkpoint(dir: &Path, texts: &[String], full: bool) -> anyhow::Result<()> {
    let (vocab, hidden, layers, heads, kv, head_dim, inter) = if full {
        (4096, 256, 4, 4, 2, 64, 768)
    } else {
        (512, 32, 2, 4, 2, 8, 48)
    };
    let tok = tokenizer::train_bpe(texts.iter(), vocab, 2)?;
    tokenizer::save(&tok, dir)?;
    let cfg = DecoderConfig {
        arch: rmsweb::model::arch::Arch::qwen3(),
        vocab_size: tok.get_vocab_size(true),
        hidden_size: hidden,
        intermediate_size: inter,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: Some(kv),
        head_dim: Some(head_dim),
        rms_norm_eps: 1e-6,
        rope_theta: 10_000.0,
        rope_scaling: None,
        tie_word_embeddings: true,
        max_position_embeddings: 4096,
        eos_token_id: None,
    };
    weights::save_file(
        &Decoder::random_weights(&cfg, 7)?,
        &dir.join("model.safetensors"),
    )?;
    cfg.save(dir)?;
    Ok(())
}

/// The served binary; killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `rmsweb serve` on a free loopback port; its `/v1` address.
fn start(ckpt: &Path) -> anyhow::Result<(Server, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .arg("serve")
        .arg("--checkpoint")
        .arg(ckpt)
        .args(["--port", "0", "--model-name", "bench", "--max-batch", "16"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take();
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout.ok_or_else(|| anyhow::anyhow!("no stdout"))?).read_line(&mut line)?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| anyhow::anyhow!("no address in {line:?}"))?
        .to_string();
    Ok((server, url))
}

/// A server to measure: its name, `/v1` address, the process when we started it, and
/// the request body it gets for request `i`.
type Target<'a> = (
    String,
    String,
    Option<Server>,
    &'a (dyn Fn(usize) -> Value + Sync),
);

/// One streamed request's figures.
struct Sample {
    ttft: f64,
    latency: f64,
    tokens: u64,
}

/// Sends one streamed request; the time to its first content delta, its latency
/// and its completion tokens (from the final usage chunk).
fn stream_one(
    client: &reqwest::blocking::Client,
    base: &str,
    body: &Value,
) -> anyhow::Result<Sample> {
    let t0 = Instant::now();
    let r = client
        .post(format!("{base}/chat/completions"))
        .json(body)
        .send()?;
    anyhow::ensure!(
        r.status().is_success(),
        "HTTP {}: {}",
        r.status(),
        r.text()?
    );
    let mut ttft = None;
    let mut tokens = 0;
    // A server that reports no usage (llama-cpp-python) sends a chunk per token.
    let mut chunks = 0;
    for line in BufReader::new(r).lines() {
        let line = line?;
        let Some(data) = line.strip_prefix("data:").map(str::trim) else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let c: Value = serde_json::from_str(data)?;
        let has_text = c["choices"].as_array().into_iter().flatten().any(|ch| {
            ch["delta"]["content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        });
        if has_text && ttft.is_none() {
            ttft = Some(t0.elapsed().as_secs_f64());
        }
        chunks += u64::from(has_text);
        if let Some(n) = c["usage"]["completion_tokens"].as_u64() {
            tokens = n;
        }
    }
    let latency = t0.elapsed().as_secs_f64();
    if tokens == 0 {
        tokens = chunks;
    }
    Ok(Sample {
        // An answer that is only the end token has its first token at the end.
        ttft: ttft.unwrap_or(latency),
        latency,
        tokens,
    })
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let requests: usize = arg(&args, "--requests")
        .map(str::to_string)
        .or_else(|| std::env::var("RMSWEB_SERVE_BENCH_REQUESTS").ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 64 } else { 4 })
        .max(1);
    let max_tokens: u64 = arg(&args, "--max-tokens")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 64 } else { 8 })
        .max(1);
    let levels: Vec<usize> = match arg(&args, "--clients") {
        Some(v) => v
            .split(',')
            .map(|c| c.trim().parse::<usize>())
            .collect::<Result<_, _>>()?,
        None if full => vec![1, 4, 16],
        None => vec![1, 4],
    };
    anyhow::ensure!(levels.iter().all(|&c| c >= 1), "--clients: at least 1 each");
    let free = args.iter().any(|a| a == "--free");

    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let states = state_messages(repo)?;
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(
        repo.join("tests/data/browser_use/agent_output_schema.json"),
    )?)?;
    let tmp = tempfile::tempdir()?;
    let model = arg(&args, "--model").map(std::path::PathBuf::from);
    let ckpt = match &model {
        Some(m) => m.clone(),
        None => {
            let mut corpus = states.clone();
            corpus.push(rmsweb::policy::browser_use::system_prompt());
            checkpoint(tmp.path(), &corpus, full)?;
            tmp.path().to_path_buf()
        }
    };
    let (server, base) = start(&ckpt)?;
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(1800))
        .build()?;
    let system = rmsweb::policy::browser_use::system_prompt();
    // llama-cpp-python's server takes a schema as `{"type": "json_object", "schema"}`.
    let peer_json_object = args.iter().any(|a| a == "--peer-json-object");
    let body_for = |i: usize, json_object: bool| {
        let mut b = json!({
            "model": "bench",
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": states[i % states.len()]},
            ],
            "temperature": 1.0,
            "seed": i,
            "frequency_penalty": 0.3,
            "max_completion_tokens": max_tokens,
            "max_tokens": max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
            "response_format": {"type": "json_schema", "json_schema":
                {"name": "agent_output", "strict": true, "schema": schema}},
        });
        if let Some(o) = b.as_object_mut() {
            if free {
                o.remove("response_format");
            } else if json_object {
                o.insert(
                    "response_format".into(),
                    json!({"type": "json_object", "schema": schema}),
                );
            }
        }
        b
    };
    let ours = |i: usize| body_for(i, false);
    let theirs = |i: usize| body_for(i, peer_json_object);
    let model_name = match &model {
        Some(m) => m.display().to_string(),
        None if full => "tiny-preset-sized".into(),
        None => "smoke".into(),
    };
    let mut servers: Vec<Target> = vec![(
        format!("rmsweb serve ({model_name})"),
        base,
        Some(server),
        &ours,
    )];
    if let Some(peer) = arg(&args, "--peer") {
        servers.push((
            format!("peer {peer}"),
            peer.trim_end_matches('/').to_string(),
            None,
            &theirs,
        ));
    }
    println!(
        "serve: {requests} requests per level, max_completion_tokens {max_tokens}, \
         Browser Use system prompt and state messages, {}",
        if free {
            "no response_format"
        } else {
            "AgentOutput schema"
        }
    );
    for (name, base, server, body) in servers {
        measure(&name, &client, &base, &levels, requests, body)?;
        drop(server);
    }
    Ok(())
}

/// Sends `requests` requests at each concurrency level and prints a table row per
/// level.
fn measure(
    name: &str,
    client: &reqwest::blocking::Client,
    base: &str,
    levels: &[usize],
    requests: usize,
    body: &(dyn Fn(usize) -> Value + Sync),
) -> anyhow::Result<()> {
    // Warm-up (page cache, allocator): one request, not counted.
    stream_one(client, base, &body(0))?;
    println!("{name}");
    println!(
        "{:>7} {:>8} {:>8} {:>9} {:>10} {:>10} {:>12}",
        "clients", "req/s", "tok/s", "tok/req", "TTFT p50", "TTFT p95", "latency p50"
    );
    for &clients in levels {
        let t0 = Instant::now();
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let client = client.clone();
                let base = base.to_string();
                let bodies: Vec<Value> = (c..requests).step_by(clients).map(body).collect();
                std::thread::spawn(move || {
                    bodies
                        .iter()
                        .map(|b| stream_one(&client, &base, b))
                        .collect::<anyhow::Result<Vec<Sample>>>()
                })
            })
            .collect();
        let mut samples = Vec::new();
        for h in handles {
            samples.extend(
                h.join()
                    .map_err(|_| anyhow::anyhow!("a client thread panicked"))??,
            );
        }
        let wall = t0.elapsed().as_secs_f64();
        anyhow::ensure!(samples.len() == requests, "{} answers", samples.len());
        let tokens: u64 = samples.iter().map(|s| s.tokens).sum();
        let mut ttft: Vec<f64> = samples.iter().map(|s| s.ttft).collect();
        let mut lat: Vec<f64> = samples.iter().map(|s| s.latency).collect();
        println!(
            "{clients:>7} {:>8.2} {:>8.1} {:>9.1} {:>8.0}ms {:>8.0}ms {:>10.0}ms",
            requests as f64 / wall,
            tokens as f64 / wall,
            tokens as f64 / requests as f64,
            quantile(&mut ttft, 0.5) * 1e3,
            quantile(&mut ttft, 0.95) * 1e3,
            quantile(&mut lat, 0.5) * 1e3,
        );
    }
    Ok(())
}
