//! `rmsweb generate`: decode a reply from a checkpoint, for a prompt or a conversation.

use anyhow::Result;
use rmsweb::model::Message;
use rmsweb::model::sample::{SampleConfig, generate};
use rmsweb::model::score::read_messages;
use rmsweb::util::sanitize::clean_text;
use std::path::PathBuf;

/// Arguments of `rmsweb generate`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["prompt", "messages"])))]
pub struct Args {
    /// A checkpoint folder (model folder or PEFT adapter) or a run folder.
    #[arg(long)]
    checkpoint: PathBuf,
    /// One user message, rendered with the model's chat template.
    #[arg(long)]
    prompt: Option<String>,
    /// A conversation (JSON list of {"role", "content"}, or {"messages": [...]}); the
    /// reply continues it.
    #[arg(long)]
    messages: Option<PathBuf>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Nucleus sampling mass (with a temperature above 0).
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// `cpu` or `cuda:N`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// A screenshot shown after the last user message (Qwen3-VL checkpoints only).
    #[arg(long)]
    image: Option<PathBuf>,
    /// Print one JSON object: text, token ids, why generation stopped, and speed.
    #[arg(long)]
    json: bool,
}

/// Runs the subcommand.
pub fn run(a: Args) -> Result<()> {
    anyhow::ensure!(
        a.temperature >= 0.0 && a.temperature.is_finite(),
        "--temperature must be 0 or more"
    );
    anyhow::ensure!(a.top_p > 0.0 && a.top_p <= 1.0, "--top-p must be in (0, 1]");
    let messages = match (&a.prompt, &a.messages) {
        (Some(p), _) => vec![Message::new("user", p.clone())],
        (None, Some(f)) => read_messages(f)?,
        (None, None) => anyhow::bail!("give --prompt or --messages"),
    };
    let mut policy = super::score::load(&a.checkpoint, &a.device)?;
    let prompt = policy
        .template
        .encode_prompt(&policy.tokenizer, &messages)?;
    let cfg = SampleConfig {
        temperature: a.temperature,
        top_p: a.top_p,
        max_new_tokens: a.max_tokens,
        seed: a.seed,
    };
    let t0 = std::time::Instant::now();
    let (ids, text) = match &a.image {
        None => {
            let ids = generate(&policy.model, &prompt, policy.stop_ids(), &cfg)?;
            let text = policy
                .tokenizer
                .decode(&ids, true)
                .map_err(|e| anyhow::anyhow!("decoding: {e}"))?;
            (ids, text)
        }
        Some(image) => {
            anyhow::ensure!(
                policy.vl.is_some(),
                "--image needs a Qwen3-VL checkpoint; {} is a text model",
                a.checkpoint.display()
            );
            policy.sampling = cfg.clone();
            let text = policy.generate_seeing(&messages, Some(image), None)?;
            let ids = policy
                .tokenizer
                .encode(text.as_str(), false)
                .map_err(|e| anyhow::anyhow!("encoding: {e}"))?
                .get_ids()
                .to_vec();
            (ids, text)
        }
    };
    let seconds = t0.elapsed().as_secs_f64();
    let max_pos = policy.model.config.max_position_embeddings;
    let stopped = if ids.len() >= a.max_tokens {
        "max_tokens"
    } else if prompt.len() + ids.len() >= max_pos {
        "context"
    } else {
        "stop_token"
    };
    if a.json {
        let v = serde_json::json!({
            "text": text,
            "ids": ids,
            "prompt_tokens": prompt.len(),
            "stopped": stopped,
            "template": policy.template.origin(),
            "seconds": seconds,
            "tokens_per_s": ids.len() as f64 / seconds.max(1e-9),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{}", clean_text(&text));
        if stopped != "stop_token" {
            eprintln!("(stopped: {stopped})");
        }
    }
    Ok(())
}
