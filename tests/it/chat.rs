//! The chat client against a chat-completions server started on 127.0.0.1 by the test.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rmsweb::policy::chat::{ChatClient, ChatConfig, ChatPolicy};
use rmsweb::policy::prompt::ChatMessage;
use rmsweb::policy::{Policy, PolicyInput};
use rmsweb::trajectory::{Element, State as PageState, Task};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the fake endpoint does for one request.
#[derive(Clone)]
enum Reply {
    Content(String),
    Status(u16),
    Slow(Duration, String),
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<(Value, Option<String>)>>,
}

/// A chat-completions server on its own runtime and thread.
struct FakeEndpoint {
    shared: Arc<Shared>,
    base_url: String,
    _rt: tokio::runtime::Runtime,
}

async fn completions(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    s.requests.lock().unwrap().push((body, auth));
    let reply = s
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Reply::Status(418));
    let ok = |c: String| {
        Json(json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": c}, "finish_reason": "stop"}]}))
            .into_response()
    };
    match reply {
        Reply::Content(c) => ok(c),
        Reply::Status(code) => {
            (StatusCode::from_u16(code).unwrap(), "upstream trouble").into_response()
        }
        Reply::Slow(d, c) => {
            tokio::time::sleep(d).await;
            ok(c)
        }
    }
}

impl FakeEndpoint {
    fn start(replies: Vec<Reply>) -> FakeEndpoint {
        let shared = Arc::new(Shared::default());
        shared.replies.lock().unwrap().extend(replies);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(completions))
            .with_state(shared.clone());
        rt.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeEndpoint {
            shared,
            base_url: format!("http://{addr}/v1"),
            _rt: rt,
        }
    }

    fn requests(&self) -> Vec<(Value, Option<String>)> {
        self.shared.requests.lock().unwrap().clone()
    }

    fn config(&self) -> ChatConfig {
        ChatConfig {
            base_url: self.base_url.clone(),
            model: "test-model".into(),
            timeout: Duration::from_secs(5),
            max_retries: 2,
            backoff: Duration::from_millis(20),
            ..Default::default()
        }
    }
}

const GOOD: &str = r#"{"thinking": "t", "evaluation_previous_goal": "", "memory": "m", "next_goal": "press it", "action": [{"click": {"index": 2}}]}"#;

fn task() -> Task {
    Task {
        task_id: "t1".into(),
        website: "miniwob".into(),
        domain: "miniwob".into(),
        category: "click-button".into(),
        instruction: "Click on the \"ok\" button.".into(),
        source: "miniwob:click-button".into(),
    }
}

fn page() -> PageState {
    PageState {
        url: "http://127.0.0.1/x".into(),
        elements: vec![
            Element {
                index: 1,
                tag: "button".into(),
                role: "button".into(),
                text: "no".into(),
                ..Default::default()
            },
            Element {
                index: 2,
                tag: "button".into(),
                role: "button".into(),
                text: "ok".into(),
                ..Default::default()
            },
        ],
        dom_text: String::new(),
        ..Default::default()
    }
}

fn act(policy: &mut ChatPolicy) -> rmsweb::policy::PolicyOutput {
    let (t, s) = (task(), page());
    policy
        .act(&PolicyInput {
            task: &t,
            state: &s,
            history: &[],
            reflection: None,
            max_steps: 5,
            screenshot: None,
        })
        .unwrap()
}

#[test]
fn normal_answer_is_parsed_into_actions() {
    let srv = FakeEndpoint::start(vec![Reply::Content(GOOD.into())]);
    // The key comes from the variable the user names; PATH is always set, so it
    // stands in for a key variable here without touching the environment.
    let cfg = ChatConfig {
        api_key_env: Some("PATH".into()),
        ..srv.config()
    };
    let mut policy = ChatPolicy::new(ChatClient::new(cfg).unwrap());
    let out = act(&mut policy);
    assert!(out.parse_error.is_none());
    assert_eq!(out.output.actions[0].short(), "click(2)");
    assert_eq!(out.output.memory, "m");
    assert_eq!(out.raw, GOOD);
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    let (body, auth) = &reqs[0];
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["role"], "system");
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("[2]<button />ok"), "{user}");
    assert_eq!(
        auth.as_deref(),
        Some(format!("Bearer {}", std::env::var("PATH").unwrap()).as_str())
    );
}

#[test]
fn malformed_json_is_fed_back_once_then_accepted() {
    let srv = FakeEndpoint::start(vec![
        Reply::Content("I will click ok!".into()),
        Reply::Content(GOOD.into()),
    ]);
    let mut policy = ChatPolicy::new(ChatClient::new(srv.config()).unwrap());
    let out = act(&mut policy);
    assert!(out.parse_error.is_none());
    assert_eq!(out.output.actions[0].target_index(), Some(2));
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].0["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["content"], "I will click ok!");
    assert_eq!(msgs[3]["role"], "user");
    assert!(
        msgs[3]["content"]
            .as_str()
            .unwrap()
            .contains("could not be parsed")
    );
}

#[test]
fn malformed_twice_gives_a_step_error_without_more_requests() {
    let srv = FakeEndpoint::start(vec![
        Reply::Content("nope".into()),
        Reply::Content("still nope".into()),
        Reply::Content(GOOD.into()),
    ]);
    let mut policy = ChatPolicy::new(ChatClient::new(srv.config()).unwrap());
    let out = act(&mut policy);
    assert!(out.output.actions.is_empty());
    assert!(out.parse_error.unwrap().contains("twice"));
    assert_eq!(out.raw, "still nope");
    assert_eq!(srv.requests().len(), 2);
}

#[test]
fn http_500_is_retried_then_succeeds() {
    let srv = FakeEndpoint::start(vec![
        Reply::Status(500),
        Reply::Status(503),
        Reply::Content("hello".into()),
    ]);
    let client = ChatClient::new(srv.config()).unwrap();
    let text = client.complete(&[ChatMessage::new("user", "hi")]).unwrap();
    assert_eq!(text, "hello");
    assert_eq!(srv.requests().len(), 3);
}

#[test]
fn client_errors_are_not_retried() {
    let srv = FakeEndpoint::start(vec![Reply::Status(400), Reply::Content("late".into())]);
    let client = ChatClient::new(srv.config()).unwrap();
    let err = client
        .complete(&[ChatMessage::new("user", "hi")])
        .unwrap_err();
    assert!(format!("{err:#}").contains("400"), "{err:#}");
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn timeouts_are_retried_and_then_reported() {
    let slow = Reply::Slow(Duration::from_secs(3), "too late".into());
    let srv = FakeEndpoint::start(vec![slow.clone(), slow]);
    let cfg = ChatConfig {
        timeout: Duration::from_millis(300),
        max_retries: 1,
        ..srv.config()
    };
    let client = ChatClient::new(cfg).unwrap();
    let t0 = Instant::now();
    let err = client
        .complete(&[ChatMessage::new("user", "hi")])
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("timed out") && msg.contains("2 attempts"),
        "{msg}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "the timeout must cut the wait"
    );
    assert_eq!(srv.requests().len(), 2);
}

#[test]
fn timeout_then_success_recovers() {
    let srv = FakeEndpoint::start(vec![
        Reply::Slow(Duration::from_secs(3), "late".into()),
        Reply::Content("fast".into()),
    ]);
    let cfg = ChatConfig {
        timeout: Duration::from_millis(300),
        ..srv.config()
    };
    let text = ChatClient::new(cfg)
        .unwrap()
        .complete(&[ChatMessage::new("user", "hi")])
        .unwrap();
    assert_eq!(text, "fast");
}

#[test]
fn vision_sends_the_screenshot_as_a_base64_image_part() {
    let srv = FakeEndpoint::start(vec![Reply::Content("ok".into())]);
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("s.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\nfake").unwrap();
    let client = ChatClient::new(ChatConfig {
        vision: true,
        ..srv.config()
    })
    .unwrap();
    let msg = ChatMessage {
        role: "user".into(),
        content: "look".into(),
        image: Some(png),
    };
    client.complete(&[msg]).unwrap();
    let body = &srv.requests()[0].0;
    let parts = body["messages"][0]["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "text");
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    let b64 = url
        .strip_prefix("data:image/png;base64,")
        .expect("a PNG data URL");
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    assert_eq!(bytes, b"\x89PNG\r\n\x1a\nfake");
}

#[test]
fn a_missing_key_variable_is_named_in_the_error() {
    let err = ChatClient::new(ChatConfig {
        api_key_env: Some("RMSWEB_SURELY_UNSET_KEY_VAR".into()),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("RMSWEB_SURELY_UNSET_KEY_VAR"));
}

#[test]
fn unusable_endpoint_urls_are_refused_up_front() {
    for url in [
        "https://api.example.com/v1",
        "not a url",
        "ftp://127.0.0.1/v1",
    ] {
        let err = ChatClient::new(ChatConfig {
            base_url: url.into(),
            ..Default::default()
        })
        .err()
        .unwrap_or_else(|| panic!("{url} must be refused"));
        assert!(err.to_string().contains(url), "{err}");
    }
}
