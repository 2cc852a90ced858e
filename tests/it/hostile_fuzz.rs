//! Proptest-driven fuzzing of the hostile-input readers: the action parser, the
//! Browser Use importer, the JSON Lines reader, `rl groups` input, the schema
//! compiler behind `serve`'s `response_format` and the recipe config. Inputs are the
//! seeds of `tests/data/hostile/` spliced, cut and byte-flipped; each property says
//! what must hold for every input (no panic, and the answer is consistent), so a
//! failure prints the input that broke it. `PROPTEST_CASES` raises the count.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rmsweb::action::parse::parse_response;
use rmsweb::recipe::config::RecipeConfig;
use rmsweb::serve::api;
use rmsweb::serve::limits::Limits;
use rmsweb::train::rl::groups::{GroupStats, advantages, parse_group_line};
use rmsweb::trajectory::import::browser_use;
use rmsweb::trajectory::jsonl::JsonlFile;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The seed files of one corpus folder, as bytes.
fn seeds(folder: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hostile")
        .join(folder);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// One mutation of a seed: cut at a point, flip a byte, splice another seed's bytes in.
#[derive(Debug, Clone)]
enum Mutation {
    Cut(usize),
    Flip(usize, u8),
    Splice(usize, usize, usize),
    Repeat(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(a, b, c)| Mutation::Splice(a, b, c)),
        (any::<usize>(), 1..64usize, 2..200usize).prop_map(|(a, l, n)| Mutation::Repeat(a, l, n)),
    ]
}

/// Applies mutations to seed `pick` of `seeds`.
fn mutate(seeds: &[Vec<u8>], pick: usize, muts: &[Mutation]) -> Vec<u8> {
    let mut b = seeds[pick % seeds.len()].clone();
    for m in muts {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match *m {
            Mutation::Cut(i) => b.truncate(at(i, b.len())),
            Mutation::Flip(i, x) if !b.is_empty() => {
                let k = i % b.len();
                b[k] ^= x;
            }
            Mutation::Flip(..) => {}
            Mutation::Splice(i, other, from) => {
                let o = &seeds[other % seeds.len()];
                let from = at(from, o.len());
                let tail = b.split_off(at(i, b.len()));
                b.extend_from_slice(&o[from..]);
                b.extend(tail);
            }
            Mutation::Repeat(i, len, n) => {
                let k = at(i, b.len());
                let piece: Vec<u8> = b[k..(k + len).min(b.len())].to_vec();
                let tail = b.split_off(k);
                b.extend(piece.repeat(n));
                b.extend(tail);
            }
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The parser answers every mutated candidate, and an error points inside the text.
    #[test]
    fn the_action_parser_answers_every_candidate(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        let text = String::from_utf8_lossy(&mutate(&seeds("parse"), pick, &muts)).into_owned();
        match parse_response(&text) {
            Ok(p) => prop_assert!(p.action_span.end <= text.len()),
            Err(e) => prop_assert!(e.offset.is_none_or(|o| o <= text.len()), "{:?}", e.offset),
        }
    }

    /// The Browser Use history parser never panics on mutated histories.
    #[test]
    fn the_browser_use_parser_never_panics(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        let bytes = mutate(&seeds("browser_use"), pick, &muts);
        let _ = browser_use::parse_history_bytes(&bytes, Path::new("h.json"));
    }

    /// `rl groups` input: a line it accepts always gives finite statistics.
    #[test]
    fn accepted_reward_groups_have_finite_statistics(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        let bytes = mutate(&seeds("groups"), pick, &muts);
        for line in String::from_utf8_lossy(&bytes).lines() {
            if let Ok((_, rewards)) = parse_group_line(line)
                && let Some(st) = GroupStats::of(&rewards)
            {
                prop_assert!(st.mean.is_finite() && st.std.is_finite(), "{line}");
                prop_assert!(advantages(&rewards, &st).iter().all(|a| a.is_finite()), "{line}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The JSON Lines reader indexes any file; every record it lists can be read back
    /// (parsed or refused with its line), and an unterminated last record parses.
    #[test]
    fn the_jsonl_reader_reads_back_every_record_it_lists(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        let bytes = mutate(&seeds("jsonl"), pick, &muts);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, &bytes).unwrap();
        let f = JsonlFile::open(&p).unwrap();
        for i in 0..f.len() {
            prop_assert!(f.raw(i).is_some());
            if let Err(e) = f.get::<serde_json::Value>(i) {
                prop_assert!(e.line > 0);
            }
        }
        if f.last_record_unterminated() {
            let raw = f.raw(f.len() - 1).unwrap();
            prop_assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&raw).is_ok());
        }
        prop_assert!(!(f.last_record_unterminated() && f.torn_tail().is_some()));
    }
}

/// A small JSON schema from the keywords the compiler knows: leaves (some
/// contradictory), `$ref`s to `#/$defs/d0..d3` (some of them loops), and objects,
/// arrays and `anyOf`s of those, nested.
fn schema_tree() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({})),
        prop::sample::select(vec!["string", "integer", "number", "boolean", "null"])
            .prop_map(|t| json!({ "type": t })),
        (0..6u64, 0..6u64)
            .prop_map(|(a, b)| json!({"type": "string", "minLength": a, "maxLength": b})),
        (-5i64..5, -5i64..5)
            .prop_map(|(a, b)| json!({"type": "integer", "minimum": a, "maximum": b})),
        (-2.0f64..2.0, -2.0f64..2.0)
            .prop_map(|(a, b)| json!({"type": "number", "minimum": a, "maximum": b})),
        prop::collection::vec(
            prop_oneof![
                Just(json!(null)),
                "[a-c]{0,2}".prop_map(Value::from),
                (0..3i64).prop_map(Value::from)
            ],
            0..3
        )
        .prop_map(|v| json!({ "enum": v })),
        (0..5usize).prop_map(|i| json!({"$ref": format!("#/$defs/d{i}")})),
    ];
    leaf.prop_recursive(4, 40, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| json!({ "anyOf": v })),
            (inner.clone(), 0..3u64, 0..3u64).prop_map(
                |(i, a, b)| json!({"type": "array", "items": i, "minItems": a, "maxItems": b})
            ),
            (
                prop::collection::btree_map("[a-c]", inner.clone(), 0..3),
                prop::collection::vec("[a-d]", 0..3),
                prop_oneof![Just(json!(true)), Just(json!(false)), inner],
            )
                .prop_map(|(p, r, add)| json!({
                    "type": "object", "properties": p, "required": r, "additionalProperties": add
                })),
        ]
    })
}

/// A whole schema: a root with four definitions it may refer to.
fn schema_doc() -> impl Strategy<Value = Value> {
    (schema_tree(), prop::collection::vec(schema_tree(), 4)).prop_map(|(root, defs)| {
        let mut root = match root {
            Value::Object(m) => m,
            other => [("anyOf".to_string(), json!([other]))]
                .into_iter()
                .collect(),
        };
        let defs: serde_json::Map<String, Value> = defs
            .into_iter()
            .enumerate()
            .map(|(i, d)| (format!("d{i}"), d))
            .collect();
        root.insert("$defs".into(), Value::Object(defs));
        Value::Object(root)
    })
}

/// A chat request asking for `schema` as `response_format`, checked as `serve`
/// checks it: a refusal is a 400 naming the schema with a short, clean message; an
/// accepted schema compiled in bounded time has a shortest completion it accepts.
fn check_response_format(schema: Value) -> Result<(), TestCaseError> {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}});
    let started = Instant::now();
    let checked = api::check(body.to_string().as_bytes(), "m", false, &Limits::default());
    prop_assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    match checked {
        Ok(c) => {
            let schema = c.schema.unwrap();
            if let Some(text) = schema.matcher().shortest_completion(24) {
                let text = String::from_utf8(text).unwrap();
                prop_assert!(schema.accepts(&text), "{text}");
                prop_assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
            }
        }
        Err(e) => {
            prop_assert_eq!(e.status.as_u16(), 400);
            let param = e.param.unwrap_or_default();
            prop_assert!(param.starts_with("response_format"), "{param}");
            prop_assert!(is_clean_and_short(&e.message), "{}", e.message);
        }
    }
    Ok(())
}

/// No control character (but newlines) and under 2000 bytes: what quotes at most
/// 200 bytes of any value stays short.
fn is_clean_and_short(message: &str) -> bool {
    message.len() < 2000 && !message.chars().any(|c| c.is_control() && c != '\n')
}

/// Recipe keys (known ones, and long unknown ones) set to hostile values
/// (`sft.set.lr`, `nan`).
fn recipe_overrides() -> impl Strategy<Value = Vec<(String, String)>> {
    let long = "k".repeat(3000);
    let mut keys: Vec<String> = [
        "collect.seeds",
        "collect.seed_start",
        "collect.rounds",
        "collect.mistake_rate",
        "collect.detour_factor",
        "collect.max_steps",
        "filter.min_effective_steps",
        "filter.max_effective_steps",
        "flatten.token_budget",
        "sft.steps",
        "sft.preset",
        "sft.set.lr",
        "sft.set.epochs",
        "sft.set.warmup_ratio",
        "sft.set.lora",
        "eval.seed_start",
        "eval.episodes",
        "eval.temperature",
        "eval.max_new_tokens",
        "sft_collect.seeds",
        "mine.max_category_share",
        "rl.steps",
        "rl.seeds",
        "rl.variants",
        "rl.set.lr",
        "rl.set.kl_coef",
        "rl.set.n",
        "rl.validation.episodes",
        "rl.validation.seed_start",
    ]
    .map(String::from)
    .to_vec();
    keys.extend(["sft.set", "rl.set", "mine", "collect"].map(|s| format!("{s}.{long}")));
    let mut values: Vec<String> = [
        "0",
        "-1",
        "1",
        "3",
        "9223372036854775807",
        "nan",
        "-inf",
        "1e308",
        "0.5",
        "2.0",
        "\"\"",
        "\"dapo+x\"",
        "true",
        "[]",
        "[0, 0]",
        "[\"grpo\", \"grpo\"]",
        "{ dropout = 1.0 }",
        "{}",
    ]
    .map(String::from)
    .to_vec();
    values.push(format!("\"{long}\\u001b[31m\""));
    prop::collection::vec(
        (prop::sample::select(keys), prop::sample::select(values)),
        1..4,
    )
}

/// `base` (a recipe's TOML) with `overrides` set in it.
fn with_overrides(base: &str, overrides: &[(String, String)]) -> String {
    let mut doc: toml::Table = toml::from_str(base).unwrap();
    for (dotted, value) in overrides {
        let value = toml::from_str::<toml::Table>(&format!("v = {value}")).unwrap()["v"].clone();
        let (path, last) = dotted.rsplit_once('.').unwrap();
        let mut table = &mut doc;
        for part in path.split('.') {
            let entry = table
                .entry(part)
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if !entry.is_table() {
                *entry = toml::Value::Table(toml::Table::new());
            }
            table = entry.as_table_mut().unwrap();
        }
        table.insert(last.to_string(), value);
    }
    toml::to_string(&doc).unwrap()
}

/// A recipe config loads or is refused with a short, clean message naming a place;
/// one that loads plans its units, and the resolved config it writes (`recipe.toml`
/// in the folder) loads again.
fn check_recipe(text: &str) -> Result<(), TestCaseError> {
    match RecipeConfig::from_toml(text) {
        Ok(cfg) => {
            prop_assert!(rmsweb::recipe::plan::plan(&cfg).is_ok());
            let written = toml::to_string_pretty(&cfg).unwrap();
            let again = RecipeConfig::from_toml(&written);
            prop_assert!(again.is_ok(), "{:#}\n{written}", again.unwrap_err());
        }
        Err(e) => {
            let m = format!("{e:#}");
            prop_assert!(is_clean_and_short(&m), "{m}");
            // A place named: the key, the line, or the one TOML error without a line.
            prop_assert!(
                m.contains("key `") || m.contains("line ") || m.contains("80 levels"),
                "{m}"
            );
        }
    }
    Ok(())
}

/// The seed schemas compile (`ok_*`) or are refused (`bad_*`) as named.
#[test]
fn schema_seeds_compile_as_named() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile/schema");
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let schema: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        let r = rmsweb::model::constrain::Schema::compile(&schema);
        assert_eq!(r.is_ok(), name.starts_with("ok_"), "{name}: {:?}", r.err());
        check_response_format(schema).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `serve`'s `response_format`: generated schemas (loops, contradictions,
    /// alternatives) are compiled or refused, never a panic or a stall.
    #[test]
    fn response_format_schemas_compile_or_are_refused(schema in schema_doc()) {
        check_response_format(schema)?;
    }

    /// The seed schemas cut, flipped and spliced: the same, for whatever parses.
    #[test]
    fn mutated_response_formats_compile_or_are_refused(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        if let Ok(schema) = serde_json::from_slice::<Value>(&mutate(&seeds("schema"), pick, &muts)) {
            check_response_format(schema)?;
        }
    }

    /// The shipped recipes with hostile values for their keys: loaded or refused
    /// naming the key, never a panic.
    #[test]
    fn recipe_configs_load_or_are_refused(full in any::<bool>(), overrides in recipe_overrides()) {
        let name = if full { "recipe.toml" } else { "recipe-smoke.toml" };
        let base = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap();
        check_recipe(&with_overrides(&base, &overrides))?;
    }

    /// Recipe configs cut, flipped and spliced.
    #[test]
    fn mutated_recipe_configs_load_or_are_refused(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        check_recipe(&String::from_utf8_lossy(&mutate(&seeds("recipe"), pick, &muts)))?;
    }
}
