//! GGUF metadata values: their types as the file codes them, and readers of each.

/// A metadata value. Arrays keep their element type (an empty one has no element to
/// tell it).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// Element type (a GGUF value-type code) and elements.
    Array(u32, Vec<Value>),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// GGUF value-type codes.
pub mod value_type {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

/// The name of a GGUF value-type code (`u32`, `string`, ...).
pub fn value_type_name(code: u32) -> &'static str {
    match code {
        value_type::U8 => "u8",
        value_type::I8 => "i8",
        value_type::U16 => "u16",
        value_type::I16 => "i16",
        value_type::U32 => "u32",
        value_type::I32 => "i32",
        value_type::F32 => "f32",
        value_type::BOOL => "bool",
        value_type::STRING => "string",
        value_type::ARRAY => "array",
        value_type::U64 => "u64",
        value_type::I64 => "i64",
        value_type::F64 => "f64",
        _ => "unknown",
    }
}

/// Fewest bytes one value of a type takes (its encoding without payload).
pub(super) fn min_size(code: u32) -> Option<u64> {
    Some(match code {
        value_type::U8 | value_type::I8 | value_type::BOOL => 1,
        value_type::U16 | value_type::I16 => 2,
        value_type::U32 | value_type::I32 | value_type::F32 => 4,
        value_type::U64 | value_type::I64 | value_type::F64 | value_type::STRING => 8,
        value_type::ARRAY => 12,
        _ => return None,
    })
}

impl Value {
    /// The GGUF value-type code of this value.
    pub fn type_code(&self) -> u32 {
        match self {
            Value::U8(_) => value_type::U8,
            Value::I8(_) => value_type::I8,
            Value::U16(_) => value_type::U16,
            Value::I16(_) => value_type::I16,
            Value::U32(_) => value_type::U32,
            Value::I32(_) => value_type::I32,
            Value::F32(_) => value_type::F32,
            Value::Bool(_) => value_type::BOOL,
            Value::String(_) => value_type::STRING,
            Value::Array(..) => value_type::ARRAY,
            Value::U64(_) => value_type::U64,
            Value::I64(_) => value_type::I64,
            Value::F64(_) => value_type::F64,
        }
    }

    /// What this value is, for messages: `u32`, `string`, `array of i32`.
    pub fn describe(&self) -> String {
        match self {
            Value::Array(t, _) => format!("array of {}", value_type_name(*t)),
            v => value_type_name(v.type_code()).to_string(),
        }
    }

    /// An integer value that is not negative, whatever its width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(x) => Some(x.into()),
            Value::U16(x) => Some(x.into()),
            Value::U32(x) => Some(x.into()),
            Value::U64(x) => Some(x),
            Value::I8(x) => u64::try_from(x).ok(),
            Value::I16(x) => u64::try_from(x).ok(),
            Value::I32(x) => u64::try_from(x).ok(),
            Value::I64(x) => u64::try_from(x).ok(),
            _ => None,
        }
    }

    /// An integer value of any width and sign.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(x) => Some(x.into()),
            Value::I16(x) => Some(x.into()),
            Value::I32(x) => Some(x.into()),
            Value::I64(x) => Some(x),
            Value::U8(x) => Some(x.into()),
            Value::U16(x) => Some(x.into()),
            Value::U32(x) => Some(x.into()),
            Value::U64(x) => i64::try_from(x).ok(),
            _ => None,
        }
    }

    /// A float value. An `f32` becomes the `f64` of its shortest decimal spelling
    /// (`1e-5` stays `1e-5`, not `9.999999747378752e-6`).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(x) => x.to_string().parse().ok(),
            Value::F64(x) => Some(x),
            _ => None,
        }
    }

    /// A string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// A bool value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The elements of an array value.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(_, v) => Some(v),
            _ => None,
        }
    }
}
