//! Live environment tests: a real headless Chromium on MiniWoB++ pages served from
//! 127.0.0.1. They need `.ci/install-env.sh` to have run (Chromium and the MiniWoB
//! pages); without them they fail with a message saying so.

use rmsweb::action::Action;
use rmsweb::env::miniwob::resolve_dir;
use rmsweb::env::{ChromeOptions, MiniwobEnv};
use rmsweb::eval::{EpisodeOptions, EvalConfig, evaluate, run_episode};
use rmsweb::policy::scripted::{MistakeRates, ScriptedTeacher, TEACHER_NAME};
use rmsweb::trajectory::Dataset;
use serde_json::json;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

/// One browser shared by the tests that run at the same time; it is closed (and its
/// process killed) when the last of them lets go.
fn shared_env() -> Arc<Mutex<MiniwobEnv>> {
    static SHARED: OnceLock<Mutex<Weak<Mutex<MiniwobEnv>>>> = OnceLock::new();
    let slot = SHARED.get_or_init(|| Mutex::new(Weak::new()));
    let mut weak = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(env) = weak.upgrade() {
        return env;
    }
    let dir = resolve_dir(None);
    let env = MiniwobEnv::open(&dir, &ChromeOptions::default()).unwrap_or_else(|e| {
        panic!("live environment unavailable: {e:#}\n(run `.ci/install-env.sh` to install Chromium and MiniWoB++)")
    });
    let env = Arc::new(Mutex::new(env));
    *weak = Arc::downgrade(&env);
    env
}

fn lock(env: &Arc<Mutex<MiniwobEnv>>) -> MutexGuard<'_, MiniwobEnv> {
    env.lock().unwrap_or_else(|e| e.into_inner())
}

fn opts(id: &str) -> EpisodeOptions<'static> {
    EpisodeOptions {
        max_steps: 8,
        reflection: None,
        trajectory_id: id.to_string(),
        attempt: 1,
        screenshots: None,
    }
}

#[test]
fn scripted_teacher_solves_tasks_by_the_pages_own_reward() {
    let env = shared_env();
    let mut env = lock(&env);
    env.screenshots = false;
    let mut teacher = ScriptedTeacher::new(MistakeRates::default());
    for task in [
        "click-button",
        "enter-text",
        "click-checkboxes",
        "choose-list",
        "login-user",
        "click-tab",
        "click-collapsible",
        "click-dialog",
    ] {
        for seed in [1u64, 2] {
            let (t, traj, rec) =
                run_episode(&mut *env, &mut teacher, task, seed, &opts("t")).unwrap();
            assert!(
                rec.success && rec.reward > 0.0,
                "{task} seed {seed} ({}): {rec:?}\n{:#?}",
                t.instruction,
                traj.steps
                    .iter()
                    .map(|s| (&s.state.dom_text, &s.output.actions, &s.result))
                    .collect::<Vec<_>>()
            );
            assert_eq!(traj.teacher, TEACHER_NAME);
            assert_eq!(traj.source, "rmsweb-eval");
            assert_eq!(traj.outcome.score, Some(rec.reward));
            assert_eq!(t.source, format!("miniwob:{task}"));
        }
    }
}

#[test]
fn same_seed_gives_the_same_instruction() {
    let env = shared_env();
    let mut env = lock(&env);
    let a = env.start_episode("click-button", 11).unwrap();
    let b = env.start_episode("click-button", 12).unwrap();
    let c = env.start_episode("click-button", 11).unwrap();
    assert_eq!(a, c);
    assert!(a.starts_with("Click on the"), "{a}");
    // Different seeds generally differ; two fixed seeds are checked for it here.
    let d = env.start_episode("enter-text", 3).unwrap();
    let e = env.start_episode("enter-text", 4).unwrap();
    assert!(a != b || d != e);
}

#[test]
fn a_forced_wrong_click_fails_with_the_pages_reward() {
    let env = shared_env();
    let mut env = lock(&env);
    // Directly: click a button whose label is not the one asked for.
    let mut checked = 0;
    for seed in 0..10u64 {
        let instr = env.start_episode("click-button", seed).unwrap();
        let obs = env.observe().unwrap();
        let wanted = instr.split('"').nth(1).unwrap().to_string();
        let Some(wrong) = obs
            .elements
            .iter()
            .find(|e| e.tag == "button" && e.text != wanted)
        else {
            continue;
        };
        let r = env
            .execute(&Action::new("click", json!({"index": wrong.index})))
            .unwrap();
        assert!(r.error.is_none(), "{r:?}");
        let page = env.reward().unwrap();
        assert!(page.done, "the page must end the episode on a wrong click");
        assert_eq!(page.raw_reward, -1.0);
        checked += 1;
    }
    assert!(checked >= 3, "too few seeds with a distractor button");
    // Through the teacher with misclicks forced: the outcome is the page's failure
    // (-1 when the distractor was another button; 0 when it was an inert element and
    // the teacher then declared done without the page finishing).
    let mut teacher = ScriptedTeacher::new(MistakeRates {
        misclick: 1.0,
        ..Default::default()
    });
    let mut page_failures = 0;
    for seed in 0..8u64 {
        let (_, traj, rec) =
            run_episode(&mut *env, &mut teacher, "click-button", seed, &opts("m")).unwrap();
        assert!(rec.reason.contains("misclick"), "{rec:?}");
        assert!(!rec.success && !traj.outcome.success, "{rec:?}");
        assert!(rec.reward == -1.0 || rec.reward == 0.0, "{rec:?}");
        if rec.reward == -1.0 {
            assert!(rec.reason.starts_with("page reward -1.00"), "{rec:?}");
            page_failures += 1;
        }
    }
    assert!(
        page_failures >= 3,
        "only {page_failures} misclicks hit another button"
    );
}

#[test]
fn navigating_to_a_reported_url_reaches_the_served_page() {
    let env = shared_env();
    let mut env = lock(&env);
    env.start_episode("click-button", 1).unwrap();
    let url = "http://127.0.0.1/miniwob/enter-text.html";
    let r = env
        .execute(&Action::new("navigate", json!({ "url": url })))
        .unwrap();
    assert!(r.error.is_none(), "{r:?}");
    let obs = env.observe().unwrap();
    assert_eq!(obs.url, url);
    assert_eq!(obs.title, "Enter Text Task");
}

#[test]
fn invalid_index_and_foreign_urls_are_error_results_not_crashes() {
    let env = shared_env();
    let mut env = lock(&env);
    env.start_episode("enter-text", 5).unwrap();
    let obs = env.observe().unwrap();
    let n = obs.elements.len() as i64;
    for a in [
        Action::new("click", json!({"index": n + 50})),
        Action::new("click", json!({"index": 0})),
        Action::new("input", json!({"index": -3, "text": "x"})),
        Action::new("click", json!({})),
        Action::new("select_dropdown", json!({"index": 1, "text": "nope"})),
        Action::new("navigate", json!({"url": "https://example.com/"})),
        Action::new("upload_file", json!({"index": 1, "path": "/etc/passwd"})),
    ] {
        let r = env.execute(&a).unwrap();
        assert!(
            r.error.is_some(),
            "{} should be an error result: {r:?}",
            a.short()
        );
        assert!(!r.is_done);
    }
    assert!(
        !env.reward().unwrap().done,
        "errors must not end the episode"
    );
    // The episode is still playable afterwards.
    let mut teacher = ScriptedTeacher::new(MistakeRates::default());
    let (_, _, rec) = run_episode(&mut *env, &mut teacher, "enter-text", 5, &opts("e")).unwrap();
    assert!(rec.success);
}

#[test]
fn observations_list_visible_elements_in_browser_use_form() {
    let env = shared_env();
    let mut env = lock(&env);
    env.screenshots = true;
    let instr = env.start_episode("click-checkboxes", 3).unwrap();
    let obs = env.observe().unwrap();
    env.screenshots = false;
    assert!(instr.starts_with("Select"), "{instr}");
    // Reported under the stable origin, not the server's random port.
    assert_eq!(obs.url, "http://127.0.0.1/miniwob/click-checkboxes.html");
    assert_eq!(obs.title, "Click Checkboxes Task");
    let boxes: Vec<_> = obs
        .elements
        .iter()
        .filter(|e| e.role == "checkbox")
        .collect();
    assert!(boxes.len() >= 2);
    for b in &boxes {
        assert!(!b.text.is_empty(), "a checkbox carries its label text");
        assert_eq!(b.attrs.get("checked").map(String::as_str), Some("false"));
        assert!(b.bbox[2] > 0.0 && b.bbox[3] > 0.0);
    }
    // Indices are 1..n in page order, and dom_text has one line per element.
    for (i, e) in obs.elements.iter().enumerate() {
        assert_eq!(e.index as usize, i + 1);
    }
    assert_eq!(obs.dom_text.lines().count(), obs.elements.len());
    assert!(
        obs.dom_text.contains("<button id=subbtn />Submit"),
        "{}",
        obs.dom_text
    );
    assert!(
        !obs.dom_text.contains("START"),
        "harness elements are left out"
    );
    let png = obs.screenshot.expect("screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let img = image::load_from_memory(&png).unwrap();
    assert_eq!(
        (img.width(), img.height()),
        (160, 210),
        "the task area is captured"
    );
    // Clicking a checkbox is a real click: the next observation sees it checked.
    let first = boxes[0].index;
    env.execute(&Action::new("click", json!({"index": first})))
        .unwrap();
    let after = env.observe().unwrap();
    assert_eq!(
        after.elements[first as usize - 1]
            .attrs
            .get("checked")
            .map(String::as_str),
        Some("true")
    );
}

#[test]
fn evaluation_saves_trajectories_with_screenshots_into_a_dataset() {
    let env = shared_env();
    let mut env = lock(&env);
    let dir = tempfile::tempdir().unwrap();
    let mut ds = Dataset::create(dir.path(), "t", "").unwrap();
    let mut teacher = ScriptedTeacher::new(MistakeRates::default());
    let cfg = EvalConfig {
        tasks: vec!["miniwob:click-option".into(), "miniwob:focus-text".into()],
        episodes: 2,
        k: 2,
        seed: 100,
        max_steps: 6,
        reflection: None,
        judge: None,
    };
    let mut seen = 0;
    let report = evaluate(&mut *env, &mut teacher, &cfg, Some(&mut ds), &mut |_| {
        seen += 1
    })
    .unwrap();
    env.screenshots = false;
    // k = 2: two attempts at each of the 2 × 2 instances.
    assert_eq!(seen, 8);
    assert_eq!(report.episodes_total, 8);
    assert_eq!(report.pass_at_1, 1.0);
    assert_eq!(report.pass_at_k, Some(1.0));
    let attempts: Vec<(String, u64, u32)> = report
        .episodes
        .iter()
        .map(|e| (e.task.clone(), e.seed, e.attempt))
        .collect();
    assert_eq!(
        attempts[..4],
        [
            ("click-option".to_string(), 100, 1),
            ("click-option".to_string(), 100, 2),
            ("click-option".to_string(), 101, 1),
            ("click-option".to_string(), 101, 2),
        ]
    );
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!(ds.trajectory_count(), 8);
    assert_eq!(ds.task_count(), 4);
    let mut ids = std::collections::BTreeSet::new();
    for i in 0..8 {
        let t = ds.trajectory(i).unwrap();
        assert!(ids.insert(t.id.clone()), "trajectory id {} repeated", t.id);
        assert_eq!(t.attempt, report.episodes[i].attempt);
        assert!(t.outcome.success);
        assert_eq!(t.teacher, TEACHER_NAME);
        for s in &t.steps {
            let rel = s.state.screenshot.as_deref().expect("screenshot path");
            assert_eq!(rel, format!("screenshots/{}/{}.png", t.id, s.index));
            let bytes = std::fs::read(ds.resolve(rel).unwrap()).unwrap();
            assert_eq!(&bytes[..4], b"\x89PNG");
        }
    }
}

/// A stand-in chat model on 127.0.0.1: reads the rendered prompt, finds the button
/// whose label the task quotes, and answers in the Browser Use JSON contract.
async fn reading_model(
    axum::Json(body): axum::Json<serde_json::Value>,
) -> axum::Json<serde_json::Value> {
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let wanted = user.split('"').nth(1).unwrap_or("").to_string();
    let index = user
        .lines()
        .find(|l| l.contains("<button") && l.ends_with(&format!("/>{wanted}")))
        .and_then(|l| l.strip_prefix('[')?.split(']').next()?.parse::<u32>().ok());
    let answer = match index {
        Some(i) => {
            json!({"thinking": "found it", "memory": "", "next_goal": "click", "action": [{"click": {"index": i}}]})
        }
        None => {
            json!({"thinking": "not found", "action": [{"done": {"text": "no button", "success": false}}]})
        }
    };
    axum::Json(
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": answer.to_string()}}]}),
    )
}

#[test]
fn chat_policy_plays_live_episodes_through_the_rendered_prompt() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        let app =
            axum::Router::new().route("/v1/chat/completions", axum::routing::post(reading_model));
        let _ = axum::serve(listener, app).await;
    });
    let client = rmsweb::policy::chat::ChatClient::new(rmsweb::policy::chat::ChatConfig {
        base_url: format!("http://{addr}/v1"),
        model: "reading-model".into(),
        timeout: std::time::Duration::from_secs(10),
        ..Default::default()
    })
    .unwrap();
    let mut policy = rmsweb::policy::chat::ChatPolicy::new(client);
    let env = shared_env();
    let mut env = lock(&env);
    for seed in [1u64, 2, 3] {
        let (_, traj, rec) =
            run_episode(&mut *env, &mut policy, "click-button", seed, &opts("c")).unwrap();
        assert!(rec.success, "{rec:?}");
        assert_eq!(traj.teacher, "reading-model");
        assert_eq!(traj.steps.len(), 1);
    }
}

/// A model whose every answer is unparseable.
struct Garbled;

impl rmsweb::policy::Policy for Garbled {
    fn name(&self) -> String {
        "garbled".into()
    }
    fn act(
        &mut self,
        _: &rmsweb::policy::PolicyInput<'_>,
    ) -> anyhow::Result<rmsweb::policy::PolicyOutput> {
        Ok(rmsweb::policy::PolicyOutput {
            output: Default::default(),
            raw: "{\"action\": [{\"clik\": 3".into(),
            parse_error: Some("EOF while parsing".into()),
        })
    }
}

#[test]
fn an_unparseable_answer_is_kept_raw_in_its_step() {
    let env = shared_env();
    let mut env = lock(&env);
    let mut o = opts("g");
    o.max_steps = 1;
    let (_, traj, rec) = run_episode(&mut *env, &mut Garbled, "click-button", 1, &o).unwrap();
    assert!(!rec.success);
    let err = traj.steps[0].result[0].error.clone().unwrap();
    assert!(err.contains("EOF while parsing"), "{err}");
    assert!(
        err.contains("raw answer: {\"action\": [{\"clik\": 3"),
        "{err}"
    );
}

/// A model that leaves the task page: `go_back` on every step.
struct Leaver;

impl rmsweb::policy::Policy for Leaver {
    fn name(&self) -> String {
        "leaver".into()
    }
    fn act(
        &mut self,
        _: &rmsweb::policy::PolicyInput<'_>,
    ) -> anyhow::Result<rmsweb::policy::PolicyOutput> {
        Ok(rmsweb::policy::PolicyOutput {
            output: rmsweb::trajectory::ModelOutput {
                actions: vec![Action::new("go_back", json!({}))],
                ..Default::default()
            },
            raw: "{\"action\": [{\"go_back\": {}}]}".into(),
            parse_error: None,
        })
    }
}

/// An agent that navigates away from the task page fails its episode, even when it
/// goes back to a page an earlier episode solved; it does not abort the evaluation,
/// and the next episode plays on its own page.
#[test]
fn leaving_the_task_page_fails_the_episode_not_the_run() {
    let env = shared_env();
    let mut env = lock(&env);
    let mut teacher = ScriptedTeacher::new(MistakeRates::default());
    for seed in 0..3u64 {
        let (_, _, solved) =
            run_episode(&mut *env, &mut teacher, "click-button", seed, &opts("t")).unwrap();
        assert!(solved.success, "{solved:?}");
        let (_, traj, rec) = run_episode(
            &mut *env,
            &mut Leaver,
            "click-button",
            seed + 10,
            &opts("g"),
        )
        .unwrap();
        assert!(!rec.success && !traj.outcome.success, "{rec:?}");
        assert_eq!(rec.reward, 0.0, "{rec:?}");
    }
    let (_, _, rec) = run_episode(&mut *env, &mut teacher, "click-button", 4, &opts("t")).unwrap();
    assert!(rec.success, "{rec:?}");
}
