use super::*;

fn group(step: u64, id: &str, gate: &str, routed: &str, rewards: &[f64]) -> String {
    let samples: Vec<serde_json::Value> = rewards
        .iter()
        .map(|r| serde_json::json!({"text": "t", "reward": r, "rule": "x"}))
        .collect();
    serde_json::json!({"step": step, "prompt_id": id, "gate": gate, "routed": routed,
        "samples": samples})
    .to_string()
}

#[test]
fn a_state_moves_from_hard_to_accepted_to_mastered() {
    let d = tempfile::tempdir().unwrap();
    let lines = [
        group(1, "p", "competence_gate", "salvage", &[0.0, 0.3, 0.2, 0.0]),
        group(1, "q", "std_gate", "discarded", &[0.0, 0.0, 0.0, 0.0]),
        group(2, "p", "accepted", "rl", &[1.0, 0.3, 0.0, 0.3]),
        group(2, "p", "std_gate", "salvage", &[0.0, 0.0, 0.0, 0.0]),
        "{\"step\": 2, \"prompt_id\": \"q\", \"samples\": [{\"reward\": \"high\"}]}".into(),
        group(3, "p", "std_gate", "discarded", &[1.0, 1.0, 1.0, 1.0]),
        // no gate (another trainer): gated here with the defaults
        group(3, "q", "", "", &[1.0, 0.0, 1.0, 0.0]),
    ];
    std::fs::write(d.path().join("rollouts.jsonl"), lines.join("\n") + "\n").unwrap();
    let c = curriculum(d.path()).unwrap();
    assert_eq!(c.steps, vec![1, 2, 3]);
    assert_eq!(c.bad_lines, 1);
    assert!(
        c.errors[0].contains(":5") && c.errors[0].contains("reward"),
        "{:?}",
        c.errors
    );
    let p = &c.states[0];
    assert_eq!(p.prompt_id, "p");
    assert_eq!(p.route_text(), "competence_rejected → accepted → mastered");
    // step 2 had an accepted and a std-rejected group: accepted wins, salvaged too
    assert_eq!(p.points[1].phase, Phase::Accepted);
    assert!(p.points[1].salvaged);
    assert_eq!(p.points[1].groups, 2);
    assert_eq!(p.points[1].best, 1.0);
    assert!((p.points[1].mean - 1.6 / 8.0).abs() < 1e-12);
    assert_eq!(c.strip(p), "caM");
    let q = &c.states[1];
    assert_eq!(c.strip(q), "S·A");
    assert_eq!(c.summary.hard_then_accepted, 1);
    assert_eq!(c.summary.accepted_then_mastered, 1);
    assert_eq!(c.shares[0].counts[&Phase::CompetenceRejected], 1);
    assert_eq!(c.shares[0].shares[&Phase::StdRejected], 0.5);
    assert_eq!(c.shares[1].states, 1);
    assert_eq!(c.summary.transitions["std_rejected → accepted"], 1);
}

#[test]
fn a_runs_mode_is_read_by_name_and_an_unknown_one_said() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("run.toml"), "mode = \"dapo\"\nr_comp = 0.4\n").unwrap();
    let (cfg, shown) = run_gates(d.path());
    assert_eq!(
        (cfg.mode, shown.as_str(), cfg.r_comp),
        (Mode::Dapo, "dapo", 0.4)
    );
    std::fs::write(d.path().join("run.toml"), "mode = \"salvage\"\n").unwrap();
    let (cfg, shown) = run_gates(d.path());
    assert_eq!(cfg.mode, Mode::SalvageDs);
    assert_eq!(
        shown,
        "salvage (unknown to this rmsweb: gated as salvage-ds)"
    );
}
