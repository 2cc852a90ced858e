//! `rmsweb serve` on a Qwen3-VL checkpoint: a request's image (a base64 `data:` URL)
//! reaches the model where the request put it.

use crate::serve::{post, start};
use base64::Engine as _;
use rmsweb::model::LocalModelPolicy;
use rmsweb::model::chat_template::Message;
use rmsweb::model::vl::prompt::{Screenshot, expand_ids, with_screenshot};
use serde_json::{Value, json};
use std::path::Path;

fn data_url(path: &Path) -> String {
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap())
    )
}

/// A greedy request showing `shot` after the user's text.
fn request(shot: Option<&Path>) -> Value {
    let mut user = vec![json!({"type": "text", "text": "Click the button of the screen's colour"})];
    if let Some(p) = shot {
        user.push(json!({"type": "image_url", "image_url": {"url": data_url(p)}}));
    }
    json!({
        "model": "tiny",
        "messages": [
            {"role": "system", "content": "You click buttons."},
            {"role": "user", "content": user},
        ],
        "temperature": 0,
        "max_tokens": 12,
    })
}

/// Served greedy answers equal the local policy's with the same screenshot (the
/// image in the same place, the same decoding); a request without an image decodes
/// as text; a bad image is a 400 naming its field.
#[test]
fn serve_shows_a_vl_checkpoint_the_request_image() {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    super::sft::coloured_dataset(&ds, 8);
    let run = d.path().join("vl");
    super::sft::train("tiny-vl", &ds, &run, 40);
    let ckpt = run.join("checkpoints/step-40");
    let mut policy = LocalModelPolicy::from_checkpoint(&ckpt, &candle_core::Device::Cpu).unwrap();
    policy.sampling.max_new_tokens = 12;
    let msgs = [
        Message::new("system", "You click buttons."),
        Message::new("user", "Click the button of the screen's colour"),
    ];
    let server = start(&ckpt, &d.path().join("log"));
    let client = reqwest::blocking::Client::new();
    let answer = |body: &Value| -> (String, u64) {
        let (status, v) = post(&client, &server.base, body);
        assert_eq!(status, 200, "{v}");
        let text = v["choices"][0]["message"]["content"].as_str().unwrap();
        (
            text.to_string(),
            v["usage"]["prompt_tokens"].as_u64().unwrap(),
        )
    };
    // The prompt the local policy decodes from: the image's placeholder run after
    // the user's text.
    let vl = policy.vl.as_deref().unwrap();
    let shown = policy
        .template
        .encode_prompt(&policy.tokenizer, &with_screenshot(&msgs))
        .unwrap();
    for k in 0..4 {
        let shot = ds.join(format!("screenshots/traj{k}/0.png"));
        let (served, prompt_tokens) = answer(&request(Some(&shot)));
        let local = policy.generate_seeing(&msgs, Some(&shot), None).unwrap();
        assert_eq!(served, local, "screenshot {k}");
        let tokens = Screenshot::load(&shot, &vl.image, &candle_core::Device::Cpu)
            .unwrap()
            .tokens;
        let expanded = expand_ids(&shown, vl.model.token_ids().image_token_id, &[tokens]).unwrap();
        assert_eq!(prompt_tokens as usize, expanded.len(), "screenshot {k}");
    }
    let (text, _) = answer(&request(None));
    assert_eq!(text, policy.generate(&msgs).unwrap(), "without an image");

    let mut bad = request(None);
    bad["messages"][1]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}));
    let (status, v) = post(&client, &server.base, &bad);
    assert_eq!(status, 400);
    assert_eq!(v["error"]["param"], "messages[1].content[1].image_url.url");
}
