//! Trajectory pairs per task (ALGORITHMS.md §4.1): each verified success with each
//! failed attempt (`fail_contrast`), and the shortest success with each success at
//! least `detour_min_extra_steps` longer (`detour`). Caps per kind are applied after a
//! deterministic ordering, so the same dataset always yields the same pairs. The loc
//! side (failure or detour) can be restricted to some teachers (`loc_teachers`: the
//! recipe mines the SFT policy's own mistakes).

use super::config::MineConfig;
use super::pair::PairKind;
use crate::trajectory::TrajectorySummary;

/// What pairing needs to know of a trajectory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrajMeta {
    /// Record number in `trajectories.jsonl`.
    pub record: usize,
    pub id: String,
    pub attempt: u32,
    pub success: bool,
    pub steps: usize,
    /// Who acted (`TrajectorySummary::teacher`).
    pub teacher: String,
}

impl From<&TrajectorySummary> for TrajMeta {
    fn from(s: &TrajectorySummary) -> Self {
        TrajMeta {
            record: s.record,
            id: s.id.clone(),
            attempt: s.attempt,
            success: s.outcome.success,
            steps: s.step_count,
            teacher: s.teacher.clone(),
        }
    }
}

/// One trajectory pair to contrast: indices into the task's trajectory list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrajPair {
    pub kind: PairKind,
    pub success: usize,
    pub loc: usize,
}

/// Builds the capped pairs of one task. Successes are tried shortest first (the
/// cleanest reference), then by attempt and id; failures by attempt and id.
pub fn build_pairs(trajs: &[TrajMeta], cfg: &MineConfig) -> Vec<TrajPair> {
    let mut succ: Vec<usize> = (0..trajs.len())
        .filter(|&i| trajs[i].success && trajs[i].steps > 0)
        .collect();
    succ.sort_by(|&a, &b| {
        let (x, y) = (&trajs[a], &trajs[b]);
        (x.steps, x.attempt, &x.id).cmp(&(y.steps, y.attempt, &y.id))
    });
    let mut fail: Vec<usize> = (0..trajs.len())
        .filter(|&i| !trajs[i].success && trajs[i].steps > 0)
        .filter(|&i| cfg.accepts_loc(&trajs[i].teacher))
        .collect();
    fail.sort_by(|&a, &b| {
        let (x, y) = (&trajs[a], &trajs[b]);
        (x.attempt, &x.id).cmp(&(y.attempt, &y.id))
    });
    let mut out = Vec::new();
    'outer: for &s in &succ {
        for &f in &fail {
            if out.len() >= cfg.max_pairs_per_kind {
                break 'outer;
            }
            out.push(TrajPair {
                kind: PairKind::FailContrast,
                success: s,
                loc: f,
            });
        }
    }
    if let Some(&shortest) = succ.first() {
        let min = trajs[shortest].steps;
        let mut longer: Vec<usize> = succ[1..]
            .iter()
            .copied()
            .filter(|&i| trajs[i].steps >= min + cfg.detour_min_extra_steps)
            .filter(|&i| cfg.accepts_loc(&trajs[i].teacher))
            .collect();
        longer.sort_by(|&a, &b| {
            let (x, y) = (&trajs[a], &trajs[b]);
            (x.attempt, &x.id).cmp(&(y.attempt, &y.id))
        });
        out.extend(
            longer
                .into_iter()
                .take(cfg.max_pairs_per_kind)
                .map(|l| TrajPair {
                    kind: PairKind::Detour,
                    success: shortest,
                    loc: l,
                }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: &str, attempt: u32, success: bool, steps: usize) -> TrajMeta {
        TrajMeta {
            record: 0,
            id: id.into(),
            attempt,
            success,
            steps,
            teacher: "scripted-miniwob".into(),
        }
    }

    #[test]
    fn pairs_are_capped_and_ordered() {
        let trajs = vec![
            meta("a", 1, false, 5),
            meta("b", 2, true, 9),
            meta("c", 3, true, 6),
            meta("d", 4, false, 5),
            meta("e", 5, true, 7),
        ];
        let mut cfg = MineConfig::default();
        let p = build_pairs(&trajs, &cfg);
        let fc: Vec<_> = p
            .iter()
            .filter(|p| p.kind == PairKind::FailContrast)
            .map(|p| (p.success, p.loc))
            .collect();
        // shortest success (c) first, then e, against a and d; capped at 4
        assert_eq!(fc, vec![(2, 0), (2, 3), (4, 0), (4, 3)]);
        let det: Vec<_> = p
            .iter()
            .filter(|p| p.kind == PairKind::Detour)
            .map(|p| (p.success, p.loc))
            .collect();
        // b is 3 steps longer than c; e only 1
        assert_eq!(det, vec![(2, 1)]);
        cfg.max_pairs_per_kind = 1;
        assert_eq!(build_pairs(&trajs, &cfg).len(), 2);
    }

    #[test]
    fn loc_teachers_keep_only_those_teachers_failures_and_detours() {
        let policy = |mut m: TrajMeta| {
            m.teacher = "local:sft-reflection".into();
            m
        };
        let trajs = vec![
            meta("a", 1, false, 5),
            policy(meta("b", 1, false, 2)),
            meta("c", 1, true, 2),
            meta("d", 2, true, 6),
            policy(meta("e", 1, true, 5)),
        ];
        let mut cfg = MineConfig::from_toml("loc_teachers = [\"local:*\"]").unwrap();
        let pairs: Vec<_> = build_pairs(&trajs, &cfg)
            .iter()
            .map(|p| (p.kind, p.success, p.loc))
            .collect();
        // the teacher's failure (a) and detour (d) are not mined; its success (c) is
        // the reference for the policy's failure and detour
        assert_eq!(
            pairs,
            vec![
                (PairKind::FailContrast, 2, 1),
                (PairKind::FailContrast, 4, 1),
                (PairKind::FailContrast, 3, 1),
                (PairKind::Detour, 2, 4),
            ]
        );
        cfg.loc_teachers = vec!["local:sft-reflection".into()];
        assert_eq!(build_pairs(&trajs, &cfg).len(), 4);
        cfg.loc_teachers = vec!["local".into()];
        assert!(build_pairs(&trajs, &cfg).is_empty());
        let e = MineConfig::from_toml("loc_teachers = [\"*\"]").unwrap_err();
        assert!(format!("{e:#}").contains("loc_teachers"), "{e:#}");
    }
}
