//! SFT exports for the trainers people use.
//!
//! - **LLaMA-Factory** (`sharegpt` formatting with OpenAI-style tags): one JSON array
//!   of `{"messages": [{"role", "content"}], "images": [...]}`. Every image is matched
//!   by an `<image>` placeholder in the text, put at the start of the user message that
//!   shows the state. Register it in `dataset_info.json` with
//!   [`llamafactory_dataset_info`].
//! - **ms-swift**: JSONL with the same `{"messages", "images"}` per line and the same
//!   `<image>` placeholders.
//!
//! Image paths are absolute, resolved inside the dataset root (a path that leaves it
//! is an error). A literal `<image>` in page text is defused (`<image >`) so the
//! placeholder count always equals the image count.

use super::flatten::Sample;
use crate::trajectory::Dataset;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;

/// The placeholder both trainers expect for an image.
pub const IMAGE_TOKEN: &str = "<image>";

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// LLaMA-Factory sharegpt JSON array.
    Llamafactory,
    /// ms-swift JSONL.
    Swift,
}

impl ExportFormat {
    /// Default output file name inside `sft/`.
    pub fn default_file(self) -> &'static str {
        match self {
            ExportFormat::Llamafactory => "llamafactory.json",
            ExportFormat::Swift => "swift.jsonl",
        }
    }
}

#[derive(Debug, Serialize)]
struct ExportMessage {
    role: String,
    content: String,
}

/// One exported record.
#[derive(Debug, Serialize)]
struct ExportRecord {
    messages: Vec<ExportMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<String>,
}

/// Counts of an export.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExportReport {
    pub records: usize,
    pub images: usize,
}

fn record(ds: &Dataset, s: &Sample) -> Result<ExportRecord> {
    let images = s
        .images
        .iter()
        .map(|rel| {
            let p = ds
                .resolve(rel)
                .with_context(|| format!("sample {}: image `{rel}`", s.id))?;
            let abs = p
                .canonicalize()
                .with_context(|| format!("sample {}: image {}", s.id, p.display()))?;
            Ok(abs.to_string_lossy().into_owned())
        })
        .collect::<Result<Vec<_>>>()?;
    let mut messages: Vec<ExportMessage> = s
        .messages
        .iter()
        .map(|m| ExportMessage {
            role: m.role.clone(),
            content: m.content.replace(IMAGE_TOKEN, "<image >"),
        })
        .collect();
    if !images.is_empty() {
        let user = messages
            .iter_mut()
            .rev()
            .find(|m| m.role == "user")
            .with_context(|| format!("sample {}: images but no user message", s.id))?;
        user.content = format!("{}{}", IMAGE_TOKEN.repeat(images.len()), user.content);
    }
    Ok(ExportRecord { messages, images })
}

/// Writes the samples in `format` to `out` (atomically). With `images` false the
/// export is text-only: no image paths and no placeholders (for text-only models).
pub fn export_sft(
    ds: &Dataset,
    samples: &[Sample],
    format: ExportFormat,
    out: &Path,
    images: bool,
) -> Result<ExportReport> {
    let records = samples
        .iter()
        .map(|s| {
            if images {
                record(ds, s)
            } else {
                let mut s = s.clone();
                s.images.clear();
                record(ds, &s)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let report = ExportReport {
        records: records.len(),
        images: records.iter().map(|r| r.images.len()).sum(),
    };
    let bytes = match format {
        ExportFormat::Llamafactory => serde_json::to_vec_pretty(&records)?,
        ExportFormat::Swift => {
            let mut buf = Vec::new();
            for r in &records {
                serde_json::to_writer(&mut buf, r)?;
                buf.push(b'\n');
            }
            buf
        }
    };
    crate::util::fs::write_atomic(out, &bytes)?;
    Ok(report)
}

/// The `dataset_info.json` entry that makes LLaMA-Factory read an export. The
/// `images` column is named only when the export holds images: LLaMA-Factory looks
/// up every column it is given (KeyError 'images' on a text-only export).
pub fn llamafactory_dataset_info(name: &str, file_name: &str, images: bool) -> serde_json::Value {
    let columns = if images {
        serde_json::json!({"messages": "messages", "images": "images"})
    } else {
        serde_json::json!({"messages": "messages"})
    };
    serde_json::json!({
        name: {
            "file_name": file_name,
            "formatting": "sharegpt",
            "columns": columns,
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
                "system_tag": "system"
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curate::flatten::{SampleKind, SampleMessage};

    #[test]
    fn literal_image_tokens_in_text_are_defused() {
        let d = tempfile::tempdir().unwrap();
        let ds = Dataset::create(d.path(), "t", "").unwrap();
        std::fs::create_dir_all(d.path().join("shots")).unwrap();
        std::fs::write(d.path().join("shots/0.png"), b"png").unwrap();
        let s = Sample {
            id: "t#0".into(),
            kind: SampleKind::Action,
            trajectory: "t".into(),
            step: 0,
            task_id: "task".into(),
            prompt_format: "v".into(),
            messages: vec![
                SampleMessage {
                    role: "user".into(),
                    content: "page says <image> here".into(),
                },
                SampleMessage {
                    role: "assistant".into(),
                    content: "{}".into(),
                },
            ],
            images: vec!["shots/0.png".into()],
        };
        let r = record(&ds, &s).unwrap();
        assert_eq!(r.messages[0].content, "<image>page says <image > here");
        assert!(Path::new(&r.images[0]).is_absolute());
        let mut escaping = s.clone();
        escaping.images = vec!["../outside.png".into()];
        assert!(record(&ds, &escaping).is_err());
    }

    #[test]
    fn dataset_info_names_the_images_column_only_for_exports_with_images() {
        let cols =
            |images| llamafactory_dataset_info("d", "f.json", images)["d"]["columns"].clone();
        assert_eq!(cols(true)["images"], "images");
        assert!(cols(false).get("images").is_none());
        assert_eq!(cols(false)["messages"], "messages");
    }
}
