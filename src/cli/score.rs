//! `rmsweb score`: per-token log-probabilities of a conversation's assistant turns
//! under a checkpoint, to check it against another implementation (transformers).

use anyhow::{Context, Result};
use rmsweb::model::score::{Score, read_messages, score};
use rmsweb::model::{LocalModelPolicy, parse_device};
use rmsweb::util::sanitize::clean_line;
use std::path::{Path, PathBuf};

/// Arguments of `rmsweb score`.
#[derive(clap::Args)]
pub struct Args {
    /// A checkpoint folder (a model folder, or a PEFT adapter whose
    /// `base_model_name_or_path` names its base), or a run folder (its latest checkpoint).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The conversation: a JSON list of {"role", "content"} messages, or an object
    /// with that list under "messages".
    #[arg(long)]
    messages: PathBuf,
    /// `cpu` or `cuda:N`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Print one JSON object (every token's id, text, log-probability, argmax).
    #[arg(long)]
    json: bool,
}

/// Loads the checkpoint `dir` names onto `device`.
pub fn load(dir: &Path, device: &str) -> Result<LocalModelPolicy> {
    let ckpt = rmsweb::train::run::resolve_checkpoint(dir)?;
    LocalModelPolicy::from_checkpoint(&ckpt, &parse_device(device)?)
        .with_context(|| format!("loading {}", ckpt.display()))
}

/// Runs the subcommand.
pub fn run(a: Args) -> Result<()> {
    let messages = read_messages(&a.messages)?;
    let policy = load(&a.checkpoint, &a.device)?;
    let s = score(&policy, &messages)?;
    if a.json {
        let mut v = serde_json::to_value(&s)?;
        v["template"] = policy.template.origin().into();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_table(&s, policy.template.origin());
    }
    Ok(())
}

fn print_table(s: &Score, template: &str) {
    println!("template: {}", clean_line(template));
    for (k, seq) in s.sequences.iter().enumerate() {
        if s.sequences.len() > 1 {
            println!("sequence {} ({} tokens)", k + 1, seq.ids.len());
        }
        println!("{:>6} {:>7} {:>10}  token", "pos", "id", "logprob");
        for t in &seq.tokens {
            let mark = if t.argmax == t.id { ' ' } else { '*' };
            println!(
                "{:>6} {:>7} {:>10.4}{mark} {:?}",
                t.position,
                t.id,
                t.logprob,
                clean_line(&t.text)
            );
        }
    }
    println!(
        "{} assistant tokens: sum {:.4}, mean {:.4}, perplexity {:.3}, argmax agreement {:.1}% (* marks the others)",
        s.count,
        s.sum_logprob,
        s.mean_logprob,
        s.perplexity,
        100.0 * s.argmax_agreement
    );
}
