//! The `tokenizer.json` and `tokenizer_config.json` of a GGUF's byte-level BPE
//! (`tokenizer.ggml.model = gpt2`), built with the `tokenizers` crate.
//!
//! Model: BPE over `tokenizer.ggml.tokens` (ids in file order) and
//! `tokenizer.ggml.merges`, no unknown token, no byte fallback. No normalizer. The
//! pre-tokenizer is the one `tokenizer.ggml.pre` names, as the checkpoint's own
//! `tokenizer.json` spells it:
//!
//! - `smollm`: `Sequence[Digits(individual_digits), ByteLevel(use_regex)]` (SmolLM,
//!   SmolLM2: each digit its own token);
//! - `gpt2`, `gpt-2` and `default`: `ByteLevel(use_regex)`, GPT-2's split (a file
//!   without the key is `default`, as llama.cpp reads it). llama.cpp itself splits
//!   `default` with a different chain of patterns (punctuation runs, then GPT-2's, then
//!   digit groups of three); the files that say `default` come from a checkpoint whose
//!   `tokenizer.json` llama.cpp did not recognize, so GPT-2's split is a guess there;
//! - `llama-bpe`: Llama 3's `Split(regex, isolated)` then `ByteLevel` without its
//!   regex, and its BPE ignores merges for whole-word tokens (`ignore_merges`);
//!
//! any other name is refused. Decoder: `ByteLevel`. Post-processor: `ByteLevel`
//! (offsets untrimmed), followed by a template adding the bos (and eos) token when
//! `tokenizer.ggml.add_bos_token` (`add_eos_token`) is true. Tokens of type 3
//! (control) become special added tokens, type 4 (user-defined) non-special ones.

use super::hparams::{opt_bool, opt_str};
use super::reader::{Gguf, Value, quoted, value_type};
use anyhow::{Result, anyhow, bail, ensure};
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

/// The `tokenizer.ggml.pre` names this importer maps.
pub const SUPPORTED_PRE: &str = "smollm, gpt2, gpt-2, default, llama-bpe";

/// Llama 3's split pattern, as its `tokenizer.json` spells it.
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// llama.cpp's token types.
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// The tokenizer files of an imported model.
pub struct TokenizerFiles {
    pub tokenizer: Tokenizer,
    /// `tokenizer_config.json`.
    pub config: Json,
    /// The `tokenizer.ggml.pre` it was built for.
    pub pre: String,
    /// Number of tokens.
    pub vocab: usize,
    /// Ids of the special (control) tokens.
    pub special: Vec<u32>,
}

fn string_array<'a>(g: &'a Gguf, key: &str) -> Result<Option<Vec<&'a str>>> {
    let Some(v) = g.get(key) else {
        return Ok(None);
    };
    let items = match v {
        Value::Array(value_type::STRING, items) => items,
        other => bail!(
            "key {}: expected an array of strings, found {}",
            quoted(key),
            other.describe()
        ),
    };
    Ok(Some(items.iter().filter_map(Value::as_str).collect()))
}

/// The number of tokens (`tokenizer.ggml.tokens`), which must be present.
pub fn token_count(g: &Gguf) -> Result<usize> {
    string_array(g, "tokenizer.ggml.tokens")?
        .map(|t| t.len())
        .ok_or_else(|| anyhow!("key `tokenizer.ggml.tokens` is missing"))
}

/// Builds the tokenizer and its `tokenizer_config.json` (`model_max_length` =
/// `context_length`).
pub fn build(g: &Gguf, context_length: usize) -> Result<TokenizerFiles> {
    let model = opt_str(g, "tokenizer.ggml.model")?
        .ok_or_else(|| anyhow!("key `tokenizer.ggml.model` is missing"))?;
    ensure!(
        model == "gpt2",
        "key `tokenizer.ggml.model` is {}; only byte-level BPE (`gpt2`) is supported",
        quoted(model)
    );
    let pre = opt_str(g, "tokenizer.ggml.pre")?.unwrap_or("default");
    let tokens = string_array(g, "tokenizer.ggml.tokens")?
        .ok_or_else(|| anyhow!("key `tokenizer.ggml.tokens` is missing"))?;
    ensure!(!tokens.is_empty(), "key `tokenizer.ggml.tokens` is empty");
    let merges = string_array(g, "tokenizer.ggml.merges")?
        .ok_or_else(|| anyhow!("key `tokenizer.ggml.merges` is missing"))?;
    let types = token_types(g, tokens.len())?;

    let vocab = vocab_of(&tokens)?;
    let pairs = merge_pairs(&merges, &vocab)?;
    let bpe_vocab: Vocab = vocab.iter().map(|(k, &v)| (k.to_string(), v)).collect();
    let pre_tok = pre_tokenizer(pre)?;
    let bpe = BPE::builder()
        .vocab_and_merges(bpe_vocab, pairs)
        .byte_fallback(false)
        .ignore_merges(pre == "llama-bpe")
        .build()
        .map_err(|e| anyhow!("building the BPE model: {e}"))?;

    let mut tok = Tokenizer::new(bpe);
    tok.with_normalizer(None::<tokenizers::NormalizerWrapper>);
    tok.with_pre_tokenizer(Some(pre_tok));
    tok.with_decoder(Some(ByteLevelDecoder::default()));

    let (special, user, added) = added_tokens(&tokens, &types);
    tok.add_special_tokens(&special);
    tok.add_tokens(&user);

    let add_bos = opt_bool(g, "tokenizer.ggml.add_bos_token")?.unwrap_or(false);
    let add_eos = opt_bool(g, "tokenizer.ggml.add_eos_token")?.unwrap_or(false);
    let id_of = |name: &str| special_token(g, &tokens, name);
    let bos = id_of("bos")?;
    let eos = id_of("eos")?;
    let pad = id_of("padding")?;
    tok.with_post_processor(Some(post_processor(add_bos, add_eos, bos, eos)?));

    // Every token keeps the id the file gives it.
    for (id, &t) in tokens.iter().enumerate() {
        ensure!(
            tok.token_to_id(t) == Some(id as u32),
            "key `tokenizer.ggml.tokens`: token {id} ({}) did not keep its id",
            quoted(t)
        );
    }

    let config = tokenizer_config(
        g,
        [bos, eos, pad],
        (add_bos, add_eos),
        context_length,
        added,
    )?;
    Ok(TokenizerFiles {
        tokenizer: tok,
        config,
        pre: pre.to_string(),
        vocab: tokens.len(),
        special: types
            .iter()
            .enumerate()
            .filter(|&(_, &t)| t == token_type::CONTROL)
            .map(|(i, _)| i as u32)
            .collect(),
    })
}

/// The special token `tokenizer.ggml.<name>_token_id` names, with its id; `None` when
/// the key is absent, an error when the id is past the vocabulary.
fn special_token<'t>(g: &Gguf, tokens: &[&'t str], name: &str) -> Result<Option<(u32, &'t str)>> {
    let key = format!("tokenizer.ggml.{name}_token_id");
    match super::hparams::opt_count(g, &key)? {
        None => Ok(None),
        Some(id) => tokens
            .get(id)
            .map(|t| Some((id as u32, *t)))
            .ok_or_else(|| {
                anyhow!(
                    "key {} is {id}, past the {} tokens",
                    quoted(&key),
                    tokens.len()
                )
            }),
    }
}

/// `tokenizer_config.json`: the bos, eos and pad tokens, whether bos and eos are
/// added, the context length, the added tokens and the chat template.
fn tokenizer_config(
    g: &Gguf,
    [bos, eos, pad]: [Option<(u32, &str)>; 3],
    (add_bos, add_eos): (bool, bool),
    context_length: usize,
    added: serde_json::Map<String, Json>,
) -> Result<Json> {
    let name = |t: Option<(u32, &str)>| t.map(|(_, s)| s.to_string());
    let mut config = json!({
        "tokenizer_class": crate::model::tokenizer::HF_TOKENIZER_CLASS,
        "bos_token": name(bos),
        "eos_token": name(eos),
        "pad_token": name(pad),
        "unk_token": null,
        "add_bos_token": add_bos,
        "add_eos_token": add_eos,
        "clean_up_tokenization_spaces": false,
        "model_max_length": context_length,
        "added_tokens_decoder": added,
    });
    if let Some(t) = opt_str(g, "tokenizer.chat_template")? {
        config["chat_template"] = t.into();
    }
    Ok(config)
}

/// Each token's id, refusing empty and repeated tokens.
fn vocab_of<'a>(tokens: &[&'a str]) -> Result<HashMap<&'a str, u32>> {
    let mut vocab: HashMap<&str, u32> = HashMap::with_capacity(tokens.len());
    for (id, &t) in tokens.iter().enumerate() {
        ensure!(
            !t.is_empty(),
            "key `tokenizer.ggml.tokens`: token {id} is empty"
        );
        if let Some(first) = vocab.insert(t, id as u32) {
            bail!(
                "key `tokenizer.ggml.tokens`: tokens {first} and {id} are both {}",
                quoted(t)
            );
        }
    }
    Ok(vocab)
}

/// The merges as token pairs, each of whose pieces and result is in the vocabulary.
fn merge_pairs(merges: &[&str], vocab: &HashMap<&str, u32>) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::with_capacity(merges.len());
    for (i, m) in merges.iter().enumerate() {
        // llama.cpp splits at the first space after the first byte.
        let split = m
            .char_indices()
            .skip(1)
            .find(|&(_, c)| c == ' ')
            .map(|(at, _)| (&m[..at], &m[at + 1..]));
        let Some((a, b)) = split.filter(|(a, b)| !a.is_empty() && !b.is_empty()) else {
            bail!(
                "key `tokenizer.ggml.merges`: merge {i} ({}) is not two tokens separated by \
                 a space",
                quoted(m)
            );
        };
        for piece in [a.to_string(), b.to_string(), format!("{a}{b}")] {
            ensure!(
                vocab.contains_key(piece.as_str()),
                "key `tokenizer.ggml.merges`: merge {i} ({}) needs token {}, which is not in \
                 `tokenizer.ggml.tokens`",
                quoted(m),
                quoted(&piece)
            );
        }
        pairs.push((a.to_string(), b.to_string()));
    }
    Ok(pairs)
}

/// The pre-tokenizer `tokenizer.ggml.pre` names.
fn pre_tokenizer(pre: &str) -> Result<PreTokenizerWrapper> {
    Ok(match pre {
        "smollm" => Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])
        .into(),
        "gpt2" | "gpt-2" | "default" => ByteLevel::new(false, true, true).into(),
        "llama-bpe" => Sequence::new(vec![
            Split::new(
                SplitPattern::Regex(LLAMA3_PATTERN.into()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| anyhow!("Llama 3 split pattern: {e}"))?
            .into(),
            ByteLevel::new(false, true, false).into(),
        ])
        .into(),
        other => bail!(
            "key `tokenizer.ggml.pre` is {}: this pre-tokenizer is not supported ({SUPPORTED_PRE} \
             are)",
            quoted(other)
        ),
    })
}

/// The control tokens (special) and user-defined tokens (not special), and their
/// `added_tokens_decoder` entries by id.
fn added_tokens(
    tokens: &[&str],
    types: &[i32],
) -> (
    Vec<AddedToken>,
    Vec<AddedToken>,
    serde_json::Map<String, Json>,
) {
    let mut special = Vec::new();
    let mut user = Vec::new();
    let mut added = serde_json::Map::new();
    for (id, (&t, &ty)) in tokens.iter().zip(types).enumerate() {
        let is_special = match ty {
            token_type::CONTROL => true,
            token_type::USER_DEFINED => false,
            _ => continue,
        };
        let at = AddedToken::from(t.to_string(), is_special).normalized(false);
        if is_special {
            special.push(at);
        } else {
            user.push(at);
        }
        added.insert(
            id.to_string(),
            json!({
                "content": t, "lstrip": false, "normalized": false, "rstrip": false,
                "single_word": false, "special": is_special,
            }),
        );
    }
    (special, user, added)
}

/// `tokenizer.ggml.token_type` (all normal when absent), one per token.
fn token_types(g: &Gguf, n: usize) -> Result<Vec<i32>> {
    const KEY: &str = "tokenizer.ggml.token_type";
    let Some(v) = g.get(KEY) else {
        return Ok(vec![token_type::NORMAL; n]);
    };
    let items = v.as_array().ok_or_else(|| {
        anyhow!(
            "key `{KEY}`: expected an array of integers, found {}",
            v.describe()
        )
    })?;
    ensure!(
        items.len() == n,
        "key `{KEY}` has {} entries for {n} tokens",
        items.len()
    );
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_i64()
                .and_then(|t| i32::try_from(t).ok())
                .ok_or_else(|| {
                    anyhow!("key `{KEY}`: entry {i} is {}, not an integer", v.describe())
                })
        })
        .collect()
}

/// `ByteLevel` (offsets untrimmed), then a template adding bos/eos when asked.
fn post_processor(
    add_bos: bool,
    add_eos: bool,
    bos: Option<(u32, &str)>,
    eos: Option<(u32, &str)>,
) -> Result<PostProcessorWrapper> {
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true});
    if !add_bos && !add_eos {
        return Ok(serde_json::from_value(byte_level)?);
    }
    fn need<'a>(flag: &str, t: Option<(u32, &'a str)>) -> Result<(u32, &'a str)> {
        t.ok_or_else(|| {
            anyhow!(
                "key `tokenizer.ggml.{flag}_token` is true but key `tokenizer.ggml.{}_token_id` \
                 is missing",
                flag.trim_start_matches("add_")
            )
        })
    }
    let mut specials = serde_json::Map::new();
    let piece = |t: &str, type_id: u32| json!({"SpecialToken": {"id": t, "type_id": type_id}});
    let seq = |s: &str, type_id: u32| json!({"Sequence": {"id": s, "type_id": type_id}});
    let (mut single, mut pair) = (Vec::new(), Vec::new());
    let bos = if add_bos {
        Some(need("add_bos", bos)?)
    } else {
        None
    };
    let eos = if add_eos {
        Some(need("add_eos", eos)?)
    } else {
        None
    };
    for (id, t) in bos.iter().chain(&eos) {
        specials.insert(t.to_string(), json!({"id": t, "ids": [id], "tokens": [t]}));
    }
    for (s, type_id) in [("A", 0), ("B", 1)] {
        let out = if s == "A" { &mut single } else { &mut pair };
        if let Some((_, t)) = bos {
            out.push(piece(t, type_id));
        }
        out.push(seq(s, type_id));
        if let Some((_, t)) = eos {
            out.push(piece(t, type_id));
        }
    }
    let pair: Vec<Json> = single.iter().cloned().chain(pair).collect();
    let template = json!({
        "type": "TemplateProcessing",
        "single": single,
        "pair": pair,
        "special_tokens": specials,
    });
    Ok(serde_json::from_value(json!({
        "type": "Sequence",
        "processors": [byte_level, template],
    }))?)
}
