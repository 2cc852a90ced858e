//! A GGUF tensor's ggml type and its place in the file.

/// A tensor's ggml type: one of those this importer dequantizes, or another ggml type
/// known by name only (refused by name later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TensorType {
    F32,
    F16,
    Bf16,
    Q4_0,
    Q4_1,
    Q8_0,
    /// A ggml type this importer does not read: its code and name.
    Other(u32, &'static str),
}

impl TensorType {
    /// The type of a ggml type code (`ggml.h`'s `enum ggml_type`), `None` for a code
    /// ggml does not define (4 and 5 are types removed long ago, refused too).
    pub fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            8 => Self::Q8_0,
            30 => Self::Bf16,
            _ => {
                let name = match code {
                    6 => "Q5_0",
                    7 => "Q5_1",
                    9 => "Q8_1",
                    10 => "Q2_K",
                    11 => "Q3_K",
                    12 => "Q4_K",
                    13 => "Q5_K",
                    14 => "Q6_K",
                    15 => "Q8_K",
                    16 => "IQ2_XXS",
                    17 => "IQ2_XS",
                    18 => "IQ3_XXS",
                    19 => "IQ1_S",
                    20 => "IQ4_NL",
                    21 => "IQ3_S",
                    22 => "IQ2_S",
                    23 => "IQ4_XS",
                    24 => "I8",
                    25 => "I16",
                    26 => "I32",
                    27 => "I64",
                    28 => "F64",
                    29 => "IQ1_M",
                    31 => "Q4_0_4_4",
                    32 => "Q4_0_4_8",
                    33 => "Q4_0_8_8",
                    34 => "TQ1_0",
                    35 => "TQ2_0",
                    36 => "IQ4_NL_4_4",
                    37 => "IQ4_NL_4_8",
                    38 => "IQ4_NL_8_8",
                    39 => "MXFP4",
                    _ => return None,
                };
                Self::Other(code, name)
            }
        })
    }

    /// The ggml type code.
    pub fn code(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q8_0 => 8,
            Self::Bf16 => 30,
            Self::Other(code, _) => code,
        }
    }

    /// ggml's name of the type (`Q4_1`, `Q5_K`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::Bf16 => "BF16",
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q8_0 => "Q8_0",
            Self::Other(_, name) => name,
        }
    }

    /// Elements per block and bytes per block, for the types this importer reads.
    pub fn layout(self) -> Option<(u64, u64)> {
        Some(match self {
            Self::F32 => (1, 4),
            Self::F16 | Self::Bf16 => (1, 2),
            // f16 scale + 16 bytes of 4-bit values; f16 scale and min + 16 bytes;
            // f16 scale + 32 signed bytes (ggml-common.h).
            Self::Q4_0 => (32, 18),
            Self::Q4_1 => (32, 20),
            Self::Q8_0 => (32, 34),
            Self::Other(..) => return None,
        })
    }

    /// candle's name of the type, for [`candle_core::quantized`].
    pub fn candle(self) -> Option<candle_core::quantized::GgmlDType> {
        use candle_core::quantized::GgmlDType;
        Some(match self {
            Self::F32 => GgmlDType::F32,
            Self::F16 => GgmlDType::F16,
            Self::Bf16 => GgmlDType::BF16,
            Self::Q4_0 => GgmlDType::Q4_0,
            Self::Q4_1 => GgmlDType::Q4_1,
            Self::Q8_0 => GgmlDType::Q8_0,
            Self::Other(..) => return None,
        })
    }
}

impl std::fmt::Display for TensorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One tensor's header entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions as stored, fastest axis first (ggml's `ne`): the reverse of the
    /// row-major shape.
    pub ne: Vec<u64>,
    pub ty: TensorType,
    /// Byte offset of the data from the start of the file.
    pub offset: u64,
    /// Bytes of data, for the types this importer reads (`None` for the others).
    pub size: Option<u64>,
}

impl TensorInfo {
    /// The row-major shape (`ne` reversed): `[out, in]` for a matrix.
    pub fn shape(&self) -> Vec<u64> {
        self.ne.iter().rev().copied().collect()
    }

    /// Number of elements (checked not to overflow when read).
    pub fn elements(&self) -> u64 {
        self.ne.iter().product()
    }
}
