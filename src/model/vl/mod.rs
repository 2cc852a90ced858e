//! Vision-language (Qwen3-VL) support: image preprocessing and the vision tower.

pub mod preprocess;
pub mod vision;

pub use preprocess::{VlImageConfig, VlPixels, num_image_tokens, preprocess, smart_resize};
pub use vision::{Gelu, VISUAL_PREFIX, VisionConfig, VisionModel};
