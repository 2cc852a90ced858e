//! A GGUF header reader for untrusted files (GGUF v2 and v3, little-endian).
//!
//! Layout: magic `GGUF`, `u32` version, `u64` tensor count, `u64` key count; each key a
//! string (`u64` length + UTF-8 bytes), a `u32` value type and the value (an array is
//! a `u32` element type, a `u64` count and the elements; arrays may nest); then each
//! tensor's name, `u32` dimension count, the dimensions (`u64`, fastest axis first), its
//! `u32` ggml type and its `u64` offset inside the data section, which starts at the end
//! of the header rounded up to `general.alignment` (32 when absent).
//!
//! Every length is checked against the bytes left before anything is allocated, counts
//! and nesting are capped, shapes are multiplied with overflow checks, and tensors must
//! lie inside the file, aligned, without overlapping. Nothing here panics on any input:
//! a bad file is an `Err` naming the key or tensor (names cleaned of control
//! characters). candle's `gguf_file::Content::read` is not used: it panics on
//! `general.alignment = 0` and keeps the last of two tensors with the same name.

pub use super::tensor_type::{TensorInfo, TensorType};
use super::value::min_size;
pub use super::value::{Value, value_type, value_type_name};
use crate::util::sanitize::clean_line;
use anyhow::{Context, Result, anyhow, bail, ensure};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The alignment of tensor data when the file has no `general.alignment`.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The key that sets the alignment of tensor data.
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Most array elements one header may hold, all arrays together (a 256k-token
/// vocabulary with its merges, types and scores is about a million).
pub const MAX_ARRAY_ELEMENTS: u64 = 1 << 22;
/// Deepest nesting of arrays inside arrays.
pub const MAX_DEPTH: usize = 3;
/// Most dimensions of a tensor (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// Longest tensor name, in bytes (ggml itself allows 63).
pub const MAX_NAME_LEN: u64 = 256;

/// The ggml types this importer dequantizes.
pub const SUPPORTED_TYPES: &str = "F32, F16, BF16, Q8_0, Q4_0, Q4_1";

/// A parsed GGUF header.
#[derive(Debug, Clone)]
pub struct Gguf {
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    index: HashMap<String, usize>,
    /// Tensors in file order.
    pub tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    pub alignment: u64,
    /// Offset of the data section from the start of the file.
    pub data_start: u64,
    pub file_len: u64,
}

impl Gguf {
    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.metadata[i].1)
    }

    /// A tensor by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// Reads the header of `path`. Errors start with the file's name.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_as(path, &clean_line(&path.display().to_string()))
    }

    /// Reads the header of `path`; errors start with `file` (e.g. `WHEEL (MEMBER)` for
    /// a temporary copy of a wheel's member).
    pub fn open_as(path: &Path, file: &str) -> Result<Self> {
        let f = std::fs::File::open(path).with_context(|| format!("{file}: opening"))?;
        let len = f
            .metadata()
            .with_context(|| format!("{file}: reading its size"))?
            .len();
        Self::read(std::io::BufReader::new(f), len).map_err(|e| anyhow!("{file}: {e:#}"))
    }

    /// Parses a header from `r`, a file of `len` bytes read from its start.
    pub fn read<R: Read>(r: R, len: u64) -> Result<Self> {
        let mut c = Cursor { r, pos: 0, len };
        parse(&mut c)
    }

    /// Reads a tensor's data (`size` bytes at `offset`) from the file it was parsed from.
    pub fn tensor_data<R: Read + Seek>(&self, f: &mut R, t: &TensorInfo) -> Result<Vec<u8>> {
        let size = t
            .size
            .ok_or_else(|| anyhow!("type {} is not supported ({SUPPORTED_TYPES} are)", t.ty))?;
        let n = usize::try_from(size).context("tensor too large for this machine")?;
        f.seek(SeekFrom::Start(t.offset))
            .context("seeking to its data")?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(n)
            .map_err(|e| anyhow!("allocating {n} bytes: {e}"))?;
        buf.resize(n, 0);
        f.read_exact(&mut buf)
            .with_context(|| format!("reading {n} bytes at offset {}", t.offset))?;
        Ok(buf)
    }
}

/// `name` quoted for a message, cleaned of control characters.
pub fn quoted(name: &str) -> String {
    format!("`{}`", clean_line(name))
}

struct Cursor<R> {
    r: R,
    pos: u64,
    len: u64,
}

impl<R: Read> Cursor<R> {
    fn left(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn need(&self, n: u64) -> Result<()> {
        ensure!(
            n <= self.left(),
            "truncated: {n} bytes needed at offset {}, the file has {} bytes",
            self.pos,
            self.len
        );
        Ok(())
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.need(N as u64)?;
        let mut b = [0u8; N];
        self.r
            .read_exact(&mut b)
            .with_context(|| format!("reading at offset {}", self.pos))?;
        self.pos += N as u64;
        Ok(b)
    }

    fn bytes(&mut self, n: u64) -> Result<Vec<u8>> {
        self.need(n)?;
        // `need` bounds n by the file's length, which fits in memory's address space on
        // any file that exists; try_reserve turns a failure into an error anyway.
        let n = usize::try_from(n).context("length too large for this machine")?;
        let mut b = Vec::new();
        b.try_reserve_exact(n)
            .map_err(|e| anyhow!("allocating {n} bytes: {e}"))?;
        b.resize(n, 0);
        self.r
            .read_exact(&mut b)
            .with_context(|| format!("reading at offset {}", self.pos))?;
        self.pos += n as u64;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.fixed()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.fixed()?))
    }

    fn string(&mut self) -> Result<String> {
        let n = self.u64().context("string length")?;
        let b = self.bytes(n).context("string bytes")?;
        String::from_utf8(b).map_err(|e| {
            anyhow!(
                "string of {n} bytes is not valid UTF-8 (byte {})",
                e.utf8_error().valid_up_to()
            )
        })
    }

    fn value(&mut self, code: u32, depth: usize, budget: &mut u64) -> Result<Value> {
        Ok(match code {
            value_type::U8 => Value::U8(u8::from_le_bytes(self.fixed()?)),
            value_type::I8 => Value::I8(i8::from_le_bytes(self.fixed()?)),
            value_type::U16 => Value::U16(u16::from_le_bytes(self.fixed()?)),
            value_type::I16 => Value::I16(i16::from_le_bytes(self.fixed()?)),
            value_type::U32 => Value::U32(self.u32()?),
            value_type::I32 => Value::I32(i32::from_le_bytes(self.fixed()?)),
            value_type::F32 => Value::F32(f32::from_le_bytes(self.fixed()?)),
            value_type::BOOL => match u8::from_le_bytes(self.fixed()?) {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => bail!("bool byte is {b}, not 0 or 1"),
            },
            value_type::STRING => Value::String(self.string()?),
            value_type::U64 => Value::U64(self.u64()?),
            value_type::I64 => Value::I64(i64::from_le_bytes(self.fixed()?)),
            value_type::F64 => Value::F64(f64::from_le_bytes(self.fixed()?)),
            value_type::ARRAY => {
                ensure!(
                    depth < MAX_DEPTH,
                    "arrays nested deeper than {MAX_DEPTH} levels"
                );
                let elem = self.u32().context("array element type")?;
                let Some(min) = min_size(elem) else {
                    bail!("array of unknown value type {elem}");
                };
                let count = self.u64().context("array length")?;
                ensure!(
                    count <= self.left() / min,
                    "array of {count} {} elements cannot fit in the {} bytes left",
                    value_type_name(elem),
                    self.left()
                );
                ensure!(
                    count <= *budget,
                    "more than {MAX_ARRAY_ELEMENTS} array elements in the header"
                );
                *budget -= count;
                let mut items = Vec::new();
                for i in 0..count {
                    let v = self
                        .value(elem, depth + 1, budget)
                        .with_context(|| format!("element {i}"))?;
                    items.push(v);
                }
                Value::Array(elem, items)
            }
            other => bail!("unknown value type {other}"),
        })
    }
}

fn parse<R: Read>(c: &mut Cursor<R>) -> Result<Gguf> {
    let version = read_version(c)?;
    let tensor_count = c.u64().context("tensor count")?;
    let kv_count = c.u64().context("key count")?;
    // A key takes at least 13 bytes (empty name, type, one-byte value); a tensor at least
    // 32 (empty name, one dimension, type, offset).
    ensure!(
        kv_count <= c.left() / 13,
        "the header says {kv_count} keys, more than the {} bytes left can hold",
        c.left()
    );
    ensure!(
        tensor_count <= c.left() / 32,
        "the header says {tensor_count} tensors, more than the {} bytes left can hold",
        c.left()
    );
    let (metadata, index) = read_metadata(c, kv_count)?;
    let alignment = alignment_of(&metadata, &index)?;
    let (mut tensors, tensor_index) = read_tensor_infos(c, tensor_count, alignment)?;
    let data_start = c
        .pos
        .checked_next_multiple_of(alignment)
        .ok_or_else(|| anyhow!("data section offset overflows"))?;
    let file_len = c.len;
    place_tensors(&mut tensors, data_start, file_len)?;
    Ok(Gguf {
        version,
        metadata,
        index,
        tensors,
        tensor_index,
        alignment,
        data_start,
        file_len,
    })
}

/// The magic and a supported version (2 or 3, little-endian).
fn read_version<R: Read>(c: &mut Cursor<R>) -> Result<u32> {
    let magic: [u8; 4] = c.fixed().context("magic")?;
    ensure!(
        magic == MAGIC,
        "not a GGUF file (it starts with bytes {magic:02x?}, not `GGUF`)"
    );
    let version = c.u32().context("version")?;
    match version {
        2 | 3 => Ok(version),
        1 => bail!("GGUF version 1 is not supported (versions 2 and 3 are)"),
        v if matches!(v.swap_bytes(), 1..=3) => {
            bail!(
                "a big-endian GGUF file (version {}) is not supported",
                v.swap_bytes()
            )
        }
        v => bail!("unknown GGUF version {v} (versions 2 and 3 are supported)"),
    }
}

/// The metadata in file order (as [`Gguf::metadata`] holds it).
type Metadata = Vec<(String, Value)>;

/// The metadata in file order, and each key's position; a key twice is refused.
fn read_metadata<R: Read>(
    c: &mut Cursor<R>,
    kv_count: u64,
) -> Result<(Metadata, HashMap<String, usize>)> {
    let mut budget = MAX_ARRAY_ELEMENTS;
    let mut metadata: Vec<(String, Value)> = Vec::new();
    let mut index = HashMap::new();
    for i in 0..kv_count {
        let key = c
            .string()
            .with_context(|| format!("key #{i} (of {kv_count}): its name"))?;
        let ctx = || format!("key {}", quoted(&key));
        let code = c.u32().with_context(|| format!("{}: value type", ctx()))?;
        let value = c.value(code, 0, &mut budget).with_context(ctx)?;
        if index.insert(key.clone(), metadata.len()).is_some() {
            bail!("key {} appears twice", quoted(&key));
        }
        metadata.push((key, value));
    }
    Ok((metadata, index))
}

/// `general.alignment`, a positive power of two (32 when absent).
fn alignment_of(metadata: &[(String, Value)], index: &HashMap<String, usize>) -> Result<u64> {
    let Some(v) = index.get(ALIGNMENT_KEY).map(|&i| &metadata[i].1) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let a = v.as_u64().ok_or_else(|| {
        anyhow!(
            "key `{ALIGNMENT_KEY}`: expected an unsigned integer, found {}",
            v.describe()
        )
    })?;
    ensure!(
        a > 0 && a.is_power_of_two(),
        "key `{ALIGNMENT_KEY}` is {a}; it must be a positive power of two"
    );
    Ok(a)
}

/// The tensor infos in file order (offsets relative to the data section), and each
/// name's position; an empty, overlong or repeated name is refused.
fn read_tensor_infos<R: Read>(
    c: &mut Cursor<R>,
    tensor_count: u64,
    alignment: u64,
) -> Result<(Vec<TensorInfo>, HashMap<String, usize>)> {
    let mut tensors: Vec<TensorInfo> = Vec::new();
    let mut tensor_index = HashMap::new();
    for i in 0..tensor_count {
        let name = c
            .string()
            .with_context(|| format!("tensor #{i} (of {tensor_count}): its name"))?;
        let ctx = || format!("tensor {}", quoted(&name));
        ensure!(
            !name.is_empty() && name.len() as u64 <= MAX_NAME_LEN,
            "tensor #{i}: a name of {} bytes (1 to {MAX_NAME_LEN} allowed)",
            name.len()
        );
        let info = tensor_info(c, name.clone(), alignment).with_context(ctx)?;
        if tensor_index.insert(name.clone(), tensors.len()).is_some() {
            bail!("tensor {} appears twice", quoted(&name));
        }
        tensors.push(info);
    }
    Ok((tensors, tensor_index))
}

/// Makes the tensors' offsets absolute, and checks that each lies within the file and
/// that no two overlap.
fn place_tensors(tensors: &mut [TensorInfo], data_start: u64, file_len: u64) -> Result<()> {
    for t in tensors.iter_mut() {
        let rel = t.offset;
        t.offset = data_start
            .checked_add(rel)
            .ok_or_else(|| anyhow!("tensor {}: offset {rel} overflows", quoted(&t.name)))?;
        if let Some(size) = t.size {
            let end = t.offset.checked_add(size);
            ensure!(
                end.is_some_and(|e| e <= file_len),
                "tensor {}: its {size} bytes at offset {} (data section + {rel}) run past the \
                 end of the file ({file_len} bytes; truncated?)",
                quoted(&t.name),
                t.offset
            );
        }
    }
    let mut spans: Vec<(u64, u64, &str)> = tensors
        .iter()
        .filter_map(|t| t.size.map(|s| (t.offset, t.offset + s, t.name.as_str())))
        .filter(|&(a, b, _)| b > a)
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        let ((_, a_end, a), (b_start, _, b)) = (w[0], w[1]);
        ensure!(
            a_end <= b_start,
            "tensor {}: its data overlaps tensor {}'s",
            quoted(b),
            quoted(a)
        );
    }
    Ok(())
}

fn tensor_info<R: Read>(c: &mut Cursor<R>, name: String, alignment: u64) -> Result<TensorInfo> {
    let n_dims = c.u32().context("dimension count")?;
    ensure!(
        (1..=MAX_DIMS).contains(&n_dims),
        "{n_dims} dimensions (1 to {MAX_DIMS} allowed)"
    );
    let mut ne = Vec::new();
    let mut elements: u64 = 1;
    for d in 0..n_dims {
        let n = c.u64().with_context(|| format!("dimension {d}"))?;
        ensure!(n > 0, "dimension {d} is 0");
        elements = elements
            .checked_mul(n)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(|| anyhow!("dimensions {ne:?} × {n} overflow"))?;
        ne.push(n);
    }
    let code = c.u32().context("type")?;
    let ty = TensorType::from_code(code).ok_or_else(|| anyhow!("unknown ggml type {code}"))?;
    let offset = c.u64().context("offset")?;
    ensure!(
        offset.is_multiple_of(alignment),
        "offset {offset} is not a multiple of the alignment {alignment}"
    );
    let size = match ty.layout() {
        None => None,
        Some((block, bytes)) => {
            ensure!(
                ne[0].is_multiple_of(block),
                "its rows of {} elements are not a whole number of {ty} blocks of {block}",
                ne[0]
            );
            Some(
                (elements / block)
                    .checked_mul(bytes)
                    .ok_or_else(|| anyhow!("data size overflows"))?,
            )
        }
    };
    Ok(TensorInfo {
        name,
        ne,
        ty,
        offset,
        size,
    })
}

#[cfg(test)]
mod tests;
