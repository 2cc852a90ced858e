use super::*;
use serde_json::json;

fn spec(v: Value) -> Result<RopeSpec> {
    RopeSpec::from_hf(v.as_object().unwrap(), 4096)
}

fn err(v: Value) -> String {
    format!("{:#}", spec(v).unwrap_err())
}

#[test]
fn every_place_transformers_puts_the_base_is_read() {
    assert_eq!(spec(json!({})).unwrap(), RopeSpec::plain(DEFAULT_THETA));
    assert_eq!(spec(json!({"rope_theta": 5e5})).unwrap().theta, 5e5);
    let v5 = json!({"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}});
    assert_eq!(spec(v5).unwrap(), RopeSpec::plain(1e6));
    let both = json!({"rope_theta": 1e6, "rope_parameters": {"rope_theta": 1e6}});
    assert_eq!(spec(both).unwrap().theta, 1e6);
    let e = err(json!({"rope_theta": 1e4, "rope_parameters": {"rope_theta": 1e6}}));
    assert!(
        e.contains("rope_parameters.rope_theta") && e.contains("disagree"),
        "{e}"
    );
}

#[test]
fn scaling_forms_parse_in_old_and_new_spelling() {
    let old = spec(json!({"rope_theta": 1e4, "rope_scaling": {"type": "linear", "factor": 4.0}}));
    let new =
        spec(json!({"rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e4}}));
    assert_eq!(old.unwrap(), new.unwrap());
    let y = spec(json!({"rope_parameters": {"rope_type": "yarn", "factor": 2.0}})).unwrap();
    let Some(RopeScaling::Yarn(y)) = y.scaling else {
        panic!("not yarn")
    };
    assert_eq!(y.original_max_position_embeddings, 4096);
    let l = spec(
        json!({"original_max_position_embeddings": 64, "rope_scaling": {
        "rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
        "original_max_position_embeddings": 8192}}),
    )
    .unwrap();
    let Some(RopeScaling::Llama3(l)) = l.scaling else {
        panic!("not llama3")
    };
    assert_eq!(l.original_max_position_embeddings, 64);
    let nested = spec(
        json!({"rope_parameters": {"full_attention": {"rope_type": "dynamic", "factor": 2.0}}}),
    );
    assert_eq!(
        nested.unwrap().scaling,
        Some(RopeScaling::Dynamic { factor: 2.0 })
    );
}

#[test]
fn what_cannot_be_computed_exactly_is_refused_by_name() {
    for (v, needle) in [
        (
            json!({"rope_scaling": {"type": "longrope", "short_factor": [1], "long_factor": [1]}}),
            "rope_scaling.rope_type",
        ),
        (
            json!({"rope_parameters": {"rope_type": "linear"}}),
            "rope_parameters.factor` missing",
        ),
        (
            json!({"rope_parameters": {"rope_type": "linear", "factor": 2, "beta_fast": 4}}),
            "rope_parameters.beta_fast",
        ),
        (
            json!({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}),
            "partial_rotary_factor",
        ),
        (
            json!({"partial_rotary_factor": 0.25}),
            "partial_rotary_factor",
        ),
        (
            json!({"rope_parameters": {"rope_type": "linear", "type": "yarn", "factor": 2}}),
            "disagree",
        ),
        (
            json!({"rope_scaling": {"type": "linear", "factor": 2}, "rope_parameters": {"rope_type": "linear", "factor": 4}}),
            "different rotary",
        ),
        (
            json!({"rope_parameters": {"sliding_attention": {"rope_type": "default"}}}),
            "sliding_attention",
        ),
        (
            json!({"rope_parameters": {"rope_type": "linear", "factor": -1}}),
            "must be positive",
        ),
        (
            json!({"rope_parameters": {"rope_type": "linear", "factor": "x"}}),
            "rope_parameters.factor",
        ),
    ] {
        let e = err(v);
        assert!(e.contains(needle), "{needle}: {e}");
    }
}

#[test]
fn serialized_forms_read_back_identically() {
    for s in [
        RopeSpec::plain(1e6),
        RopeSpec {
            theta: 1e4,
            scaling: Some(RopeScaling::Linear { factor: 4.0 }),
        },
        RopeSpec {
            theta: 1e4,
            scaling: Some(RopeScaling::Yarn(Yarn {
                factor: 4.0,
                original_max_position_embeddings: 32,
                attention_factor: None,
                beta_fast: Some(16.0),
                beta_slow: None,
                mscale: None,
                mscale_all_dim: None,
                truncate: Some(false),
            })),
        },
    ] {
        let v5 = json!({"rope_parameters": s.to_rope_parameters()});
        assert_eq!(spec(v5).unwrap(), s);
        let legacy = json!({"rope_theta": s.theta, "rope_scaling": s.to_rope_scaling()});
        assert_eq!(spec(legacy).unwrap(), s);
    }
}

#[test]
fn scaled_frequencies_follow_the_formulas() {
    let plain = RopeSpec::plain(1e4).inv_freq(8).0;
    assert_eq!(plain.len(), 4);
    assert!((plain[1] - 1e4f64.powf(-0.25)).abs() < 1e-15);
    let lin = RopeSpec {
        theta: 1e4,
        scaling: Some(RopeScaling::Linear { factor: 4.0 }),
    };
    assert!((lin.inv_freq(8).0[1] * 4.0 - plain[1]).abs() < 1e-15);
    let dynamic = RopeSpec {
        theta: 1e4,
        scaling: Some(RopeScaling::Dynamic { factor: 4.0 }),
    };
    assert_eq!(dynamic.inv_freq(8).0, plain);
    // Llama 3: the highest frequency is kept, the lowest divided by the factor.
    let l = RopeSpec {
        theta: 1e4,
        scaling: Some(RopeScaling::Llama3(Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 64,
        })),
    };
    let f = l.inv_freq(8).0;
    assert_eq!(f[0], plain[0]);
    assert!((f[3] * 8.0 - plain[3]).abs() < 1e-15);
    // YaRN: attention factor 0.1·ln(s) + 1, frequencies between both bounds.
    let y = RopeSpec {
        theta: 1e4,
        scaling: Some(RopeScaling::Yarn(Yarn {
            factor: 4.0,
            original_max_position_embeddings: 32,
            attention_factor: None,
            beta_fast: None,
            beta_slow: None,
            mscale: None,
            mscale_all_dim: None,
            truncate: None,
        })),
    };
    let (f, a) = y.inv_freq(8);
    assert!((a - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-15);
    for (s, p) in f.iter().zip(&plain) {
        assert!(*s <= *p && *s >= p / 4.0 - 1e-18);
    }
}
