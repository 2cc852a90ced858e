//! The generation engine: one thread owns the model and decodes every pending
//! request together.
//!
//! Requests queue on a channel. The engine takes all that are waiting (up to
//! `max_batch` sequences, `n` per request), left-pads their prompts to a common
//! length (padding masked out of attention, as the RL rollouts do), encodes them
//! in one forward pass, and decodes all sequences one token per pass; a finished
//! sequence leaves the batch at once (its cache rows are dropped). Requests that
//! arrive meanwhile wait for the next batch. Each sequence samples from its own
//! seeded generator, applies the OpenAI frequency/presence penalties, and, under a
//! JSON schema, only picks tokens the [`Matcher`] allows: the most likely
//! [`CANDIDATES`] tokens are checked first, the whole vocabulary only if none of
//! them fits. Text is streamed back as it is decoded (never splitting a UTF-8
//! character); stop strings cut it where they begin.
//!
//! A Qwen3-VL checkpoint decodes requests without an image in the batch (its text
//! decoder); a request with an image runs on its own after the batch, its prompt
//! and image encoded by the whole model once per sampled sequence.

use crate::model::constrain::{Closer, Matcher, Schema};
use crate::model::kv_cache::left_pad_mask;
use crate::model::policy::VlSide;
use crate::model::sample::{SampleConfig, pick_allowed};
use crate::model::vl::VlCache;
use crate::model::vl::prompt::Screenshot;
use crate::model::{Decoder, KvCache, tokenizer};
use anyhow::{Context, Result};
use candle_core::{DType, Tensor};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::mpsc;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

pub use crate::model::sample::CANDIDATES;

/// What one request asks the engine for.
#[derive(Debug, Clone)]
pub struct GenRequest {
    pub prompt: Vec<u32>,
    /// Sequences to sample (`n`).
    pub n: usize,
    /// 0 = greedy.
    pub temperature: f64,
    pub top_p: f64,
    pub max_new_tokens: usize,
    /// Stop strings (the text ends before the first one).
    pub stop: Vec<String>,
    pub seed: u64,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    /// Constrain the output to this schema.
    pub schema: Option<Arc<Schema>>,
    /// The image of a VL request; `prompt` holds its expanded placeholder run.
    pub image: Option<Arc<Screenshot>>,
}

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// A stop token, a stop string, or the end of the schema's value.
    Stop,
    /// `max_tokens` or the model's context ran out.
    Length,
}

impl Finish {
    /// OpenAI's `finish_reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// What the engine reports about a request, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// New text of sequence `choice`.
    Delta { choice: usize, text: String },
    /// Sequence `choice` ended after `tokens` generated tokens.
    Finished {
        choice: usize,
        finish: Finish,
        tokens: usize,
    },
    /// The batch failed (the model raised an error); nothing more follows.
    Failed(String),
}

struct Job {
    req: GenRequest,
    events: UnboundedSender<Event>,
}

impl Job {
    /// Whether the client went away (its events are no longer read): its rows stop
    /// at the next step.
    fn gone(&self) -> bool {
        self.events.is_closed()
    }
}

/// Facts about the served model the HTTP layer checks requests against.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub max_positions: usize,
}

/// A handle on the engine thread; cloning it shares the engine.
#[derive(Clone)]
pub struct Engine {
    tx: mpsc::Sender<Job>,
    pub info: ModelInfo,
}

impl Engine {
    /// Starts the engine thread over a loaded model (with its whole Qwen3-VL model
    /// when `vl`) and its tokenizer.
    pub fn start(
        model: Decoder,
        vl: Option<Box<VlSide>>,
        tok: tokenizers::Tokenizer,
        max_batch: usize,
    ) -> Engine {
        let info = ModelInfo {
            max_positions: model.config.max_position_embeddings,
        };
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("rmsweb-serve-engine".into())
            .spawn(move || {
                let core = Core::new(model, vl, tok);
                while let Ok(first) = rx.recv() {
                    let mut jobs = vec![first];
                    let mut rows = jobs[0].req.n;
                    while rows < max_batch.max(1) {
                        match rx.try_recv() {
                            Ok(j) => {
                                rows += j.req.n;
                                jobs.push(j);
                            }
                            Err(_) => break,
                        }
                    }
                    // A client that went away while its request waited is not decoded.
                    jobs.retain(|j| !j.gone());
                    let (seeing, text): (Vec<Job>, Vec<Job>) =
                        jobs.into_iter().partition(|j| j.req.image.is_some());
                    let fail = |jobs: &[Job], e: anyhow::Error| {
                        let msg = format!("{e:#}");
                        for j in jobs {
                            let _ = j.events.send(Event::Failed(msg.clone()));
                        }
                    };
                    if !text.is_empty()
                        && let Err(e) = core.run(&text)
                    {
                        fail(&text, e);
                    }
                    for j in seeing {
                        if let Err(e) = core.run_seeing(&j) {
                            fail(std::slice::from_ref(&j), e);
                        }
                    }
                }
            })
            .expect("spawning the engine thread");
        Engine { tx, info }
    }

    /// Queues a request; its events arrive on the returned receiver.
    pub fn submit(&self, req: GenRequest) -> UnboundedReceiver<Event> {
        let (events, rx) = unbounded_channel();
        if let Err(mpsc::SendError(job)) = self.tx.send(Job { req, events }) {
            let _ = job
                .events
                .send(Event::Failed("the engine has stopped".into()));
        }
        rx
    }
}

/// The model and what decoding needs of its tokenizer.
struct Core {
    model: Decoder,
    vl: Option<Box<VlSide>>,
    tok: tokenizers::Tokenizer,
    stop_ids: Vec<u32>,
    token_bytes: Vec<Option<Vec<u8>>>,
}

/// One sequence being decoded.
struct Row {
    job: usize,
    choice: usize,
    ids: Vec<u32>,
    /// Bytes of the decoded text already sent.
    sent: usize,
    rng: ChaCha8Rng,
    matcher: Option<Matcher>,
    /// When to close a constrained answer before its budget runs out.
    closer: Closer,
    /// Tokens closing the answer, written before anything the model would choose.
    forced: VecDeque<u32>,
    counts: HashMap<u32, u32>,
    mask: Vec<f32>,
    finished: Option<Finish>,
}

impl Row {
    /// Sequence `choice` of job `job`, seeded from the request, `mask` its prompt's
    /// key mask (left padding).
    fn new(job: usize, choice: usize, req: &GenRequest, mask: Vec<f32>) -> Row {
        Row {
            job,
            choice,
            ids: Vec::new(),
            sent: 0,
            rng: ChaCha8Rng::seed_from_u64(
                req.seed ^ (choice as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            matcher: req.schema.as_ref().map(Schema::matcher),
            closer: Closer::default(),
            forced: VecDeque::new(),
            counts: HashMap::new(),
            mask,
            finished: None,
        }
    }
}

impl Core {
    fn new(model: Decoder, vl: Option<Box<VlSide>>, tok: tokenizers::Tokenizer) -> Core {
        let stop_ids = [tokenizer::IM_END, tokenizer::END_OF_TEXT]
            .iter()
            .filter_map(|t| tok.token_to_id(t))
            .collect();
        let token_bytes = crate::model::constrain::token_bytes(&tok);
        Core {
            model,
            vl,
            tok,
            stop_ids,
            token_bytes,
        }
    }

    fn run(&self, jobs: &[Job]) -> Result<()> {
        let dev = self.model.device();
        let max_pos = self.model.config.max_position_embeddings;
        let lmax = jobs.iter().map(|j| j.req.prompt.len()).max().unwrap_or(0);
        anyhow::ensure!(
            lmax > 0 && lmax < max_pos,
            "prompt length {lmax} out of range"
        );
        let padded = jobs.iter().any(|j| j.req.prompt.len() < lmax);
        let mut ids = Vec::with_capacity(jobs.len() * lmax);
        let mut masks = Vec::with_capacity(jobs.len());
        for j in jobs {
            let pads = lmax - j.req.prompt.len();
            ids.extend(std::iter::repeat_n(0u32, pads));
            ids.extend_from_slice(&j.req.prompt);
            masks.push(left_pad_mask(pads, lmax));
        }
        let mask_tensor = |rows: &[&Vec<f32>], width: usize| -> Result<Tensor> {
            let flat: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
            Ok(Tensor::from_vec(flat, (rows.len(), width), dev)?)
        };
        let mut cache = KvCache::for_decoding();
        let input = Tensor::from_vec(ids, (jobs.len(), lmax), dev)?;
        let km = if padded {
            Some(mask_tensor(&masks.iter().collect::<Vec<_>>(), lmax)?)
        } else {
            None
        };
        let hidden = self
            .model
            .forward_hidden_masked(&input, 0, Some(&mut cache), km.as_ref())?;
        let first = self
            .model
            .logits(&hidden.narrow(1, lmax - 1, 1)?)?
            .squeeze(1)?;
        let mut rows: Vec<Row> = Vec::new();
        let mut row_job: Vec<u32> = Vec::new();
        for (ji, j) in jobs.iter().enumerate() {
            for c in 0..j.req.n {
                row_job.push(ji as u32);
                rows.push(Row::new(ji, c, &j.req, masks[ji].clone()));
            }
        }
        let idx = Tensor::from_vec(row_job, rows.len(), dev)?;
        let mut last = first.index_select(&idx, 0)?;
        let mut cache = cache.select_batch(&idx)?;
        let mut active: Vec<usize> = (0..rows.len()).collect();
        let mut pos = lmax;
        loop {
            let logits: Vec<Vec<f32>> = last.to_dtype(DType::F32)?.to_vec2()?;
            let mut next = Vec::with_capacity(active.len());
            for (k, &r) in active.iter().enumerate() {
                let job = &jobs[rows[r].job];
                let t = self.choose(
                    &mut rows[r],
                    &job.req,
                    &logits[k],
                    max_pos.saturating_sub(pos),
                );
                next.push(t);
                self.accept(&mut rows[r], job, t, pos + 1 >= max_pos);
            }
            let still: Vec<usize> = (0..active.len())
                .filter(|&k| {
                    let row = &rows[active[k]];
                    row.finished.is_none() && !jobs[row.job].gone()
                })
                .collect();
            if still.is_empty() {
                break;
            }
            if still.len() < active.len() {
                cache.retain_rows(&still)?;
                next = still.iter().map(|&k| next[k]).collect();
                active = still.iter().map(|&k| active[k]).collect();
            }
            let input = Tensor::from_vec(next, (active.len(), 1), dev)?;
            let km = if padded {
                for &r in &active {
                    rows[r].mask.push(0.0);
                }
                let ms: Vec<&Vec<f32>> = active.iter().map(|&r| &rows[r].mask).collect();
                Some(mask_tensor(&ms, pos + 1)?)
            } else {
                None
            };
            let h = self
                .model
                .forward_hidden_masked(&input, pos, Some(&mut cache), km.as_ref())?;
            pos += 1;
            last = self.model.logits(&h)?.squeeze(1)?;
        }
        Ok(())
    }

    /// Decodes a request with an image: for each sequence the whole VL model
    /// encodes prompt and image into a fresh cache, then decodes one token a pass.
    fn run_seeing(&self, job: &Job) -> Result<()> {
        let vl = self
            .vl
            .as_deref()
            .context("a request with an image reached a text model")?;
        let shot = job.req.image.as_deref().context("no image")?;
        let prompt = &job.req.prompt;
        let max_pos = self.model.config.max_position_embeddings;
        anyhow::ensure!(
            !prompt.is_empty() && prompt.len() < max_pos,
            "prompt length {} out of range",
            prompt.len()
        );
        let last_logits = |h: &Tensor| -> Result<Vec<f32>> {
            let k = h.dim(1)?;
            let l = vl.model.text().logits(&h.narrow(1, k - 1, 1)?)?;
            Ok(l.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?)
        };
        for c in 0..job.req.n {
            if job.gone() {
                break;
            }
            let mut row = Row::new(0, c, &job.req, Vec::new());
            let mut cache = VlCache::for_decoding();
            let h = vl
                .model
                .forward_hidden(prompt, Some(shot.images()), Some(&mut cache))?;
            let mut logits = last_logits(&h)?;
            let mut pos = prompt.len();
            loop {
                let t = self.choose(&mut row, &job.req, &logits, max_pos.saturating_sub(pos));
                self.accept(&mut row, job, t, pos + 1 >= max_pos);
                if row.finished.is_some() || job.gone() {
                    break;
                }
                let h = vl.model.forward_hidden(&[t], None, Some(&mut cache))?;
                logits = last_logits(&h)?;
                pos += 1;
            }
        }
        Ok(())
    }

    /// The next token of a row from its logits; `positions_left`: tokens the context
    /// still has room for, this one included. A constrained answer about to run out
    /// of tokens or positions is closed the shortest way its schema allows.
    fn choose(
        &self,
        row: &mut Row,
        req: &GenRequest,
        logits: &[f32],
        positions_left: usize,
    ) -> u32 {
        if let Some(t) = row.forced.pop_front() {
            return t;
        }
        if let Some(m) = &row.matcher {
            let room = req
                .max_new_tokens
                .saturating_sub(row.ids.len())
                .min(positions_left);
            if let Some(ids) = row.closer.due(m, room, false, &self.token_bytes) {
                row.forced = ids.into();
                // Empty: the answer is already whole, and ends here.
                return row
                    .forced
                    .pop_front()
                    .unwrap_or_else(|| self.stop_ids.first().copied().unwrap_or(0));
            }
        }
        let mut l: Vec<f32> = logits.to_vec();
        for (&t, &c) in &row.counts {
            if let Some(x) = l.get_mut(t as usize) {
                *x -= req.frequency_penalty * c as f32 + req.presence_penalty;
            }
        }
        let allowed = |t: u32| {
            row.matcher
                .as_ref()
                .is_none_or(|m| m.allows_token(t, &self.token_bytes, &self.stop_ids))
        };
        let cfg = SampleConfig {
            temperature: req.temperature.max(0.0),
            top_p: req.top_p,
            ..SampleConfig::default()
        };
        // Nothing the schema allows cannot happen for a satisfiable schema with a
        // byte-complete vocabulary; should it, the sequence ends.
        pick_allowed(&l, &cfg, &mut row.rng, allowed)
            .unwrap_or_else(|| self.stop_ids.first().copied().unwrap_or(0))
    }

    /// Appends a chosen token, streams the new text, and ends the row if due.
    /// Text ending in an incomplete UTF-8 character is held back until the
    /// character completes or the row ends.
    fn accept(&self, row: &mut Row, job: &Job, t: u32, context_full: bool) {
        let stopped = self.stop_ids.contains(&t);
        if !stopped {
            row.ids.push(t);
            *row.counts.entry(t).or_insert(0) += 1;
            if let (Some(m), Some(Some(b))) = (&mut row.matcher, self.token_bytes.get(t as usize)) {
                m.advance(b);
            }
        }
        let text = self.tok.decode(&row.ids, true).unwrap_or_default();
        let stop_at = job
            .req
            .stop
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()))
            .min();
        let finish =
            if stopped || stop_at.is_some() || row.matcher.as_ref().is_some_and(Matcher::is_done) {
                Some(Finish::Stop)
            } else if row.ids.len() >= job.req.max_new_tokens || context_full {
                Some(Finish::Length)
            } else {
                None
            };
        // A tail that may be the start of a stop string waits for the next token.
        let held = if finish.is_some() {
            0
        } else {
            job.req
                .stop
                .iter()
                .flat_map(|s| s.char_indices().skip(1).map(|(k, _)| &s[..k]))
                .filter(|p| text.ends_with(p))
                .map(str::len)
                .max()
                .unwrap_or(0)
        };
        let upto = stop_at.unwrap_or(text.len() - held);
        if upto > row.sent
            && (finish.is_some() || !text.ends_with('\u{FFFD}'))
            && let Some(delta) = text.get(row.sent..upto)
        {
            let _ = job.events.send(Event::Delta {
                choice: row.choice,
                text: delta.to_string(),
            });
            row.sent = upto;
        }
        if let Some(finish) = finish {
            row.finished = Some(finish);
            let _ = job.events.send(Event::Finished {
                choice: row.choice,
                finish,
                tokens: row.ids.len(),
            });
        }
    }
}
