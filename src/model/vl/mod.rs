//! Vision-language (Qwen3-VL) support: image preprocessing for the vision tower.

pub mod preprocess;

pub use preprocess::{VlImageConfig, VlPixels, num_image_tokens, preprocess, smart_resize};
