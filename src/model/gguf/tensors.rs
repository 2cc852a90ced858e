//! Tensors of a llama.cpp Llama GGUF: their Hugging Face names and shapes, the q/k row
//! order llama.cpp's converter changes, and dequantization to f32.

use super::hparams::Hparams;
use super::reader::{TensorInfo, TensorType};
use anyhow::{Result, anyhow, ensure};
use candle_core::{DType, Device, Tensor};

/// What a GGUF tensor is in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// `token_embd.weight`.
    Embed,
    /// `output.weight` (absent when the head is tied to the embedding).
    Head,
    /// `output_norm.weight`.
    FinalNorm,
    /// `blk.N.PART.weight` or `blk.N.PART.bias`.
    Block {
        layer: usize,
        part: Part,
        bias: bool,
    },
}

/// The nine tensors of a Llama block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    AttnNorm,
    Q,
    K,
    V,
    O,
    FfnNorm,
    Gate,
    Up,
    Down,
}

impl Part {
    /// Every part, in llama.cpp's order.
    pub const ALL: [Part; 9] = [
        Part::AttnNorm,
        Part::Q,
        Part::K,
        Part::V,
        Part::O,
        Part::FfnNorm,
        Part::Gate,
        Part::Up,
        Part::Down,
    ];

    /// llama.cpp's name of the part (`attn_q`).
    pub fn gguf(self) -> &'static str {
        match self {
            Part::AttnNorm => "attn_norm",
            Part::Q => "attn_q",
            Part::K => "attn_k",
            Part::V => "attn_v",
            Part::O => "attn_output",
            Part::FfnNorm => "ffn_norm",
            Part::Gate => "ffn_gate",
            Part::Up => "ffn_up",
            Part::Down => "ffn_down",
        }
    }

    /// transformers' name of the part (`self_attn.q_proj`).
    pub fn hf(self) -> &'static str {
        match self {
            Part::AttnNorm => "input_layernorm",
            Part::Q => "self_attn.q_proj",
            Part::K => "self_attn.k_proj",
            Part::V => "self_attn.v_proj",
            Part::O => "self_attn.o_proj",
            Part::FfnNorm => "post_attention_layernorm",
            Part::Gate => "mlp.gate_proj",
            Part::Up => "mlp.up_proj",
            Part::Down => "mlp.down_proj",
        }
    }

    fn from_gguf(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.gguf() == s)
    }

    /// Whether it is one of the attention projections (biases come as a set).
    pub fn is_attention(self) -> bool {
        matches!(self, Part::Q | Part::K | Part::V | Part::O)
    }

    /// Whether it is one of the MLP projections.
    pub fn is_mlp(self) -> bool {
        matches!(self, Part::Gate | Part::Up | Part::Down)
    }
}

/// The role of a GGUF tensor name, `None` for a name a Llama model does not have.
pub fn classify(name: &str) -> Option<Role> {
    match name {
        "token_embd.weight" => return Some(Role::Embed),
        "output.weight" => return Some(Role::Head),
        "output_norm.weight" => return Some(Role::FinalNorm),
        _ => {}
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    // Only llama.cpp's spelling of the number (`blk.3`, not `blk.03` or `blk.+3`).
    let n: usize = layer.parse().ok()?;
    if n.to_string() != layer {
        return None;
    }
    let (part, kind) = rest.rsplit_once('.')?;
    let bias = match kind {
        "weight" => false,
        "bias" => true,
        _ => return None,
    };
    let part = Part::from_gguf(part)?;
    if bias && matches!(part, Part::AttnNorm | Part::FfnNorm) {
        return None;
    }
    Some(Role::Block {
        layer: n,
        part,
        bias,
    })
}

/// The transformers name of a role (`model.layers.3.self_attn.q_proj.weight`).
pub fn hf_name(role: Role) -> String {
    match role {
        Role::Embed => "model.embed_tokens.weight".into(),
        Role::Head => "lm_head.weight".into(),
        Role::FinalNorm => "model.norm.weight".into(),
        Role::Block { layer, part, bias } => format!(
            "model.layers.{layer}.{}.{}",
            part.hf(),
            if bias { "bias" } else { "weight" }
        ),
    }
}

/// The GGUF name of a role (`blk.3.attn_q.weight`).
pub fn gguf_name(role: Role) -> String {
    match role {
        Role::Embed => "token_embd.weight".into(),
        Role::Head => "output.weight".into(),
        Role::FinalNorm => "output_norm.weight".into(),
        Role::Block { layer, part, bias } => format!(
            "blk.{layer}.{}.{}",
            part.gguf(),
            if bias { "bias" } else { "weight" }
        ),
    }
}

/// The transformers (row-major) shape a role has under `hp`, with the keys that set it
/// (for messages).
pub fn expected_shape(role: Role, hp: &Hparams) -> (Vec<usize>, &'static str) {
    let (h, q, kv, ff) = (
        hp.hidden,
        hp.heads * hp.head_dim,
        hp.kv_heads * hp.head_dim,
        hp.ff,
    );
    const EMB: &str = "llama.embedding_length";
    const Q: &str = "llama.attention.head_count × head_dim, llama.embedding_length";
    const KV: &str = "llama.attention.head_count_kv × head_dim, llama.embedding_length";
    const FF: &str = "llama.feed_forward_length, llama.embedding_length";
    match role {
        Role::Embed | Role::Head => (
            vec![hp.vocab, h],
            "number of tokens (tokenizer.ggml.tokens), llama.embedding_length",
        ),
        Role::FinalNorm => (vec![h], EMB),
        Role::Block { part, bias, .. } => {
            let (shape, keys): (Vec<usize>, _) = match part {
                Part::AttnNorm | Part::FfnNorm => (vec![h], EMB),
                Part::Q => (vec![q, h], Q),
                Part::K | Part::V => (vec![kv, h], KV),
                Part::O => (
                    vec![h, q],
                    "llama.embedding_length, llama.attention.head_count × head_dim",
                ),
                Part::Gate | Part::Up => (vec![ff, h], FF),
                Part::Down => (
                    vec![h, ff],
                    "llama.embedding_length, llama.feed_forward_length",
                ),
            };
            if bias {
                (vec![shape[0]], keys)
            } else {
                (shape, keys)
            }
        }
    }
}

/// llama.cpp's converter's permutation of q or k rows for its interleaved rotary:
/// `w.reshape(n_head, 2, rows / n_head / 2, cols).swapaxes(1, 2).reshape(rows, cols)`
/// (a bias is a single column).
pub fn permute(w: &Tensor, n_head: usize) -> Result<Tensor> {
    let (rows, cols) = rows_cols(w)?;
    ensure!(
        n_head > 0 && rows % (2 * n_head) == 0,
        "{rows} rows do not split into {n_head} heads of an even size"
    );
    Ok(w.reshape((n_head, 2, rows / n_head / 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape(w.shape())?)
}

/// The inverse of [`permute`]: transformers' row order (each head's first half of
/// rotary pairs, then its second half) from llama.cpp's (pairs interleaved).
pub fn unpermute(w: &Tensor, n_head: usize) -> Result<Tensor> {
    let (rows, cols) = rows_cols(w)?;
    ensure!(
        n_head > 0 && rows % (2 * n_head) == 0,
        "{rows} rows do not split into {n_head} heads of an even size"
    );
    Ok(w.reshape((n_head, rows / n_head / 2, 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape(w.shape())?)
}

fn rows_cols(w: &Tensor) -> Result<(usize, usize)> {
    match *w.dims() {
        [r] => Ok((r, 1)),
        [r, c] => Ok((r, c)),
        ref d => Err(anyhow!("expected a matrix or a vector, got shape {d:?}")),
    }
}

/// Dequantizes a tensor's data to f32, shaped `shape` (row-major). The length of `raw`
/// is checked against the shape and type first: candle reads the blocks through a raw
/// pointer and would read past a short slice.
pub fn dequantize(ty: TensorType, raw: &[u8], shape: &[usize]) -> Result<Tensor> {
    let (block, bytes) = ty.layout().ok_or_else(|| unsupported(ty))?;
    let dtype = ty.candle().ok_or_else(|| unsupported(ty))?;
    let elems = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| anyhow!("shape {shape:?} overflows"))?;
    let (block, bytes) = (block as usize, bytes as usize);
    let last = shape.last().copied().unwrap_or(1);
    ensure!(
        elems > 0 && last % block == 0,
        "rows of {last} elements are not a whole number of {ty} blocks of {block}"
    );
    let want = elems / block * bytes;
    ensure!(
        raw.len() == want,
        "{} bytes of data where shape {shape:?} in {ty} needs {want}",
        raw.len()
    );
    let t = match ty {
        // Plain floats: decoded here, exactly, without reinterpreting memory.
        TensorType::F32 => Tensor::from_vec(
            raw.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<_>>(),
            shape,
            &Device::Cpu,
        )?,
        TensorType::Bf16 => Tensor::from_vec(
            raw.chunks_exact(2)
                .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
                .collect::<Vec<_>>(),
            shape,
            &Device::Cpu,
        )?,
        _ => {
            // candle views the bytes as blocks of f16 fields: hand it a buffer aligned for
            // them (a Vec<u8> slice at an odd offset would not be).
            let aligned = AlignedBytes::copy_of(raw);
            candle_core::quantized::ggml_file::qtensor_from_ggml(
                dtype,
                aligned.as_bytes(),
                shape.to_vec(),
                &Device::Cpu,
            )?
            .dequantize(&Device::Cpu)?
        }
    };
    Ok(t.to_dtype(DType::F32)?)
}

fn unsupported(ty: TensorType) -> anyhow::Error {
    anyhow!(
        "type {ty} is not supported ({} are)",
        super::reader::SUPPORTED_TYPES
    )
}

/// Bytes in 8-byte-aligned storage.
struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    fn copy_of(raw: &[u8]) -> Self {
        let words = raw
            .chunks(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..c.len()].copy_from_slice(c);
                u64::from_ne_bytes(b)
            })
            .collect();
        Self {
            words,
            len: raw.len(),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialized bytes (8 per word, `len`
        // rounded up), any byte is a valid u8, and the slice borrows `self`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }
}

/// A tensor's transformers name and f32 values: dequantized, shaped, q and k rows
/// unpermuted.
pub fn convert(
    info: &TensorInfo,
    role: Role,
    raw: &[u8],
    hp: &Hparams,
) -> Result<(String, Tensor)> {
    let shape: Vec<usize> = info
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()?;
    let t = dequantize(info.ty, raw, &shape)?;
    let t = match role {
        Role::Block { part: Part::Q, .. } => unpermute(&t, hp.heads)?,
        Role::Block { part: Part::K, .. } => unpermute(&t, hp.kv_heads)?,
        _ => t,
    };
    Ok((hf_name(role), t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        for (g, h) in [
            ("token_embd.weight", "model.embed_tokens.weight"),
            ("output.weight", "lm_head.weight"),
            ("output_norm.weight", "model.norm.weight"),
            (
                "blk.0.attn_norm.weight",
                "model.layers.0.input_layernorm.weight",
            ),
            (
                "blk.12.attn_q.weight",
                "model.layers.12.self_attn.q_proj.weight",
            ),
            ("blk.1.attn_k.bias", "model.layers.1.self_attn.k_proj.bias"),
            (
                "blk.1.attn_output.weight",
                "model.layers.1.self_attn.o_proj.weight",
            ),
            (
                "blk.2.ffn_norm.weight",
                "model.layers.2.post_attention_layernorm.weight",
            ),
            (
                "blk.2.ffn_down.weight",
                "model.layers.2.mlp.down_proj.weight",
            ),
        ] {
            let r = classify(g).unwrap();
            assert_eq!(hf_name(r), h);
            assert_eq!(gguf_name(r), g);
        }
        for bad in [
            "blk.03.attn_q.weight",
            "blk.+3.attn_q.weight",
            "blk.x.attn_q.weight",
            "blk.3.attn_q.scale",
            "blk.3.attn_norm.bias",
            "blk.3.ffn_gate_exps.weight",
            "rope_freqs.weight",
            "blk.3",
        ] {
            assert_eq!(classify(bad), None, "{bad}");
        }
    }

    #[test]
    fn unpermute_inverts_llama_cpp_permute_exactly() {
        let w = Tensor::arange(0f32, 8.0 * 3.0, &Device::Cpu)
            .unwrap()
            .reshape((8, 3))
            .unwrap();
        // Two heads of 4 rows: HF rows (0 1 | 2 3) become (0 2 1 3) in each head.
        let p = permute(&w, 2).unwrap();
        let rows: Vec<f32> = p.get_on_dim(1, 0).unwrap().to_vec1().unwrap();
        assert_eq!(rows, [0.0, 6.0, 3.0, 9.0, 12.0, 18.0, 15.0, 21.0]);
        let back = unpermute(&p, 2).unwrap();
        assert_eq!(back.to_vec2::<f32>().unwrap(), w.to_vec2::<f32>().unwrap());
        let b = Tensor::arange(0f32, 8.0, &Device::Cpu).unwrap();
        let back = unpermute(&permute(&b, 2).unwrap(), 2).unwrap();
        assert_eq!(back.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
        assert!(unpermute(&w, 3).is_err());
    }

    #[test]
    fn dequantize_checks_the_length_before_candle_reads() {
        let e = dequantize(TensorType::Q4_1, &[0u8; 19], &[32]).unwrap_err();
        assert!(format!("{e}").contains("19 bytes of data where shape [32] in Q4_1 needs 20"));
        let e = dequantize(TensorType::Q8_0, &[0u8; 34], &[2, 16]).unwrap_err();
        assert!(format!("{e}").contains("rows of 16 elements"));
        let e = dequantize(TensorType::Other(13, "Q5_K"), &[], &[256]).unwrap_err();
        assert!(format!("{e}").contains("type Q5_K is not supported"));
        // Unaligned input is copied before candle sees it.
        let mut raw = [0u8; 1 + 34];
        raw[1..3].copy_from_slice(&half_one());
        raw[3] = 2;
        let t = dequantize(TensorType::Q8_0, &raw[1..], &[32]).unwrap();
        assert_eq!(t.to_vec1::<f32>().unwrap()[0], 2.0);
    }

    /// 1.0 as a little-endian f16.
    fn half_one() -> [u8; 2] {
        0x3c00u16.to_le_bytes()
    }

    #[test]
    fn plain_floats_decode_exactly() {
        let v = [1.5f32, -2.25, 3.0e-8, f32::MAX];
        let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let t = dequantize(TensorType::F32, &raw, &[2, 2]).unwrap();
        assert_eq!(t.flatten_all().unwrap().to_vec1::<f32>().unwrap(), v);
        let raw: Vec<u8> = v
            .iter()
            .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let t = dequantize(TensorType::Bf16, &raw, &[4]).unwrap();
        assert_eq!(t.to_vec1::<f32>().unwrap()[..2], [1.5, -2.25]);
        let t = dequantize(TensorType::F16, &[0x00, 0x3c, 0x00, 0xc0], &[2]).unwrap();
        assert_eq!(t.to_vec1::<f32>().unwrap(), [1.0, -2.0]);
    }
}
