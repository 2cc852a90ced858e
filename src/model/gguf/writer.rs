//! A small GGUF writer and a tiny Llama model written the way llama.cpp's converter
//! writes one, for tests: the importer's round trips, and hostile files built by
//! changing one field (a raw key, a tensor entry without data, another alignment).

use super::reader::{TensorType, Value, value_type};
use super::tensors::{Part, Role, gguf_name, hf_name, permute};
use anyhow::Result;
use candle_core::quantized::QTensor;
use candle_core::{Device, Tensor};
use std::collections::BTreeMap;

/// A GGUF file being put together.
#[derive(Debug, Clone)]
pub struct GgufWriter {
    /// Written as the version field (3 by default).
    pub version: u32,
    /// Alignment the data is laid out with (32 by default); independent of any
    /// `general.alignment` key, so that a test can make the two disagree.
    pub alignment: u64,
    kvs: Vec<(String, u32, Vec<u8>)>,
    tensors: Vec<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    ne: Vec<u64>,
    code: u32,
    /// Data to lay out (offset chosen on writing), or a fixed relative offset and none.
    data: Result<Vec<u8>, u64>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    pub fn new() -> Self {
        Self {
            version: 3,
            alignment: 32,
            kvs: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Adds a key (a repeated key is written twice).
    pub fn kv(&mut self, key: &str, value: Value) -> &mut Self {
        let mut b = Vec::new();
        encode(&value, &mut b);
        self.kvs.push((key.to_string(), value.type_code(), b));
        self
    }

    /// Adds a key with a value type code and encoded bytes of the caller's choosing.
    pub fn raw_kv(&mut self, key: &str, code: u32, bytes: Vec<u8>) -> &mut Self {
        self.kvs.push((key.to_string(), code, bytes));
        self
    }

    /// Removes every entry of a key.
    pub fn remove_kv(&mut self, key: &str) -> &mut Self {
        self.kvs.retain(|(k, _, _)| k != key);
        self
    }

    /// Adds a tensor with its data (`ne` fastest axis first); the data is laid out after
    /// the previous tensor's, aligned.
    pub fn tensor(&mut self, name: &str, ne: &[u64], ty: TensorType, data: Vec<u8>) -> &mut Self {
        self.tensors.push(Entry {
            name: name.to_string(),
            ne: ne.to_vec(),
            code: ty.code(),
            data: Ok(data),
        });
        self
    }

    /// Adds a tensor entry with a type code and a relative offset of the caller's
    /// choosing, and no data.
    pub fn raw_tensor(&mut self, name: &str, ne: &[u64], code: u32, offset: u64) -> &mut Self {
        self.tensors.push(Entry {
            name: name.to_string(),
            ne: ne.to_vec(),
            code,
            data: Err(offset),
        });
        self
    }

    /// Removes a tensor.
    pub fn remove_tensor(&mut self, name: &str) -> &mut Self {
        self.tensors.retain(|t| t.name != name);
        self
    }

    /// Replaces a tensor's entry (dimensions, type and data), keeping its place.
    pub fn replace_tensor(&mut self, name: &str, ne: &[u64], ty: TensorType, data: Vec<u8>) {
        for t in &mut self.tensors {
            if t.name == name {
                t.ne = ne.to_vec();
                t.code = ty.code();
                t.data = Ok(data.clone());
            }
        }
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = |n: u64| n.next_multiple_of(self.alignment.max(1));
        let mut offsets = Vec::new();
        let mut next = 0u64;
        for t in &self.tensors {
            match &t.data {
                Ok(d) => {
                    next = align(next);
                    offsets.push(next);
                    next += d.len() as u64;
                }
                Err(off) => offsets.push(*off),
            }
        }
        let mut b = Vec::new();
        b.extend(b"GGUF");
        b.extend(self.version.to_le_bytes());
        b.extend((self.tensors.len() as u64).to_le_bytes());
        b.extend((self.kvs.len() as u64).to_le_bytes());
        for (k, code, v) in &self.kvs {
            put_str(k, &mut b);
            b.extend(code.to_le_bytes());
            b.extend(v);
        }
        for (t, off) in self.tensors.iter().zip(&offsets) {
            put_str(&t.name, &mut b);
            b.extend((t.ne.len() as u32).to_le_bytes());
            for n in &t.ne {
                b.extend(n.to_le_bytes());
            }
            b.extend(t.code.to_le_bytes());
            b.extend(off.to_le_bytes());
        }
        let start = b.len() as u64;
        for (t, off) in self.tensors.iter().zip(&offsets) {
            if let Ok(d) = &t.data {
                b.resize((align(start) + off) as usize, 0);
                b.extend(d);
            }
        }
        b
    }
}

fn put_str(s: &str, b: &mut Vec<u8>) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

fn encode(v: &Value, b: &mut Vec<u8>) {
    match v {
        Value::U8(x) => b.extend(x.to_le_bytes()),
        Value::I8(x) => b.extend(x.to_le_bytes()),
        Value::U16(x) => b.extend(x.to_le_bytes()),
        Value::I16(x) => b.extend(x.to_le_bytes()),
        Value::U32(x) => b.extend(x.to_le_bytes()),
        Value::I32(x) => b.extend(x.to_le_bytes()),
        Value::F32(x) => b.extend(x.to_le_bytes()),
        Value::Bool(x) => b.push(u8::from(*x)),
        Value::String(s) => put_str(s, b),
        Value::Array(code, items) => {
            b.extend(code.to_le_bytes());
            b.extend((items.len() as u64).to_le_bytes());
            for i in items {
                encode(i, b);
            }
        }
        Value::U64(x) => b.extend(x.to_le_bytes()),
        Value::I64(x) => b.extend(x.to_le_bytes()),
        Value::F64(x) => b.extend(x.to_le_bytes()),
    }
}

/// A string-array value.
pub fn strings<S: AsRef<str>>(items: &[S]) -> Value {
    Value::Array(
        value_type::STRING,
        items
            .iter()
            .map(|s| Value::String(s.as_ref().to_string()))
            .collect(),
    )
}

/// The bytes of `t` (row-major, `[.., in]`) as a GGUF tensor of type `ty`, quantized
/// with candle, and `t` as those bytes read back (what an exact importer returns).
pub fn encode_tensor(t: &Tensor, ty: TensorType) -> Result<(Vec<u8>, Tensor)> {
    let dtype = ty
        .candle()
        .ok_or_else(|| anyhow::anyhow!("cannot write type {ty}"))?;
    let q = QTensor::quantize(t, dtype)?;
    Ok((q.data()?.to_vec(), q.dequantize(&Device::Cpu)?))
}

/// The ChatML template the tiny model carries.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// A tiny Llama model as llama.cpp's converter writes one: q and k rows permuted for
/// interleaved rotary, dimensions reversed, a byte-level BPE vocabulary of 265 tokens
/// (`<|endoftext|>`, `<|im_start|>`, `<|im_end|>` control, the 256 byte symbols, five
/// merges including `1 2`, and `<think>` user-defined).
#[derive(Debug, Clone)]
pub struct TinyLlama {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ff: usize,
    /// Type of the per-layer matrices.
    pub matrix_type: TensorType,
    /// Type of `token_embd` and `output`.
    pub embed_type: TensorType,
    /// No `output.weight` (the head is the embedding).
    pub tied: bool,
    /// Attention biases (`attn_q.bias` ...).
    pub attn_bias: bool,
    pub pre: String,
    pub add_bos: bool,
    pub seed: u64,
}

impl Default for TinyLlama {
    fn default() -> Self {
        Self {
            layers: 2,
            hidden: 64,
            heads: 4,
            kv_heads: 2,
            ff: 96,
            matrix_type: TensorType::F32,
            embed_type: TensorType::F32,
            tied: true,
            attn_bias: false,
            pre: "smollm".into(),
            add_bos: false,
            seed: 1,
        }
    }
}

/// The tiny model's merges.
pub const TINY_MERGES: [&str; 5] = ["Ġ t", "h e", "Ġt he", "1 2", "i s"];

/// The tiny model's tokens and their llama.cpp token types.
pub fn tiny_vocab() -> (Vec<String>, Vec<i32>) {
    let mut tokens: Vec<String> = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        .map(String::from)
        .to_vec();
    let mut types = vec![3; 3];
    let mut alphabet: Vec<char> = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet()
        .into_iter()
        .collect();
    alphabet.sort();
    tokens.extend(alphabet.iter().map(|c| c.to_string()));
    for m in TINY_MERGES {
        tokens.push(m.replace(' ', ""));
    }
    types.resize(tokens.len(), 1);
    tokens.push("<think>".into());
    types.push(4);
    (tokens, types)
}

impl TinyLlama {
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// A writer holding the model's metadata (Llama hyper-parameters, the tiny
    /// byte-level vocabulary, ChatML), and the vocabulary's size.
    fn metadata(&self) -> (GgufWriter, usize) {
        let (tokens, types) = tiny_vocab();
        let vocab = tokens.len();
        let (h, hd, ff) = (self.hidden, self.head_dim(), self.ff);
        let mut w = GgufWriter::new();
        let u32v = |x: usize| Value::U32(x as u32);
        w.kv("general.architecture", Value::String("llama".into()))
            .kv("general.name", Value::String("tiny".into()))
            .kv("llama.block_count", u32v(self.layers))
            .kv("llama.context_length", u32v(256))
            .kv("llama.embedding_length", u32v(h))
            .kv("llama.feed_forward_length", u32v(ff))
            .kv("llama.attention.head_count", u32v(self.heads))
            .kv("llama.attention.head_count_kv", u32v(self.kv_heads))
            .kv("llama.rope.freq_base", Value::F32(10000.0))
            .kv("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5))
            .kv("llama.rope.dimension_count", u32v(hd))
            .kv("llama.vocab_size", u32v(vocab))
            .kv("tokenizer.ggml.model", Value::String("gpt2".into()))
            .kv("tokenizer.ggml.pre", Value::String(self.pre.clone()))
            .kv("tokenizer.ggml.tokens", strings(&tokens))
            .kv(
                "tokenizer.ggml.token_type",
                Value::Array(value_type::I32, types.into_iter().map(Value::I32).collect()),
            )
            .kv("tokenizer.ggml.merges", strings(&TINY_MERGES))
            .kv("tokenizer.ggml.bos_token_id", Value::U32(1))
            .kv("tokenizer.ggml.eos_token_id", Value::U32(2))
            .kv("tokenizer.ggml.padding_token_id", Value::U32(2))
            .kv("tokenizer.ggml.add_bos_token", Value::Bool(self.add_bos))
            .kv(
                "tokenizer.chat_template",
                Value::String(CHATML_TEMPLATE.into()),
            );
        (w, vocab)
    }

    /// The GGUF file and the f32 tensors it was made from, under HF names in HF layout
    /// (before quantization; the q and k rows unpermuted).
    // Kept whole: it writes the tensors in file order (embedding, each block's parts,
    // the final norm, the head), which the reader's tests walk in the same order.
    pub fn build(&self) -> Result<(GgufWriter, BTreeMap<String, Tensor>)> {
        let (h, hd, ff) = (self.hidden, self.head_dim(), self.ff);
        let (mut w, vocab) = self.metadata();
        let mut rng = self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut values = |n: usize, center: f32, scale: f32| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    center + scale * ((rng >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0)
                })
                .collect()
        };
        let mut source = BTreeMap::new();
        let mut add = |w: &mut GgufWriter,
                       gguf: &str,
                       hf: &str,
                       shape: &[usize],
                       ty: TensorType,
                       permute_heads: Option<usize>,
                       center: f32|
         -> Result<()> {
            let n = shape.iter().product();
            let t = Tensor::from_vec(values(n, center, 0.5), shape, &Device::Cpu)?;
            let stored = match permute_heads {
                Some(heads) => permute(&t, heads)?,
                None => t.clone(),
            };
            let (bytes, _) = encode_tensor(&stored, ty)?;
            let ne: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
            w.tensor(gguf, &ne, ty, bytes);
            source.insert(hf.to_string(), t);
            Ok(())
        };
        let (mt, et, f32t) = (self.matrix_type, self.embed_type, TensorType::F32);
        add(
            &mut w,
            "token_embd.weight",
            "model.embed_tokens.weight",
            &[vocab, h],
            et,
            None,
            0.0,
        )?;
        for layer in 0..self.layers {
            let (qr, kr) = (self.heads * hd, self.kv_heads * hd);
            for part in Part::ALL {
                // Row-major shape, the heads llama.cpp permutes the rows of, the type.
                let (shape, heads, ty, center) = match part {
                    Part::AttnNorm | Part::FfnNorm => (vec![h], None, f32t, 1.0),
                    Part::Q => (vec![qr, h], Some(self.heads), mt, 0.0),
                    Part::K => (vec![kr, h], Some(self.kv_heads), mt, 0.0),
                    Part::V => (vec![kr, h], None, mt, 0.0),
                    Part::O => (vec![h, qr], None, mt, 0.0),
                    Part::Gate | Part::Up => (vec![ff, h], None, mt, 0.0),
                    Part::Down => (vec![h, ff], None, mt, 0.0),
                };
                let role = |bias| Role::Block { layer, part, bias };
                add(
                    &mut w,
                    &gguf_name(role(false)),
                    &hf_name(role(false)),
                    &shape,
                    ty,
                    heads,
                    center,
                )?;
                if self.attn_bias && part.is_attention() {
                    let (g, m) = (gguf_name(role(true)), hf_name(role(true)));
                    add(&mut w, &g, &m, &shape[..1], f32t, heads, 0.0)?;
                }
            }
        }
        add(
            &mut w,
            "output_norm.weight",
            "model.norm.weight",
            &[h],
            f32t,
            None,
            1.0,
        )?;
        if !self.tied {
            add(
                &mut w,
                "output.weight",
                "lm_head.weight",
                &[vocab, h],
                et,
                None,
                0.0,
            )?;
        }
        Ok((w, source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_vocab_is_byte_level_with_specials_first() {
        let (tokens, types) = tiny_vocab();
        assert_eq!(tokens.len(), 265);
        assert_eq!(
            &tokens[..3],
            ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        );
        assert_eq!(types.iter().filter(|&&t| t == 3).count(), 3);
        assert_eq!(types[264], 4);
    }
}
