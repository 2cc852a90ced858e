use super::*;
use serde_json::json;

fn minimal() -> serde_json::Value {
    json!({"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
           "num_hidden_layers": 1, "num_attention_heads": 2})
}

fn with(extra: serde_json::Value) -> serde_json::Value {
    let mut v = minimal();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn reads_minimal_config_with_transformers_defaults_and_names_bad_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("config.json");
    std::fs::write(&p, minimal().to_string()).unwrap();
    let c = DecoderConfig::from_file(&p).unwrap_err();
    // transformers' Qwen3 defaults: 32 kv heads, head_dim 128; 2 heads cannot share 32.
    assert!(
        format!("{c:#}").contains("num_key_value_heads (32)"),
        "{c:#}"
    );
    let v = with(json!({"num_key_value_heads": 1}));
    let c = DecoderConfig::from_hf_json(&v).unwrap();
    assert_eq!((c.head_dim(), c.kv_heads()), (128, 1));
    assert_eq!(c.rope_theta, 10_000.0);
    assert_eq!(c.max_position_embeddings, 32_768);
    std::fs::write(&p, r#"{"vocab_size": "x"}"#).unwrap();
    let e = format!("{:#}", DecoderConfig::from_file(&p).unwrap_err());
    assert!(e.contains("config.json: field `vocab_size`"), "{e}");
    std::fs::write(&p, "{\n  \"vocab_size\": 1,,\n}").unwrap();
    let e = format!("{:#}", DecoderConfig::from_file(&p).unwrap_err());
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn keys_that_change_the_math_are_refused_by_name() {
    for (extra, needle) in [
        (
            json!({"model_type": "mistral"}),
            "field `model_type`: \"mistral\" is not an architecture rmsweb runs (qwen3, llama)",
        ),
        (
            json!({"model_type": 3}),
            "field `model_type`: 3 is not a string",
        ),
        (
            json!({"architectures": ["Qwen3ForSequenceClassification"]}),
            "field `architectures`",
        ),
        (
            json!({"model_type": "qwen3", "architectures": ["LlamaForCausalLM"]}),
            "is not Qwen3ForCausalLM",
        ),
        (
            json!({"mlp_bias": true}),
            "field `mlp_bias`: unknown to rmsweb's qwen3",
        ),
        (
            json!({"attention_bias": "yes"}),
            "field `attention_bias`: expected true or false",
        ),
        (
            json!({"use_sliding_window": true}),
            "field `use_sliding_window`",
        ),
        (json!({"hidden_act": "gelu"}), "field `hidden_act`"),
        (
            json!({"attention_dropout": 0.1}),
            "field `attention_dropout`",
        ),
        (
            json!({"layer_types": ["sliding_attention"]}),
            "field `layer_types`",
        ),
        (
            json!({"quantization_config": {"bits": 4}}),
            "field `quantization_config`",
        ),
        (
            json!({"auto_map": {"AutoModel": "x.Y"}}),
            "field `auto_map`",
        ),
        (
            json!({"logit_softcap": 30.0}),
            "field `logit_softcap`: unknown",
        ),
        (
            json!({"rope_scaling": {"type": "longrope"}}),
            "field `rope_scaling.rope_type`",
        ),
        (
            json!({"rope_parameters": {"rope_type": "linear"}}),
            "rope_parameters.factor",
        ),
    ] {
        let e = format!(
            "{:#}",
            DecoderConfig::from_hf_json(&with(extra)).unwrap_err()
        );
        assert!(e.contains(needle), "{needle}: {e}");
    }
    // What transformers 5 writes for a plain Qwen3 is accepted as is.
    let written = with(json!({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "attention_bias": false, "attention_dropout": 0.0, "hidden_act": "silu",
        "layer_types": ["full_attention"], "max_window_layers": 28,
        "sliding_window": null, "use_sliding_window": false, "use_cache": true,
        "transformers_version": "5.24.0", "dtype": "float32", "num_key_value_heads": 1,
        "rope_parameters": {"rope_theta": 5e5, "rope_type": "default"}}));
    assert_eq!(
        DecoderConfig::from_hf_json(&written).unwrap().rope_theta,
        5e5
    );
}

#[test]
fn llama_configs_take_llamaconfig_defaults_and_their_biases() {
    let v = with(json!({"model_type": "llama", "hidden_size": 64,
                        "attention_bias": true, "mlp_bias": true, "pretraining_tp": 1}));
    let c = DecoderConfig::from_hf_json(&v).unwrap();
    assert_eq!(c.arch.spec.model_type, "llama");
    assert!(!c.arch.spec.qk_norm && c.arch.attention_bias && c.arch.mlp_bias);
    // LlamaConfig: kv heads = heads, head_dim = hidden / heads, 2,048 positions.
    assert_eq!((c.kv_heads(), c.head_dim()), (2, 32));
    assert_eq!(c.max_position_embeddings, 2048);
    // The class alone names the family too.
    let v = with(json!({"architectures": ["LlamaForCausalLM"]}));
    let c = DecoderConfig::from_hf_json(&v).unwrap();
    assert_eq!(c.arch.spec.model_type, "llama");
    // Biases and q/k norms count in the parameters.
    let plain = DecoderConfig::from_hf_json(&with(json!({"model_type": "llama"}))).unwrap();
    let biased = DecoderConfig::from_hf_json(&with(
        json!({"model_type": "llama", "attention_bias": true, "mlp_bias": true}),
    ))
    .unwrap();
    // q 8 + k 8 + v 8 + o 8, gate 16 + up 16 + down 8, one layer.
    assert_eq!(biased.num_params() - plain.num_params(), 72);
}

#[test]
fn written_config_reads_back_equal() {
    let mut c =
        DecoderConfig::from_hf_json(&with(json!({"num_key_value_heads": 2, "head_dim": 4})))
            .unwrap();
    for scaling in [None, Some(RopeScaling::Linear { factor: 4.0 })] {
        c.rope_scaling = scaling;
        let back = DecoderConfig::from_hf_json(&c.to_hf_json()).unwrap();
        assert_eq!(back, c);
    }
    for arch in [
        Arch::llama(),
        Arch {
            attention_bias: true,
            mlp_bias: true,
            ..Arch::llama()
        },
        Arch {
            attention_bias: true,
            ..Arch::qwen3()
        },
    ] {
        c.arch = arch;
        let back = DecoderConfig::from_hf_json(&c.to_hf_json()).unwrap();
        assert_eq!(back, c);
    }
}
