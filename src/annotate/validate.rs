//! `rmsweb validate`'s check of `annotations.jsonl`.

use super::{AnnotationEvent, Folded};
use crate::trajectory::jsonl::JsonlFile;
use crate::trajectory::validate::{
    Finding, Known, Severity, StageCheck, ValidationReport, duplicate_keys, finding,
    from_record_error, line_of, torn,
};
use std::collections::HashSet;
use std::path::Path;

/// The annotations check: each event parses, can be applied, and names a mined pair
/// (run after [`crate::mine::validate::PairsCheck`]).
pub struct AnnotationsCheck;

impl StageCheck for AnnotationsCheck {
    fn check(&self, root: &Path, known: &mut Known, report: &mut ValidationReport) {
        report.annotations = check_annotations(root, &known.pair_ids, &mut report.findings);
    }
}

/// Checks `annotations.jsonl`: each event parses, its value can be applied (what
/// `annotate export` needs), and it names a mined pair. Returns the number of events.
fn check_annotations(root: &Path, pair_ids: &HashSet<String>, out: &mut Vec<Finding>) -> usize {
    let path = root.join("annotations.jsonl");
    let file = match JsonlFile::open(&path) {
        Ok(f) => f,
        Err(e) => {
            out.push(finding(
                Severity::Error,
                &path,
                0,
                "(file)",
                format!("{e:#}"),
            ));
            return 0;
        }
    };
    torn(&file, out);
    let mut events = Vec::new();
    let mut lines = Vec::new();
    for i in 0..file.len() {
        out.extend(duplicate_keys(&file, i));
        let line = line_of(&file, i);
        match file.get::<AnnotationEvent>(i) {
            Ok(e) => {
                if !pair_ids.contains(&e.pair_id) {
                    out.push(finding(
                        Severity::Warning,
                        &path,
                        line,
                        "pair_id",
                        format!("pair `{}` is not in mined/pairs.jsonl", e.pair_id),
                    ));
                }
                if chrono::DateTime::parse_from_rfc3339(&e.ts).is_err() {
                    out.push(finding(
                        Severity::Warning,
                        &path,
                        line,
                        "ts",
                        format!("`{}` is not an RFC 3339 time", e.ts),
                    ));
                }
                events.push(e);
                lines.push(line);
            }
            Err(e) => out.push(from_record_error(e)),
        }
    }
    let n = events.len();
    for (k, message) in Folded::new(events).problem_events() {
        out.push(finding(
            Severity::Error,
            &path,
            lines.get(k).copied().unwrap_or(0),
            "value",
            message,
        ));
    }
    n
}
