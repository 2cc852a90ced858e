//! Loading and saving Hugging Face safetensors checkpoints, single-file or sharded
//! (`model.safetensors.index.json`).

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// Whether `dir` holds model weights [`load_dir`] can read: a shard index or a single
/// `model.safetensors`.
pub fn has_weights(dir: &Path) -> bool {
    dir.join("model.safetensors.index.json").is_file() || dir.join("model.safetensors").is_file()
}

/// Loads every tensor of a model folder onto `device`: `model.safetensors.index.json`
/// with its shards when present, else `model.safetensors`.
pub fn load_dir(dir: impl AsRef<Path>, device: &Device) -> Result<HashMap<String, Tensor>> {
    let dir = dir.as_ref();
    let index = dir.join("model.safetensors.index.json");
    if index.exists() {
        let text = std::fs::read_to_string(&index)
            .with_context(|| format!("reading {}", index.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: invalid JSON", index.display()))?;
        let map = v
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| anyhow::anyhow!("{}: field `weight_map` missing", index.display()))?;
        let mut shards = BTreeSet::new();
        for (name, file) in map {
            let f = file.as_str().ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: field `weight_map.{name}` is not a string",
                    index.display()
                )
            })?;
            shards.insert(f.to_string());
        }
        let mut out = HashMap::new();
        for shard in shards {
            let path = crate::util::fs::resolve_inside(dir, &shard)
                .with_context(|| format!("{}: shard `{shard}`", index.display()))?;
            out.extend(load_file(&path, device)?);
        }
        for name in map.keys() {
            anyhow::ensure!(
                out.contains_key(name),
                "{}: tensor `{name}` is not in its shard",
                index.display()
            );
        }
        Ok(out)
    } else {
        let single = dir.join("model.safetensors");
        anyhow::ensure!(
            single.exists(),
            "{}: no model.safetensors nor model.safetensors.index.json",
            dir.display()
        );
        load_file(&single, device)
    }
}

/// Loads one safetensors file.
pub fn load_file(path: &Path, device: &Device) -> Result<HashMap<String, Tensor>> {
    candle_core::safetensors::load(path, device)
        .with_context(|| format!("reading safetensors {}", path.display()))
}

/// Saves tensors to `path` atomically (temporary file, then rename).
pub fn save_file(tensors: &HashMap<String, Tensor>, path: &Path) -> Result<()> {
    let tmp = path.with_extension("safetensors.tmp");
    let cpu: HashMap<String, Tensor> = tensors
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.to_device(&Device::Cpu)?.contiguous()?)))
        .collect::<candle_core::Result<_>>()?;
    candle_core::safetensors::save(&cpu, &tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

/// Saves tensors as shards of at most `max_shard_bytes` with an index file, the layout
/// HF uses for large models (`model-00001-of-00003.safetensors`).
pub fn save_sharded(
    tensors: &HashMap<String, Tensor>,
    dir: &Path,
    max_shard_bytes: usize,
) -> Result<()> {
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let mut shards: Vec<Vec<&String>> = vec![vec![]];
    let mut size = 0;
    for n in names {
        let bytes = tensors[n].elem_count() * tensors[n].dtype().size_in_bytes();
        if size + bytes > max_shard_bytes && shards.last().is_some_and(|s| !s.is_empty()) {
            shards.push(vec![]);
            size = 0;
        }
        size += bytes;
        if let Some(s) = shards.last_mut() {
            s.push(n);
        }
    }
    let count = shards.len();
    let mut weight_map = serde_json::Map::new();
    for (i, shard) in shards.iter().enumerate() {
        let file = format!("model-{:05}-of-{:05}.safetensors", i + 1, count);
        let part: HashMap<String, Tensor> = shard
            .iter()
            .map(|n| ((*n).clone(), tensors[*n].clone()))
            .collect();
        save_file(&part, &dir.join(&file))?;
        for n in shard {
            weight_map.insert((*n).clone(), file.clone().into());
        }
    }
    let index = serde_json::json!({"metadata": {}, "weight_map": weight_map});
    crate::util::fs::write_atomic(
        &dir.join("model.safetensors.index.json"),
        serde_json::to_string_pretty(&index)?.as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharded_roundtrip_equals_single() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = HashMap::new();
        for i in 0..5 {
            m.insert(
                format!("w{i}"),
                Tensor::arange(0f32, 100.0, &Device::Cpu).unwrap() * i as f64,
            );
        }
        let m: HashMap<String, Tensor> = m.into_iter().map(|(k, v)| (k, v.unwrap())).collect();
        save_sharded(&m, dir.path(), 900).unwrap();
        assert!(dir.path().join("model-00003-of-00003.safetensors").exists());
        let back = load_dir(dir.path(), &Device::Cpu).unwrap();
        assert_eq!(back.len(), 5);
        for (k, v) in &m {
            assert_eq!(
                back[k].to_vec1::<f32>().unwrap(),
                v.to_vec1::<f32>().unwrap()
            );
        }
        // A missing shard is reported by name.
        std::fs::remove_file(dir.path().join("model-00002-of-00003.safetensors")).unwrap();
        let e = format!("{:#}", load_dir(dir.path(), &Device::Cpu).unwrap_err());
        assert!(e.contains("model-00002-of-00003"), "{e}");
    }
}
