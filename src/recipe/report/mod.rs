//! The recipe's report: `report.md` (tables), `report.json` (the stable shape of
//! [`json`]) and PNG figures, all rendered from the files the stages wrote, so
//! `rmsweb recipe report --out DIR` can re-render them at any time. Inputs not
//! written yet are listed at the top of `report.md` and are `null` in the JSON.

pub mod data;
pub mod figures;
pub mod json;
pub mod markdown;
pub mod stats;
pub mod summary;

use super::layout::Layout;
use anyhow::Result;
use std::path::PathBuf;

/// Renders the report of the recipe folder; returns the files written.
pub fn render(layout: &Layout) -> Result<Vec<PathBuf>> {
    let inputs = data::load(layout)?;
    let analysis = summary::analyse(&inputs)?;
    let report = json::build(&analysis);
    let figures = figures::draw(&analysis, &inputs, &layout.figures())?;
    let (drawn, note) = match &figures {
        Ok(files) => (!files.is_empty(), None),
        Err(why) => (false, Some(why.as_str())),
    };
    let md = markdown::render(&analysis, &inputs, drawn, note);
    let write = crate::util::fs::write_atomic;
    write(&layout.report_md(), md.as_bytes())?;
    write(
        &layout.report_json(),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    let mut out = vec![layout.report_md(), layout.report_json()];
    if let Ok(files) = figures {
        out.extend(files);
    }
    Ok(out)
}
