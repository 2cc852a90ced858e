//! Vision-language (Qwen3-VL) support: image preprocessing, the vision tower, the text
//! decoder with multimodal rotary positions and DeepStack injection, and the two joined.

pub mod adapter;
mod bicubic;
pub mod checkpoint;
pub mod model;
pub mod mrope;
pub mod preprocess;
pub mod prompt;
pub mod text;
pub mod vision;

pub use checkpoint::{VlConfig, is_vl_config, is_vl_folder};
pub use model::{Qwen3Vl, VlCache, VlImages};
pub use mrope::{MropeLayout, MropePositions, VlTokenIds, rope_index};
pub use preprocess::{VlImageConfig, VlPixels, num_image_tokens, preprocess, smart_resize};
pub use text::{Deepstack, LANGUAGE_PREFIX, VlText, VlTextConfig};
pub use vision::{Gelu, VISUAL_PREFIX, VisionConfig, VisionModel};
