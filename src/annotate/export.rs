//! The corrected corpus and per-annotator counts.

use super::event::Op;
use super::fold::{Folded, Status};
use super::log::AnnotationLog;
use crate::mine::pair::{LabelSource, MinedPair};
use crate::trajectory::jsonl::JsonlFile;
use anyhow::{Context, bail};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportReport {
    pub out: PathBuf,
    /// Pairs read from `mined/pairs.jsonl`.
    pub pairs: usize,
    /// Pairs written (accepted + edited).
    pub exported: usize,
    pub accepted: usize,
    pub edited: usize,
    pub rejected: usize,
    pub pending: usize,
    /// Exported pairs whose category an annotator changed.
    pub relabelled: usize,
    /// Pairs left out because their annotators disagree and nobody settled it.
    pub conflicts: usize,
    /// Pairs whose conflict a reviewer settled (exported or rejected as settled).
    pub settled: usize,
}

/// The default output of an export: `D/mined/pairs.corrected.jsonl`.
pub fn default_export_path(root: &Path) -> PathBuf {
    root.join("mined").join("pairs.corrected.jsonl")
}

/// Writes the corrected corpus of the dataset at `root` to `out` atomically:
/// accepted and edited pairs, with the corrected target action applied and, when an
/// annotator relabelled the pair, `failure_mode = {category, confidence: 1.0,
/// source: "annotator"}`. Rejected, pending and unsettled conflicting pairs are left
/// out; a settled conflict follows the reviewer's word. A log event whose
/// value cannot be applied stops the export with its position.
pub fn export_corrected(root: &Path, out: &Path) -> anyhow::Result<ExportReport> {
    let (pairs, folded) = pairs_and_log(root)?;
    let mut report = ExportReport {
        out: out.to_path_buf(),
        pairs: pairs.len(),
        exported: 0,
        accepted: 0,
        edited: 0,
        rejected: 0,
        pending: 0,
        relabelled: 0,
        conflicts: 0,
        settled: 0,
    };
    let mut buf = Vec::new();
    for mut pair in pairs {
        let st = folded.state(&pair.id);
        if st.settled.is_some() {
            report.settled += 1;
        }
        match st.status {
            Status::Pending => report.pending += 1,
            Status::Conflict => report.conflicts += 1,
            Status::Rejected => report.rejected += 1,
            Status::Accepted | Status::Edited => {
                if st.status == Status::Accepted {
                    report.accepted += 1;
                } else {
                    report.edited += 1;
                }
                if let Some(t) = st.target {
                    pair.target_action = t;
                }
                if let Some(c) = st.category {
                    pair.failure_mode.category = c;
                    pair.failure_mode.confidence = 1.0;
                    pair.failure_mode.source = LabelSource::Annotator;
                    report.relabelled += 1;
                }
                serde_json::to_writer(&mut buf, &pair)?;
                buf.push(b'\n');
                report.exported += 1;
            }
        }
    }
    crate::util::fs::write_atomic(out, &buf)
        .with_context(|| format!("writing {}", out.display()))?;
    Ok(report)
}

/// The dataset's mined pairs and its annotation log folded; a dataset of another
/// schema version, missing pairs or a log event that cannot be applied are errors.
pub(super) fn pairs_and_log(root: &Path) -> anyhow::Result<(Vec<MinedPair>, Folded)> {
    // A dataset of another schema version is refused, as every reader does.
    crate::trajectory::store::read_meta(root)?;
    let pairs_path = root.join("mined").join("pairs.jsonl");
    if !pairs_path.exists() {
        bail!(
            "{}: no mined pairs (run `rmsweb mine` first)",
            pairs_path.display()
        );
    }
    let pairs: Vec<MinedPair> = JsonlFile::open(&pairs_path)?.all()?;
    let log = AnnotationLog::for_dataset(root);
    let folded = Folded::new(log.read()?);
    let problems = folded.problems();
    if !problems.is_empty() {
        bail!("{}: {}", log.path().display(), problems.join("; "));
    }
    Ok((pairs, folded))
}

/// Events per annotator and op: `{annotator: {op: n}}` (ops with no events left out).
pub fn counts(
    log: &AnnotationLog,
) -> anyhow::Result<BTreeMap<String, BTreeMap<&'static str, usize>>> {
    let mut out: BTreeMap<String, BTreeMap<&'static str, usize>> = BTreeMap::new();
    for e in log.read()? {
        *out.entry(e.annotator)
            .or_default()
            .entry(e.op.as_str())
            .or_default() += 1;
    }
    Ok(out)
}

/// Every op name, for tables that list zeros too.
pub fn op_names() -> impl Iterator<Item = &'static str> {
    Op::ALL.iter().map(|o| o.as_str())
}
