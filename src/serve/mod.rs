//! `rmsweb serve`: an OpenAI-compatible HTTP server over a local checkpoint, so
//! Browser Use (its own `ChatOpenAI` client) or any OpenAI-style harness drives a
//! trained model.
//!
//! - `GET /v1/models` lists the one served model; `POST /v1/chat/completions`
//!   takes `messages`, `temperature`, `top_p`, `max_tokens` /
//!   `max_completion_tokens`, `stop`, `n`, `seed`, `frequency_penalty`,
//!   `presence_penalty`, `stream` (server-sent events, `stream_options.
//!   include_usage`) and `response_format` (`json_schema` — Browser Use sends its
//!   `AgentOutput` schema — and `json_object` are enforced while decoding, see
//!   [`crate::model::constrain`]). Bad requests get OpenAI-style error bodies naming the field
//!   ([`api`]); a prompt longer than the model's context is refused with
//!   `context_length_exceeded`, and `max_tokens` is capped by what the context has
//!   left (`finish_reason: "length"` when that ends the answer).
//! - Concurrent requests are decoded together, joining and leaving the running batch
//!   at every step ([`crate::model::engine`]).
//! - `--prompt-format browser-use` replaces the system message of every request by
//!   the one the model was trained with ([`crate::policy::browser_use`]), so a
//!   model trained on that format runs inside Browser Use unchanged (Browser Use's
//!   own system prompt is far longer than a small model's context).
//! - `--log-dataset DIR` appends every exchange to `DIR/serve/exchanges.jsonl`, and
//!   every Browser Use session that ends in `done` to the dataset as a trajectory
//!   ([`log`]): deployments become trajectories.

pub mod api;
pub mod error;
pub mod images;
pub mod limits;
pub mod log;
mod stream;

use crate::model::engine::{Engine, EngineOptions, Event, Finish, GenRequest};
use crate::model::vl::prompt::{Screenshot, expand_ids};
use crate::model::{ChatTemplate, LocalModelPolicy, Message};
use crate::policy::format::PromptFormat;
use anyhow::{Context, Result};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use error::ApiError;
use limits::Limits;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use stream::{now_s, usage};

/// Settings of `rmsweb serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// A model folder, a run checkpoint (`runs/ID/checkpoints/step-N`) or a run
    /// folder (its latest checkpoint).
    pub checkpoint: PathBuf,
    pub host: String,
    /// 0 = any free port (the bound address is printed).
    pub port: u16,
    pub device: String,
    /// The model id clients name (default: the checkpoint's folder name).
    pub model_name: Option<String>,
    /// Most sequences decoded together.
    pub max_batch: usize,
    /// Most prompt positions whose keys are kept for later prompts sharing a prefix.
    pub prefix_positions: usize,
    pub log_dataset: Option<PathBuf>,
    /// Replace each request's system message by this format's.
    pub prompt_format: Option<PromptFormat>,
    /// Sizes checked before any work on a request.
    pub limits: Limits,
}

/// What the handlers share.
/// How a Qwen3-VL checkpoint's requests show their image.
struct Vision {
    image: crate::model::vl::VlImageConfig,
    image_token: u32,
    device: candle_core::Device,
}

struct App {
    engine: Engine,
    /// A Qwen3-VL checkpoint: requests' images are shown to it.
    vision: Option<Vision>,
    model: String,
    template: ChatTemplate,
    tokenizer: tokenizers::Tokenizer,
    /// The system message of `--prompt-format`, built once, put in place of each
    /// request's own.
    system_prompt: Option<String>,
    log: Option<log::ExchangeLog>,
    requests: AtomicU64,
    created: u64,
    limits: Limits,
    /// Bytes of the vocabulary's longest token (for the prompt estimate).
    longest_token: usize,
    /// Requests being checked and tokenized at once, off the async workers.
    preparing: tokio::sync::Semaphore,
}

/// Requests checked and tokenized at once (each on a blocking thread).
const PREPARING_AT_ONCE: usize = 2;

/// The served model's id: `--model-name`, else the checkpoint folder's name.
fn served_name(cfg: &ServeConfig) -> String {
    cfg.model_name.clone().unwrap_or_else(|| {
        cfg.checkpoint
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "rmsweb".into())
    })
}

/// Loads the model and serves until Ctrl-C (or SIGTERM).
pub fn serve(cfg: ServeConfig) -> Result<()> {
    let dir = crate::train::run::resolve_checkpoint(&cfg.checkpoint)?;
    let device = crate::model::parse_device(&cfg.device)?;
    let model = LocalModelPolicy::from_checkpoint(&dir, &device)
        .with_context(|| format!("loading {}", dir.display()))?;
    let name = served_name(&cfg);
    let log = cfg
        .log_dataset
        .as_deref()
        .map(|d| log::ExchangeLog::open(d, &name))
        .transpose()?;
    let vision = model.vl.as_deref().map(|v| Vision {
        image: v.image.clone(),
        image_token: v.model.token_ids().image_token_id,
        device: device.clone(),
    });
    let (engine, tokenizer, template, _) = Engine::over(
        model,
        EngineOptions {
            max_batch: cfg.max_batch,
            prefix_positions: cfg.prefix_positions,
        },
    );
    let longest_token = crate::model::constrain::token_bytes(&tokenizer)
        .iter()
        .flatten()
        .map(Vec::len)
        .max()
        .unwrap_or(1);
    let app = Arc::new(App {
        engine,
        vision,
        model: name,
        template,
        tokenizer,
        system_prompt: cfg.prompt_format.map(crate::policy::render::system_prompt),
        log,
        requests: AtomicU64::new(0),
        created: now_s(),
        limits: cfg.limits,
        longest_token,
        preparing: tokio::sync::Semaphore::new(PREPARING_AT_ONCE),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((cfg.host.as_str(), cfg.port))
            .await
            .with_context(|| format!("binding {}:{}", cfg.host, cfg.port))?;
        let addr = listener.local_addr()?;
        println!(
            "serving {} on http://{addr}/v1 (device {}, batches of up to {} sequences{})",
            crate::util::sanitize::clean_line(&app.model),
            cfg.device,
            cfg.max_batch,
            match &cfg.log_dataset {
                Some(d) => format!(", exchanges logged to {}", d.display()),
                None => String::new(),
            }
        );
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let router = router(Arc::clone(&app));
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown_signal())
            .await?;
        if let Some(l) = &app.log {
            l.close()?;
        }
        anyhow::Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let term = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

fn router(app: Arc<App>) -> Router {
    let body_limit = app.limits.max_body_bytes;
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/health", get(|| async { "ok" }))
        .fallback(|| async {
            ApiError {
                status: StatusCode::NOT_FOUND,
                message: "no such endpoint (GET /v1/models, POST /v1/chat/completions)".into(),
                kind: "invalid_request_error",
                param: None,
                code: Some("unknown_url"),
            }
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(app)
}

async fn models(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({"object": "list", "data": [{
        "id": app.model,
        "object": "model",
        "created": app.created,
        "owned_by": "rmsweb",
        "max_model_len": app.engine.info.max_positions,
    }]}))
}

/// One finished choice.
struct Choice {
    text: String,
    finish: Finish,
    tokens: usize,
}

async fn chat(
    State(app): State<Arc<App>>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            // The unread rest of the body leaves the connection unusable: the client is
            // told so, and sends its next request on a new one.
            let mut r = body_refused(&app, &e).into_response();
            r.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
            return r;
        }
    };
    // Parsing, the schema, the image and the tokenizer run on a blocking thread, a
    // few requests at a time: the async workers stay free for every other client.
    let started = match app.preparing.acquire().await {
        Ok(_permit) => {
            let a = Arc::clone(&app);
            tokio::task::spawn_blocking(move || {
                let started = start(&a, &body);
                if started.is_err() && body.len() >= TRIM_AFTER_BYTES {
                    drop(body);
                    give_back_memory();
                }
                started
            })
            .await
            .unwrap_or_else(|e| Err(ApiError::server(format!("preparing the request: {e}"))))
        }
        Err(_) => Err(ApiError::server("the server is shutting down")),
    };
    match started {
        Ok((req, prompt_tokens, events)) => {
            if req.stream {
                let id = format!("chatcmpl-{}", app.requests.load(Ordering::Relaxed));
                let done = Arc::clone(&app);
                let messages = req.messages.clone();
                let on_done = move |texts: &[(String, &'static str)], took| {
                    if let Some(l) = &done.log {
                        l.record(&messages, texts, took);
                    }
                };
                let head = stream::Head {
                    id,
                    model: app.model.clone(),
                    n: req.n,
                    include_usage: req.include_usage,
                    prompt_tokens,
                };
                stream::stream(head, events, on_done).into_response()
            } else {
                complete(app, req, prompt_tokens, events)
                    .await
                    .map_or_else(IntoResponse::into_response, IntoResponse::into_response)
            }
        }
        Err(e) => e.into_response(),
    }
}

type Started = (
    api::Checked,
    usize,
    tokio::sync::mpsc::UnboundedReceiver<Event>,
);

/// A refused body (too large: 413) as an OpenAI-style error.
fn body_refused(app: &App, e: &axum::extract::rejection::BytesRejection) -> ApiError {
    let status = e.status();
    ApiError {
        status,
        message: if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!(
                "the request body is over the limit of {} bytes (--max-body-bytes)",
                app.limits.max_body_bytes
            )
        } else {
            format!("the request body could not be read: {e}")
        },
        kind: "invalid_request_error",
        param: Some("(body)".into()),
        code: None,
    }
}

/// Bodies at least this large give their memory back to the system when refused.
const TRIM_AFTER_BYTES: usize = 1 << 20;

/// Returns the allocator's free memory to the system (glibc keeps what a large
/// refused request freed otherwise).
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap memory; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Refuses a prompt whose bytes alone show it cannot fit the context, before it is
/// rendered and tokenized.
fn estimate_fits(app: &App, messages: &[Message]) -> Result<(), ApiError> {
    let bytes: usize = messages.iter().map(|m| m.content.len()).sum();
    let at_least = limits::min_prompt_tokens(messages.len(), bytes, app.longest_token);
    let max_pos = app.engine.info.max_positions;
    if at_least >= max_pos {
        return Err(ApiError {
            code: Some("context_length_exceeded"),
            ..ApiError::invalid(
                "messages",
                format!(
                    "the {} messages hold {bytes} bytes of text: at least {at_least} tokens; this model's context is {max_pos} tokens",
                    messages.len()
                ),
            )
        });
    }
    Ok(())
}

/// Checks the request, renders and encodes its prompt and queues it.
fn start(app: &App, body: &[u8]) -> Result<Started, ApiError> {
    let mut req = api::check(body, &app.model, app.vision.is_some(), &app.limits)?;
    if let Some(system) = &app.system_prompt {
        let system = system.clone();
        match req.messages.iter_mut().find(|m| m.role == "system") {
            Some(m) => m.content = system,
            None => req.messages.insert(0, Message::new("system", system)),
        }
    }
    estimate_fits(app, &req.messages)?;
    let mut prompt = app
        .template
        .encode_prompt(&app.tokenizer, &req.messages)
        .map_err(|e| ApiError::invalid("messages", format!("{e:#}")))?;
    let image = match (&req.image, &app.vision) {
        (Some(img), Some(v)) => {
            let shot = Screenshot::of_image(&img.image, &v.image, &v.device)
                .map_err(|e| ApiError::invalid(img.field.clone(), format!("{e:#}")))?;
            prompt = expand_ids(&prompt, v.image_token, &[shot.tokens])
                .map_err(|e| ApiError::invalid("messages", format!("{e:#}")))?;
            Some(Arc::new(shot))
        }
        _ => None,
    };
    let max_pos = app.engine.info.max_positions;
    if prompt.len() >= max_pos {
        return Err(ApiError {
            code: Some("context_length_exceeded"),
            ..ApiError::invalid(
                "messages",
                format!(
                    "the prompt is {} tokens; this model's context is {max_pos} tokens",
                    prompt.len()
                ),
            )
        });
    }
    let room = max_pos - prompt.len();
    let n = app.requests.fetch_add(1, Ordering::Relaxed);
    let job = GenRequest {
        n: req.n,
        temperature: req.temperature,
        top_p: req.top_p,
        max_new_tokens: req.max_tokens.unwrap_or(room).min(room),
        stop: req.stop.clone(),
        seed: req.seed.unwrap_or(0x5EED ^ n),
        frequency_penalty: req.frequency_penalty,
        presence_penalty: req.presence_penalty,
        schema: req.schema.clone(),
        quotes: None,
        prompt,
        image,
    };
    let prompt_tokens = job.prompt.len();
    Ok((req, prompt_tokens, app.engine.submit(job)))
}

async fn complete(
    app: Arc<App>,
    req: api::Checked,
    prompt_tokens: usize,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let mut texts = vec![String::new(); req.n];
    let mut done: Vec<Option<Choice>> = (0..req.n).map(|_| None).collect();
    while done.iter().any(Option::is_none) {
        match rx.recv().await {
            Some(Event::Delta { choice, text }) => texts[choice].push_str(&text),
            Some(Event::Finished {
                choice,
                finish,
                tokens,
            }) => {
                done[choice] = Some(Choice {
                    text: std::mem::take(&mut texts[choice]),
                    finish,
                    tokens,
                });
            }
            Some(Event::Failed(e)) => return Err(ApiError::server(e)),
            None => return Err(ApiError::server("the engine stopped")),
        }
    }
    let choices: Vec<Choice> = done.into_iter().flatten().collect();
    let completion: usize = choices.iter().map(|c| c.tokens).sum();
    let id = format!("chatcmpl-{}", app.requests.load(Ordering::Relaxed));
    if let Some(l) = &app.log {
        l.record(&req.messages, &choices_texts(&choices), started.elapsed());
    }
    Ok(Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": now_s(),
        "model": app.model,
        "choices": choices.iter().enumerate().map(|(i, c)| json!({
            "index": i,
            "message": {"role": "assistant", "content": c.text},
            "finish_reason": c.finish.reason(),
            "logprobs": null,
        })).collect::<Vec<_>>(),
        "usage": usage(prompt_tokens, completion),
    })))
}

fn choices_texts(choices: &[Choice]) -> Vec<(String, &'static str)> {
    choices
        .iter()
        .map(|c| (c.text.clone(), c.finish.reason()))
        .collect()
}
