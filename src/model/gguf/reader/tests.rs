use super::super::writer::GgufWriter;
use super::*;

fn parse_bytes(b: &[u8]) -> Result<Gguf> {
    Gguf::read(b, b.len() as u64)
}

fn err(b: &[u8]) -> String {
    format!("{:#}", parse_bytes(b).unwrap_err())
}

fn small() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", Value::String("llama".into()));
    w.kv(
        "tokenizer.ggml.tokens",
        Value::Array(
            value_type::STRING,
            vec![Value::String("a".into()), Value::String("b".into())],
        ),
    );
    w.tensor("a.weight", &[4, 2], TensorType::F32, vec![0; 32]);
    w.tensor("b.weight", &[32], TensorType::Q8_0, vec![1; 34]);
    w
}

#[test]
fn reads_what_the_writer_wrote() {
    let g = parse_bytes(&small().to_bytes()).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(
        g.get("general.architecture").unwrap().as_str(),
        Some("llama")
    );
    assert_eq!(
        g.get("tokenizer.ggml.tokens")
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let a = g.tensor("a.weight").unwrap();
    assert_eq!(a.shape(), vec![2, 4]);
    assert_eq!(a.size, Some(32));
    assert_eq!(a.offset % 32, 0);
    assert_eq!(g.tensor("b.weight").unwrap().size, Some(34));
}

#[test]
fn every_truncation_is_an_error_naming_what_was_cut() {
    let b = small().to_bytes();
    for cut in 0..b.len() {
        let e = err(&b[..cut]);
        assert!(
            e.contains("truncated") || e.contains("bytes left") || e.contains("past the end"),
            "cut at {cut}: {e}"
        );
    }
    let e = err(&b[..b.len() - 1]);
    assert!(
        e.contains("tensor `b.weight`") && e.contains("past the end"),
        "{e}"
    );
}

#[test]
fn alignment_must_be_a_positive_power_of_two() {
    for a in [0u32, 3, 48] {
        let mut w = small();
        w.kv(ALIGNMENT_KEY, Value::U32(a));
        let e = err(&w.to_bytes());
        assert!(e.contains("key `general.alignment` is"), "{e}");
    }
    let mut w = small();
    w.kv(ALIGNMENT_KEY, Value::String("x".into()));
    assert!(err(&w.to_bytes()).contains("expected an unsigned integer, found string"));
    let mut w = small();
    w.alignment = 64;
    w.kv(ALIGNMENT_KEY, Value::U32(64));
    let g = parse_bytes(&w.to_bytes()).unwrap();
    assert_eq!(g.alignment, 64);
    assert_eq!(g.data_start % 64, 0);
}

#[test]
fn duplicates_are_refused_by_name() {
    let mut w = small();
    w.kv("general.architecture", Value::String("llama".into()));
    assert!(err(&w.to_bytes()).contains("key `general.architecture` appears twice"));
    let mut w = small();
    w.tensor("a.weight", &[4], TensorType::F32, vec![0; 16]);
    assert!(err(&w.to_bytes()).contains("tensor `a.weight` appears twice"));
}

#[test]
fn bad_values_are_refused_by_key() {
    let mut w = small();
    w.raw_kv("x.flag", value_type::BOOL, vec![2]);
    assert!(err(&w.to_bytes()).contains("key `x.flag`: bool byte is 2"));
    let mut w = small();
    w.raw_kv("x.type", 13, vec![0; 8]);
    assert!(err(&w.to_bytes()).contains("key `x.type`: unknown value type 13"));
    let mut w = small();
    let mut s = 2u64.to_le_bytes().to_vec();
    s.extend([0xff, 0xfe]);
    w.raw_kv("x.s", value_type::STRING, s);
    assert!(err(&w.to_bytes()).contains("key `x.s`: string of 2 bytes is not valid UTF-8"));
    // An array claiming more elements than the file has bytes.
    let mut w = small();
    let mut a = value_type::U32.to_le_bytes().to_vec();
    a.extend(u64::MAX.to_le_bytes());
    w.raw_kv("x.a", value_type::ARRAY, a);
    assert!(err(&w.to_bytes()).contains("key `x.a`: array of 18446744073709551615 u32"));
    // Arrays nested too deep.
    let mut w = small();
    let mut v = Value::Array(value_type::U8, vec![]);
    for _ in 0..MAX_DEPTH {
        v = Value::Array(value_type::ARRAY, vec![v]);
    }
    w.kv("x.deep", v);
    assert!(err(&w.to_bytes()).contains("nested deeper"));
}

#[test]
fn control_characters_in_names_are_cleaned() {
    let mut w = small();
    w.kv("evil\u{1b}]0;title\u{7}.key", Value::U8(1));
    w.kv("evil\u{1b}]0;title\u{7}.key", Value::U8(1));
    let e = err(&w.to_bytes());
    assert!(
        !e.contains('\u{1b}') && e.contains("appears twice"),
        "{e:?}"
    );
}

#[test]
fn tensors_are_checked_for_shape_type_offset_and_overlap() {
    let mut w = small();
    w.tensor("z", &[16, 0], TensorType::F32, vec![]);
    assert!(err(&w.to_bytes()).contains("tensor `z`: dimension 1 is 0"));
    let mut w = small();
    w.tensor("z", &[1 << 32, 1 << 32], TensorType::F32, vec![]);
    assert!(err(&w.to_bytes()).contains("tensor `z`: dimensions"));
    let mut w = small();
    w.raw_tensor("z", &[4], 99, 0);
    assert!(err(&w.to_bytes()).contains("tensor `z`: unknown ggml type 99"));
    let mut w = small();
    w.tensor("z", &[16], TensorType::Q4_0, vec![0; 18]);
    assert!(err(&w.to_bytes()).contains("tensor `z`: its rows of 16 elements"));
    let mut w = small();
    w.raw_tensor("z", &[4], 0, 8);
    assert!(err(&w.to_bytes()).contains("tensor `z`: offset 8 is not a multiple of"));
    let mut w = small();
    w.raw_tensor("z", &[4], 0, 0);
    let e = err(&w.to_bytes());
    assert!(
        e.contains("its data overlaps tensor") && e.contains("`z`"),
        "{e}"
    );
    let mut w = small();
    w.raw_tensor("z", &[4], 0, 1 << 20);
    assert!(err(&w.to_bytes()).contains("tensor `z`: its 16 bytes"));
    // A type known by name only parses, without a size.
    let mut w = small();
    w.raw_tensor("q5k", &[256], 13, 1 << 20);
    let g = parse_bytes(&w.to_bytes()).unwrap();
    assert_eq!(g.tensor("q5k").unwrap().ty.name(), "Q5_K");
    assert_eq!(g.tensor("q5k").unwrap().size, None);
}

#[test]
fn header_refusals() {
    assert!(err(b"GGML\x03\0\0\0").contains("not a GGUF file"));
    let mut b = small().to_bytes();
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(err(&b).contains("version 1 is not supported"));
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(err(&b).contains("big-endian"));
    let mut b = small().to_bytes();
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(err(&b).contains("tensors, more than"));
    let mut b = small().to_bytes();
    b[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(err(&b).contains("keys, more than"));
    let mut w = small();
    w.version = 2;
    assert_eq!(parse_bytes(&w.to_bytes()).unwrap().version, 2);
}

#[test]
fn floats_keep_their_decimal_spelling() {
    assert_eq!(Value::F32(1e-5).as_f64(), Some(1e-5));
    assert_eq!(Value::F32(100000.0).as_f64(), Some(1e5));
    assert_eq!(Value::I32(-1).as_u64(), None);
    assert_eq!(Value::U64(u64::MAX).as_i64(), None);
}
