//! Tokenizers: load a HF `tokenizer.json`, or train a small byte-level BPE on text
//! with the ChatML special tokens.

use anyhow::{Context, Result};
use std::path::Path;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer, TokenizerBuilder};

/// ChatML turn start.
pub const IM_START: &str = "<|im_start|>";
/// ChatML turn end (generation stops here).
pub const IM_END: &str = "<|im_end|>";
/// End of document / padding.
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// Loads `tokenizer.json`.
pub fn load(path: impl AsRef<Path>) -> Result<Tokenizer> {
    let path = path.as_ref();
    Tokenizer::from_file(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Trains a byte-level BPE of at most `vocab_size` tokens (special tokens included) on
/// `texts`, merging only pairs seen at least `min_frequency` times. Every byte is in the
/// base alphabet, so any text encodes.
///
/// A high `min_frequency` keeps the values of individual episodes (a name to type, a
/// password) out of the vocabulary: they stay sequences of common sub-word pieces, so
/// a value never seen in training tokenizes like the ones that were, and a policy
/// learns to copy pieces rather than to recall whole memorized tokens.
pub fn train_bpe<I, S>(texts: I, vocab_size: usize, min_frequency: u64) -> Result<Tokenizer>
where
    I: Iterator<Item = S> + Send,
    S: AsRef<str> + Send,
{
    let specials: Vec<AddedToken> = [END_OF_TEXT, IM_START, IM_END]
        .iter()
        .map(|s| AddedToken::from(s.to_string(), true))
        .collect();
    let mut trainer = BpeTrainerBuilder::new()
        .show_progress(false)
        .vocab_size(vocab_size)
        .min_frequency(min_frequency.max(1))
        .special_tokens(specials)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut tk = TokenizerBuilder::new()
        .with_model(BPE::default())
        .with_normalizer(None::<tokenizers::NormalizerWrapper>)
        .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
        .with_post_processor(None::<tokenizers::PostProcessorWrapper>)
        .with_decoder(Some(ByteLevel::default()))
        .build()
        .map_err(|e| anyhow::anyhow!("building tokenizer: {e}"))?;
    tk.train(&mut trainer, texts)
        .map_err(|e| anyhow::anyhow!("training BPE: {e}"))?;
    let mut tok: Tokenizer = tk.into();
    // Mark them special again at the tokenizer level so decoding can skip them.
    tok.add_special_tokens(&[
        AddedToken::from(END_OF_TEXT.to_string(), true),
        AddedToken::from(IM_START.to_string(), true),
        AddedToken::from(IM_END.to_string(), true),
    ]);
    Ok(tok)
}

/// Adds Qwen3-VL's image tokens (`<|vision_start|>`, `<|vision_end|>`,
/// `<|image_pad|>`) as special tokens, for a model that sees screenshots.
pub fn add_vision_tokens(tok: &mut Tokenizer) {
    use crate::model::vl::prompt::{IMAGE_PAD, VISION_END, VISION_START};
    tok.add_special_tokens(&[
        AddedToken::from(VISION_START.to_string(), true),
        AddedToken::from(VISION_END.to_string(), true),
        AddedToken::from(IMAGE_PAD.to_string(), true),
    ]);
}

/// Saves `tokenizer.json` into `dir`.
pub fn save(tok: &Tokenizer, dir: &Path) -> Result<()> {
    let path = dir.join("tokenizer.json");
    let text = tok
        .to_string(false)
        .map_err(|e| anyhow::anyhow!("serializing tokenizer: {e}"))?;
    crate::util::fs::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// The class `AutoTokenizer` builds for [`save_tokenizer_config`]'s file: the one that
/// loads `tokenizer.json` as written (transformers 4 and 5). Without it transformers
/// picks the model type's tokenizer class (Qwen2Tokenizer for Qwen3), which rebuilds
/// the pre-tokenizer its own way and gives other ids.
pub const HF_TOKENIZER_CLASS: &str = "PreTrainedTokenizerFast";

/// The end-of-turn and padding tokens of a ChatML tokenizer: `<|im_end|>` (else
/// `<|endoftext|>`) and `<|endoftext|>` (else the end-of-turn token).
pub fn eos_and_pad(tok: &Tokenizer) -> Result<(&'static str, &'static str)> {
    let has = |t: &str| tok.token_to_id(t).is_some();
    let eos = [IM_END, END_OF_TEXT]
        .into_iter()
        .find(|t| has(t))
        .ok_or_else(|| anyhow::anyhow!("tokenizer has neither `{IM_END}` nor `{END_OF_TEXT}`"))?;
    let pad = if has(END_OF_TEXT) { END_OF_TEXT } else { eos };
    Ok((eos, pad))
}

/// The `tokenizer_config.json` that makes transformers' `AutoTokenizer` load `tok`
/// (saved as `tokenizer.json` next to it) with the same ids, end-of-turn and padding
/// tokens, and `chat_template`.
pub fn tokenizer_config(
    tok: &Tokenizer,
    chat_template: &str,
    model_max_length: usize,
) -> Result<serde_json::Value> {
    let (eos, pad) = eos_and_pad(tok)?;
    Ok(serde_json::json!({
        "tokenizer_class": HF_TOKENIZER_CLASS,
        "eos_token": eos,
        "pad_token": pad,
        "bos_token": null,
        "unk_token": null,
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "split_special_tokens": false,
        "model_max_length": model_max_length,
        "chat_template": chat_template,
    }))
}

/// Writes [`tokenizer_config`] as `tokenizer_config.json` into `dir`.
pub fn save_tokenizer_config(
    tok: &Tokenizer,
    chat_template: &str,
    model_max_length: usize,
    dir: &Path,
) -> Result<()> {
    let path = dir.join("tokenizer_config.json");
    let v = tokenizer_config(tok, chat_template, model_max_length)?;
    crate::util::fs::write_atomic(&path, serde_json::to_string_pretty(&v)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// The files of a model folder that describe its tokenizer and chat template.
pub const TOKENIZER_FILES: [&str; 4] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    super::chat_template::JINJA_FILE,
];

/// Copies the [`TOKENIZER_FILES`] `from` has into `to` (e.g. a run folder's tokenizer
/// into a checkpoint).
pub fn copy_files(from: &Path, to: &Path) -> Result<()> {
    for name in TOKENIZER_FILES {
        let src = from.join(name);
        if src.is_file() {
            let bytes =
                std::fs::read(&src).with_context(|| format!("reading {}", src.display()))?;
            crate::util::fs::write_atomic(&to.join(name), &bytes)
                .with_context(|| format!("writing {}", to.join(name).display()))?;
        }
    }
    Ok(())
}

/// The id of a token that must exist (e.g. `<|im_end|>`).
pub fn token_id(tok: &Tokenizer, token: &str) -> Result<u32> {
    tok.token_to_id(token)
        .ok_or_else(|| anyhow::anyhow!("tokenizer has no `{token}` token"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trained_bpe_roundtrips_and_keeps_specials_whole() {
        let texts = [
            "click the button",
            "type hello world",
            "click the link ünïcode",
        ];
        let tok = train_bpe(texts.iter().cycle().take(60), 300, 2).unwrap();
        let s = "<|im_start|>user\nclick the ünïcode link<|im_end|>\n";
        let enc = tok.encode(s, false).unwrap();
        assert_eq!(enc.get_ids()[0], token_id(&tok, IM_START).unwrap());
        assert!(enc.get_ids().contains(&token_id(&tok, IM_END).unwrap()));
        assert_eq!(tok.decode(enc.get_ids(), false).unwrap(), s);
        assert!(tok.get_vocab_size(true) <= 300);
    }

    #[test]
    fn a_high_merge_threshold_keeps_rare_values_in_pieces() {
        // "Miguelita" is typed in 3 episodes, the JSON around it in all 200.
        let mut texts: Vec<String> = (0..200)
            .map(|i| {
                format!(
                    "{{\"action\":[{{\"input\":{{\"index\":{},\"text\":\"w{i}\"}}}}]}}",
                    i % 7
                )
            })
            .collect();
        texts.extend((0..3).map(|_| "type \"Miguelita\" into the field".to_string()));
        let pieces = |min_frequency| {
            let tok = train_bpe(texts.iter(), 4096, min_frequency).unwrap();
            let n = |s: &str| tok.encode(s, false).unwrap().get_ids().len();
            (n("Miguelita"), n("\"action\":[{\"input\":{\"index\":"))
        };
        let (rare_low, common_low) = pieces(2);
        let (rare_high, common_high) = pieces(50);
        assert_eq!(rare_low, 1, "merged whole at the low threshold");
        assert!(rare_high >= 4, "{rare_high} pieces");
        // What every sample shares is merged as far as the pre-tokenizer allows (one
        // token per word or punctuation run) at either threshold.
        assert_eq!((common_low, common_high), (7, 7));
    }
}
