//! Streamed answers: server-sent events in OpenAI's chunk format. A role chunk per
//! choice, then each delta as the engine decodes it, each choice's finish, the usage
//! when asked for (`stream_options.include_usage`), and `[DONE]`.

use super::error::ApiError;
use crate::model::engine::Event;
use axum::response::sse::{Event as SseEvent, Sse};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What every chunk of one answer carries, and what its end needs.
pub(super) struct Head {
    /// The completion's id (`chatcmpl-…`).
    pub id: String,
    /// The served model's id.
    pub model: String,
    /// Choices asked for.
    pub n: usize,
    pub include_usage: bool,
    pub prompt_tokens: usize,
}

/// Called once every choice has finished, with each choice's text and finish reason
/// and the time the answer took (the exchange log).
type OnDone = Box<dyn FnOnce(&[(String, &'static str)], Duration) + Send>;

/// The engine's events for one request as an SSE stream.
pub(super) fn stream(
    head: Head,
    rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
    on_done: impl FnOnce(&[(String, &'static str)], Duration) + Send + 'static,
) -> Sse<impl futures_util::Stream<Item = Result<SseEvent, std::convert::Infallible>>> {
    let Head {
        id,
        model,
        n,
        include_usage,
        prompt_tokens,
    } = head;
    let chunks = Chunks {
        id,
        created: now_s(),
        model,
    };
    let mut pending = VecDeque::new();
    for i in 0..n {
        pending.push_back(chunks.event(
            json!([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
            None,
        ));
    }
    let st = StreamState {
        rx,
        include_usage,
        prompt_tokens,
        chunks,
        texts: vec![String::new(); n],
        finished: vec![None; n],
        tokens: 0,
        started: Instant::now(),
        pending,
        over: false,
        on_done: Some(Box::new(on_done)),
    };
    let stream = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(e) = st.pending.pop_front() {
                return Some((Ok(e), st));
            }
            if st.over {
                return None;
            }
            let event = st.rx.recv().await;
            st.on_event(event);
        }
    });
    Sse::new(stream)
}

/// Seconds since the Unix epoch.
pub(super) fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// OpenAI's `usage` object.
pub(super) fn usage(prompt: usize, completion: usize) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// Builds the stream's chunks: every one carries the completion's id, creation time
/// and model.
struct Chunks {
    id: String,
    created: u64,
    model: String,
}

impl Chunks {
    fn event(&self, choices: Value, usage: Option<Value>) -> SseEvent {
        let mut c = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "choices": choices,
        });
        if let Some(u) = usage {
            c["usage"] = u;
        }
        SseEvent::default().data(c.to_string())
    }
}

/// Where a streamed answer stands: each choice's text and finish, the tokens decoded,
/// and the events not yet sent.
struct StreamState {
    rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
    /// Whether the usage chunk is sent before `[DONE]`.
    include_usage: bool,
    prompt_tokens: usize,
    chunks: Chunks,
    texts: Vec<String>,
    finished: Vec<Option<&'static str>>,
    tokens: usize,
    started: Instant,
    pending: VecDeque<SseEvent>,
    over: bool,
    on_done: Option<OnDone>,
}

impl StreamState {
    /// Queues the chunks an engine event gives (`None`: the engine dropped the
    /// request). The last choice's finish also calls `on_done`.
    fn on_event(&mut self, event: Option<Event>) {
        match event {
            Some(Event::Delta { choice, text }) => {
                self.texts[choice].push_str(&text);
                self.pending.push_back(self.chunks.event(
                    json!([{"index": choice, "delta": {"content": text}, "finish_reason": null}]),
                    None,
                ));
            }
            Some(Event::Finished {
                choice,
                finish,
                tokens,
            }) => {
                self.finished[choice] = Some(finish.reason());
                self.tokens += tokens;
                self.pending.push_back(self.chunks.event(
                    json!([{"index": choice, "delta": {}, "finish_reason": finish.reason()}]),
                    None,
                ));
                if self.finished.iter().all(Option::is_some) {
                    if self.include_usage {
                        self.pending.push_back(
                            self.chunks
                                .event(json!([]), Some(usage(self.prompt_tokens, self.tokens))),
                        );
                    }
                    self.pending.push_back(SseEvent::default().data("[DONE]"));
                    self.over = true;
                    if let Some(done) = self.on_done.take() {
                        let texts: Vec<(String, &'static str)> = self
                            .texts
                            .iter()
                            .zip(&self.finished)
                            .map(|(t, f)| (t.clone(), f.unwrap_or("stop")))
                            .collect();
                        done(&texts, self.started.elapsed());
                    }
                }
            }
            Some(Event::Failed(e)) => {
                self.pending
                    .push_back(SseEvent::default().data(ApiError::server(e).body().to_string()));
                self.pending.push_back(SseEvent::default().data("[DONE]"));
                self.over = true;
            }
            None => {
                self.over = true;
            }
        }
    }
}
