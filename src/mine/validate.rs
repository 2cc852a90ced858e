//! `rmsweb validate`'s check of `mined/pairs.jsonl` and `mined/pairs.corrected.jsonl`.

use super::pair::MinedPair;
use crate::action::check::check_params;
use crate::trajectory::jsonl::JsonlFile;
use crate::trajectory::validate::{
    Finding, Known, Severity, StageCheck, ValidationReport, duplicate_keys, finding,
    from_record_error, line_of, torn,
};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The mined-pairs check: each record parses, ids are unique, both sides name a step
/// that exists, the actions' parameters are valid. Fills [`Known::pair_ids`].
pub struct PairsCheck;

impl StageCheck for PairsCheck {
    fn check(&self, root: &Path, known: &mut Known, report: &mut ValidationReport) {
        let pairs = root.join("mined").join("pairs.jsonl");
        known.pair_ids = check_pairs(&pairs, &known.steps_of, &mut report.findings);
        report.pairs = known.pair_ids.len();
        let corrected = root.join("mined").join("pairs.corrected.jsonl");
        if corrected.exists() {
            check_pairs(&corrected, &known.steps_of, &mut report.findings);
        }
    }
}

/// Checks one pair read from line `line` of `path`: both sides name a step that
/// exists, and both actions' parameters are well formed.
fn check_pair(
    p: &MinedPair,
    path: &Path,
    line: usize,
    steps_of: &HashMap<String, usize>,
    out: &mut Vec<Finding>,
) {
    for (side, r) in [("success", &p.success), ("loc", &p.loc)] {
        match steps_of.get(&r.trajectory) {
            None => out.push(finding(
                Severity::Error,
                path,
                line,
                &format!("{side}.trajectory"),
                format!("trajectory `{}` is not in trajectories.jsonl", r.trajectory),
            )),
            Some(&n) if r.step as usize >= n => out.push(finding(
                Severity::Error,
                path,
                line,
                &format!("{side}.step"),
                format!(
                    "step {} is past the end of trajectory `{}` ({n} steps)",
                    r.step, r.trajectory
                ),
            )),
            Some(_) => {}
        }
    }
    for (field, a) in [
        ("target_action", &p.target_action),
        ("loc_action", &p.loc_action),
    ] {
        if let Err(e) = check_params(a) {
            out.push(finding(
                Severity::Error,
                path,
                line,
                &format!("{field}.params.{}", e.key),
                e.message,
            ));
        }
    }
}

/// Checks a file of mined pairs: each record parses, ids are unique, and both sides
/// name a step that exists. Returns the pair ids read (empty if there is no file).
fn check_pairs(
    path: &Path,
    steps_of: &HashMap<String, usize>,
    out: &mut Vec<Finding>,
) -> HashSet<String> {
    let mut ids = HashSet::new();
    let file = match JsonlFile::open(path) {
        Ok(f) => f,
        Err(e) => {
            out.push(finding(
                Severity::Error,
                path,
                0,
                "(file)",
                format!("{e:#}"),
            ));
            return ids;
        }
    };
    torn(&file, out);
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for i in 0..file.len() {
        out.extend(duplicate_keys(&file, i));
        let line = line_of(&file, i);
        let p: MinedPair = match file.get(i) {
            Ok(p) => p,
            Err(e) => {
                out.push(from_record_error(e));
                continue;
            }
        };
        if let Some(first) = first_line.insert(p.id.clone(), line) {
            out.push(finding(
                Severity::Error,
                path,
                line,
                "id",
                format!("duplicate pair id `{}` (first on line {first})", p.id),
            ));
        }
        check_pair(&p, path, line, steps_of, out);
        ids.insert(p.id);
    }
    ids
}
