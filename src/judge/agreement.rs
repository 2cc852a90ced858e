//! `judge eval`: verdicts against hand labels — accuracy, Cohen's kappa and the
//! confusion matrix, with every disagreement listed.

use super::verdicts::Verdict;
use crate::trajectory::import::{ImportError, read_input};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// One hand label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Label {
    pub trajectory_id: String,
    pub success: bool,
    /// One line on why.
    pub reason: String,
    /// The dataset the trajectory is in, for the reader (not used to match).
    #[serde(default)]
    pub dataset: Option<String>,
}

/// Reads a labels file (JSON Lines); errors name the line and field.
pub fn read_labels(path: &Path) -> Result<Vec<Label>, Vec<ImportError>> {
    let bytes = read_input(path, 64 << 20).map_err(|e| vec![e])?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match crate::trajectory::jsonl::parse_record::<Label>(line, path, i + 1) {
            Ok(l) => out.push(l),
            Err(e) => errors.push(ImportError {
                file: path.to_path_buf(),
                location: format!("line {}", i + 1),
                field: e.field,
                message: e.message,
            }),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// One label the judge disagreed with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disagreement {
    pub trajectory_id: String,
    pub label: bool,
    pub verdict: bool,
    pub label_reason: String,
    pub verdict_reasoning: String,
    /// The verdict's reasoning in one line ([`Verdict::summary`]).
    pub verdict_summary: String,
}

/// Agreement of verdicts with labels over the labelled trajectories that have one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Agreement {
    /// Labels compared.
    pub n: usize,
    pub accuracy: f64,
    /// Cohen's kappa (1 when both sides are constant and equal, 0 when constant
    /// and different).
    pub kappa: f64,
    /// `[[label success & verdict success, label success & verdict failure],
    ///   [label failure & verdict success, label failure & verdict failure]]`.
    pub confusion: [[usize; 2]; 2],
    pub disagreements: Vec<Disagreement>,
    /// Labelled trajectories with no verdict.
    pub missing: Vec<String>,
}

/// Compares `labels` with the standing verdicts.
pub fn agreement(labels: &[Label], verdicts: &HashMap<&str, &Verdict>) -> Agreement {
    let mut a = Agreement::default();
    for l in labels {
        let Some(v) = verdicts.get(l.trajectory_id.as_str()) else {
            a.missing.push(l.trajectory_id.clone());
            continue;
        };
        a.confusion[usize::from(!l.success)][usize::from(!v.success)] += 1;
        if l.success != v.success {
            a.disagreements.push(Disagreement {
                trajectory_id: l.trajectory_id.clone(),
                label: l.success,
                verdict: v.success,
                label_reason: l.reason.clone(),
                verdict_reasoning: v.reasoning.clone(),
                verdict_summary: v.summary(),
            });
        }
    }
    let c = a.confusion;
    a.n = c[0][0] + c[0][1] + c[1][0] + c[1][1];
    if a.n == 0 {
        return a;
    }
    a.accuracy = (c[0][0] + c[1][1]) as f64 / a.n as f64;
    a.kappa = crate::util::kappa::cohen_kappa(c).unwrap_or(0.0);
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::verdicts::test_verdict;

    fn label(id: &str, success: bool) -> Label {
        Label {
            trajectory_id: id.into(),
            success,
            reason: "why".into(),
            dataset: None,
        }
    }

    #[test]
    fn kappa_and_confusion_match_a_hand_count() {
        // 10 labels: 6 success, 4 failure; the judge says success on 5 of the
        // successes and 1 of the failures.
        let labels: Vec<Label> = (0..10).map(|i| label(&i.to_string(), i < 6)).collect();
        let vs: Vec<Verdict> = (0..10)
            .map(|i| test_verdict(&i.to_string(), i < 5 || i == 9))
            .collect();
        let standing: HashMap<&str, &Verdict> =
            vs.iter().map(|v| (v.trajectory_id.as_str(), v)).collect();
        let a = agreement(&labels, &standing);
        assert_eq!(a.confusion, [[5, 1], [1, 3]]);
        assert_eq!(a.n, 10);
        assert!((a.accuracy - 0.8).abs() < 1e-12);
        // po 0.8, pe 0.6*0.6 + 0.4*0.4 = 0.52: kappa 0.28/0.48.
        assert!((a.kappa - 0.28 / 0.48).abs() < 1e-12, "{}", a.kappa);
        assert_eq!(a.disagreements.len(), 2);

        let mut more = labels.clone();
        more.push(label("unjudged", true));
        assert_eq!(agreement(&more, &standing).missing, vec!["unjudged"]);
        // A judge that always says success agrees by chance only.
        let yes: Vec<Verdict> = (0..10)
            .map(|i| test_verdict(&i.to_string(), true))
            .collect();
        let standing: HashMap<&str, &Verdict> =
            yes.iter().map(|v| (v.trajectory_id.as_str(), v)).collect();
        let a = agreement(&labels, &standing);
        assert_eq!((a.accuracy, a.kappa), (0.6, 0.0));
    }
}
