//! Scoring a conversation under a local model: the log-probability of every assistant
//! token given what precedes it, as transformers computes it from the same ids.

use super::chat_template::Message;
use super::policy::LocalModelPolicy;
use super::{at_least_f32, fused};
use anyhow::{Context, Result};
use candle_core::{D, Tensor};
use serde::Serialize;
use std::path::Path;

/// One scored token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredToken {
    /// Position in the sequence (0-based; the first token is never scored).
    pub position: usize,
    pub id: u32,
    /// The token decoded alone (special tokens included).
    pub text: String,
    /// Natural-log probability of the token given the tokens before it.
    pub logprob: f64,
    /// The model's most likely token at this position.
    pub argmax: u32,
}

/// One training sequence of the conversation (see `ChatTemplate::encode_turns`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredSequence {
    /// Every token id of the sequence.
    pub ids: Vec<u32>,
    /// The assistant tokens, scored.
    pub tokens: Vec<ScoredToken>,
}

/// The scores of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    pub sequences: Vec<ScoredSequence>,
    /// Assistant tokens scored.
    pub count: usize,
    /// Sum of their log-probabilities.
    pub sum_logprob: f64,
    /// Mean log-probability (0 when nothing was scored).
    pub mean_logprob: f64,
    /// `exp(-mean_logprob)`.
    pub perplexity: f64,
    /// Share of scored tokens that are the model's argmax.
    pub argmax_agreement: f64,
}

/// Scores the assistant messages of `messages` (the tokens `encode_turns` masks).
pub fn score(policy: &LocalModelPolicy, messages: &[Message]) -> Result<Score> {
    let seqs = policy.template.encode_turns(&policy.tokenizer, messages)?;
    anyhow::ensure!(
        !seqs.is_empty(),
        "the conversation has no assistant message to score"
    );
    let model = &policy.model;
    let max_pos = model.config.max_position_embeddings;
    let mut sequences = Vec::new();
    for e in seqs {
        anyhow::ensure!(
            e.ids.len() <= max_pos,
            "the conversation is {} tokens; the model holds {max_pos} positions",
            e.ids.len()
        );
        let rows: Vec<usize> = (1..e.ids.len()).filter(|&i| e.mask[i]).collect();
        if rows.is_empty() {
            sequences.push(ScoredSequence {
                ids: e.ids,
                tokens: Vec::new(),
            });
            continue;
        }
        let dev = model.device();
        let input = Tensor::new(&e.ids[..e.ids.len() - 1], dev)?.unsqueeze(0)?;
        let hidden = model.forward_hidden(&input, 0, None)?.squeeze(0)?;
        let idx: Vec<u32> = rows.iter().map(|&i| (i - 1) as u32).collect();
        let idx = Tensor::new(idx.as_slice(), dev)?;
        let logits = at_least_f32(&model.logits(&hidden.index_select(&idx, 0)?)?)?;
        let targets: Vec<u32> = rows.iter().map(|&i| e.ids[i]).collect();
        let lp: Vec<f32> = fused::target_log_probs(&logits, &targets)?
            .to_dtype(candle_core::DType::F32)?
            .to_vec1()?;
        let argmax: Vec<u32> = logits.argmax(D::Minus1)?.to_vec1()?;
        let tokens = rows
            .iter()
            .zip(lp.iter().zip(&argmax))
            .map(|(&i, (&logprob, &argmax))| ScoredToken {
                position: i,
                id: e.ids[i],
                text: policy
                    .tokenizer
                    .decode(&[e.ids[i]], false)
                    .unwrap_or_default(),
                logprob: logprob as f64,
                argmax,
            })
            .collect();
        sequences.push(ScoredSequence { ids: e.ids, tokens });
    }
    let all: Vec<&ScoredToken> = sequences.iter().flat_map(|s| &s.tokens).collect();
    let count = all.len();
    let sum: f64 = all.iter().map(|t| t.logprob).sum();
    let mean = if count == 0 { 0.0 } else { sum / count as f64 };
    let agree = all.iter().filter(|t| t.argmax == t.id).count();
    Ok(Score {
        sequences,
        count,
        sum_logprob: sum,
        mean_logprob: mean,
        perplexity: (-mean).exp(),
        argmax_agreement: if count == 0 {
            0.0
        } else {
            agree as f64 / count as f64
        },
    })
}

/// Reads a conversation: a JSON list of `{role, content}` messages, or an object with
/// such a list under `messages` (OpenAI request and sharegpt record style). Errors
/// name the file and the message's field.
pub fn read_messages(path: &Path) -> Result<Vec<Message>> {
    let v = crate::util::read_json_file(path)?;
    let (list, prefix) = match &v {
        serde_json::Value::Object(o) => (
            o.get("messages")
                .with_context(|| format!("{}: field `messages` missing", path.display()))?,
            "messages",
        ),
        other => (other, ""),
    };
    let messages: Vec<Message> = serde_path_to_error::deserialize(list).map_err(|e| {
        let at = e.path().to_string();
        let at = match (prefix, at.as_str()) {
            ("", a) => a.to_string(),
            (p, ".") => p.to_string(),
            (p, a) => format!("{p}{a}"),
        };
        anyhow::anyhow!("{}: field `{at}`: {}", path.display(), e.inner())
    })?;
    anyhow::ensure!(!messages.is_empty(), "{}: no messages", path.display());
    Ok(messages)
}
