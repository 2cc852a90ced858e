//! The one generation engine: a thread that owns a model and decodes every request
//! it is given with continuous batching. `serve`, the batched local policy of
//! `eval`/`collect` and anything else that decodes many independent prompts submit
//! to it.
//!
//! At every step the engine admits what has arrived (up to `max_batch` sequences,
//! `n` per request): each new prompt is encoded on its own, reusing the cached keys
//! of the longest prefix it shares with a recently encoded prompt (the system prompt
//! every step starts with, the page an episode's next step repeats), then joins the
//! running batch. Rows are aligned at their last position: rotary embeddings are
//! relative, so a joiner's keys are turned to the batch's next position (or the batch's
//! to the joiner's, when its prompt is longer) and the shorter rows are left-padded
//! and masked (`batch`). Then every row picks one token and the batch decodes one
//! position; a finished row, or one whose client went away, leaves at once, and
//! columns no remaining row reads are dropped. Nothing waits for a batch to finish.
//!
//! Each sequence samples from its own seeded generator, applies the OpenAI
//! frequency/presence penalties, and, under a JSON schema (and an optional quoted-span
//! rule), only picks tokens the rules allow (`row`). Text is streamed back as it is
//! decoded (never splitting a UTF-8 character); stop strings cut it where they begin.
//!
//! A Qwen3-VL checkpoint decodes requests without an image in the batch (its text
//! decoder); a request with an image runs on its own between two steps (`seeing`).

mod batch;
mod prefixes;
mod row;
mod seeing;

use crate::model::constrain::{QuoteGuard, Schema};
use crate::model::policy::VlSide;
use crate::model::sample::SampleConfig;
use crate::model::vl::prompt::Screenshot;
use crate::model::{ChatTemplate, Decoder, LocalModelPolicy};
use anyhow::Result;
use std::collections::VecDeque;
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
    /// Under a schema: quoted spans inside strings must be these values (where some
    /// token satisfies both rules).
    pub quotes: Option<QuoteGuard>,
    /// The image of a VL request; `prompt` holds its expanded placeholder run.
    pub image: Option<Arc<Screenshot>>,
}

impl GenRequest {
    /// One greedy sequence of at most `max_new_tokens` after `prompt`, no rules.
    pub fn greedy(prompt: Vec<u32>, max_new_tokens: usize) -> GenRequest {
        GenRequest {
            prompt,
            n: 1,
            temperature: 0.0,
            top_p: 1.0,
            max_new_tokens,
            stop: Vec::new(),
            seed: 0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            schema: None,
            quotes: None,
            image: None,
        }
    }
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
    /// The request failed (the model raised an error); nothing more follows.
    Failed(String),
}

/// One finished sequence of [`Engine::generate`].
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub finish: Finish,
    pub tokens: usize,
}

/// A submitted request and where its events go.
pub(crate) struct Job {
    req: GenRequest,
    events: UnboundedSender<Event>,
}

impl Job {
    /// Whether the client went away (its events are no longer read): its rows stop
    /// at the next step.
    fn gone(&self) -> bool {
        self.events.is_closed()
    }

    fn send(&self, e: Event) {
        let _ = self.events.send(e);
    }

    fn fail(&self, e: &anyhow::Error) {
        self.send(Event::Failed(format!("{e:#}")));
    }
}

/// Facts about the served model callers check requests against.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub max_positions: usize,
}

/// How the engine batches.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Most sequences decoded together.
    pub max_batch: usize,
    /// Most prompt positions whose keys are kept for later prompts to reuse (least
    /// recently used first out); 0 turns reuse off.
    pub prefix_positions: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_batch: 16,
            prefix_positions: 8192,
        }
    }
}

/// A handle on the engine thread; cloning it shares the engine.
#[derive(Clone)]
pub struct Engine {
    tx: mpsc::Sender<Job>,
    pub info: ModelInfo,
}

impl Engine {
    /// Starts the engine thread over a loaded model (with its whole Qwen3-VL model
    /// when `vl`), its tokenizer and the token ids that end a sequence.
    pub fn start(
        model: Decoder,
        vl: Option<Box<VlSide>>,
        tok: tokenizers::Tokenizer,
        stop_ids: Vec<u32>,
        opts: EngineOptions,
    ) -> Engine {
        let info = ModelInfo {
            max_positions: model.config.max_position_embeddings,
        };
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("rmsweb-engine".into())
            .spawn(move || {
                let core = Core::new(model, vl, tok, stop_ids, opts.prefix_positions);
                run(core, &rx, opts.max_batch.max(1));
            })
            .expect("spawning the engine thread");
        Engine { tx, info }
    }

    /// Starts an engine over a loaded model's weights (and, for a Qwen3-VL checkpoint,
    /// its whole VL model) and stop tokens; returns it with what the caller still
    /// needs to build prompts: the tokenizer, chat template and sampling settings.
    pub fn over(
        policy: LocalModelPolicy,
        opts: EngineOptions,
    ) -> (Engine, tokenizers::Tokenizer, ChatTemplate, SampleConfig) {
        let stop = policy.stop_ids().to_vec();
        let LocalModelPolicy {
            model,
            vl,
            tokenizer,
            template,
            sampling,
            ..
        } = policy;
        let engine = Engine::start(model, vl, tokenizer.clone(), stop, opts);
        (engine, tokenizer, template, sampling)
    }

    /// Queues a request; its events arrive on the returned receiver. Dropping the
    /// receiver cancels the request at the engine's next step.
    pub fn submit(&self, req: GenRequest) -> UnboundedReceiver<Event> {
        let (events, rx) = unbounded_channel();
        if let Err(mpsc::SendError(job)) = self.tx.send(Job { req, events }) {
            job.send(Event::Failed("the engine has stopped".into()));
        }
        rx
    }

    /// Submits a request and waits for all its sequences (from a thread that is not
    /// an async worker).
    pub fn generate(&self, req: GenRequest) -> Result<Vec<Completion>> {
        let n = req.n;
        let mut rx = self.submit(req);
        let mut texts = vec![String::new(); n];
        let mut done: Vec<Option<Completion>> = vec![None; n];
        while done.iter().any(Option::is_none) {
            match rx.blocking_recv() {
                Some(Event::Delta { choice, text }) => {
                    if let Some(t) = texts.get_mut(choice) {
                        t.push_str(&text);
                    }
                }
                Some(Event::Finished {
                    choice,
                    finish,
                    tokens,
                }) => {
                    if let Some(d) = done.get_mut(choice) {
                        *d = Some(Completion {
                            text: std::mem::take(&mut texts[choice]),
                            finish,
                            tokens,
                        });
                    }
                }
                Some(Event::Failed(e)) => anyhow::bail!("generation failed: {e}"),
                None => anyhow::bail!("the engine stopped before the request finished"),
            }
        }
        Ok(done.into_iter().flatten().collect())
    }
}

/// The model and what decoding needs of its tokenizer, owned by the engine thread.
pub(crate) struct Core {
    model: Decoder,
    vl: Option<Box<VlSide>>,
    vocab: row::Vocab,
    prompts: prefixes::PromptStore,
}

impl Core {
    fn new(
        model: Decoder,
        vl: Option<Box<VlSide>>,
        tok: tokenizers::Tokenizer,
        stop_ids: Vec<u32>,
        prefix_positions: usize,
    ) -> Core {
        let token_bytes = crate::model::constrain::token_bytes(&tok);
        Core {
            model,
            vl,
            vocab: row::Vocab {
                tok,
                stop_ids,
                token_bytes,
            },
            prompts: prefixes::PromptStore::new(prefix_positions),
        }
    }
}

/// The engine thread: admit, step, repeat; block only when there is nothing to do.
fn run(mut core: Core, rx: &mpsc::Receiver<Job>, max_batch: usize) {
    let mut waiting: VecDeque<Arc<Job>> = VecDeque::new();
    let mut running = batch::Running::default();
    loop {
        if running.is_empty() && waiting.is_empty() {
            match rx.recv() {
                Ok(j) => waiting.push_back(Arc::new(j)),
                Err(_) => return,
            }
        }
        while let Ok(j) = rx.try_recv() {
            waiting.push_back(Arc::new(j));
        }
        // A client that went away while its request waited is not decoded.
        waiting.retain(|j| !j.gone());
        // Requests with an image run alone, between two steps.
        let (seeing, text): (VecDeque<_>, VecDeque<_>) =
            waiting.drain(..).partition(|j| j.req.image.is_some());
        waiting = text;
        for j in seeing {
            if let Err(e) = seeing::run(&core, &j) {
                j.fail(&e);
            }
        }
        let mut joiners = Vec::new();
        let mut rows = running.len();
        while let Some(j) = waiting.front() {
            // A request wider than the whole batch runs once the batch is empty.
            if rows > 0 && rows + j.req.n > max_batch {
                break;
            }
            rows += j.req.n;
            joiners.extend(waiting.pop_front());
        }
        if !joiners.is_empty() {
            running.join(&mut core, joiners);
        }
        if !running.is_empty()
            && let Err(e) = running.step(&core)
        {
            running.fail_all(&e);
        }
    }
}
