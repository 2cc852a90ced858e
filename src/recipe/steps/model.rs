//! The `model` stage: the base model of `[model]` written into the recipe folder
//! (`model/`): a `.gguf` file or a wheel imported as a transformers folder (f32),
//! a folder or an import cut to its first `layers` blocks.

use super::{Ctx, Done};
use crate::model::gguf::OutDtype;
use crate::recipe::folder::clear;
use anyhow::{Context, Result};

/// Imports or cuts the base model into `model/`.
pub fn prepare(ctx: &Ctx<'_>) -> Result<Done> {
    let base = ctx
        .cfg
        .base_model()?
        .context("the model stage needs `[model] source`")?;
    let out = ctx.layout.model();
    clear(ctx.layout, &out)?;
    let src = &base.source;
    let shown = crate::util::sanitize::clean_line(&src.display().to_string()).into_owned();
    ctx.progress.say(&format!(
        "  model: {} {shown}{}",
        if base.is_file() {
            "importing"
        } else {
            "cutting"
        },
        base.layers
            .map(|n| format!(" to its first {n} blocks"))
            .unwrap_or_default()
    ));
    let mut summary = serde_json::json!({ "source": src.display().to_string() });
    if base.is_file() {
        let s = match base.layers {
            Some(n) => crate::model::cut::import_first_layers(src, &out, OutDtype::F32, n)?,
            None => crate::model::gguf::import(src, &out, OutDtype::F32)?,
        };
        summary["member"] = s.member.clone().into();
        summary["parameters"] = s.parameters.into();
        summary["source_layers"] = s.hparams.layers.into();
        summary["seconds"] = s.seconds.into();
    } else {
        let n = base
            .layers
            .context("a folder is used in place unless cut")?;
        anyhow::ensure!(
            src.join("config.json").is_file(),
            "key `model.source`: {shown} is neither a model folder (no config.json), a .gguf \
             file nor a wheel"
        );
        let folder = crate::util::new_folder::NewFolder::create(&out, "model-cut")?;
        crate::model::cut::first_layers(src, folder.path(), n)?;
        folder.finish()?;
    }
    summary["layers"] = base.layers.into();
    Ok(Done {
        outputs: vec![out.join("config.json"), out.join("model.safetensors")],
        summary,
    })
}
