//! What `recipe run --stages` picks: whole stages by name (`sft`), or single units by
//! the id `recipe status` lists (`sft/baseline`, `rl/dapo/s1`), mixed freely. A unit
//! runs when its stage or its id is named; the others are left as they are.

use super::plan::{Stage, Unit};
use crate::util::sanitize::clean_line;
use anyhow::{Result, bail, ensure};

/// The stages and units a run is limited to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    stages: Vec<Stage>,
    units: Vec<String>,
}

impl Selection {
    /// Parses a comma-separated list of stage names and unit ids of `plan`.
    pub fn parse(list: &str, plan: &[Unit]) -> Result<Selection> {
        let mut sel = Selection {
            stages: Vec::new(),
            units: Vec::new(),
        };
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if let Some(st) = Stage::ALL.iter().find(|st| st.name() == word) {
                if !sel.stages.contains(st) {
                    sel.stages.push(*st);
                }
            } else if let Some(u) = plan.iter().find(|u| u.id == word) {
                if !sel.units.contains(&u.id) {
                    sel.units.push(u.id.clone());
                }
            } else {
                bail!(
                    "unknown stage or unit `{}` (stages: {}; units are named as \
                     `rmsweb recipe status` lists them, e.g. {})",
                    clean_line(word),
                    Stage::ALL.map(Stage::name).join(", "),
                    example_ids(plan)
                );
            }
        }
        ensure!(
            !sel.stages.is_empty() || !sel.units.is_empty(),
            "--stages: name at least one stage or unit"
        );
        Ok(sel)
    }

    /// Whether `unit` is to run when stale.
    pub fn picks(&self, unit: &Unit) -> bool {
        self.stages.contains(&unit.stage()) || self.units.contains(&unit.id)
    }
}

/// A few unit ids of the plan that name more than their stage.
fn example_ids(plan: &[Unit]) -> String {
    let ids: Vec<&str> = plan
        .iter()
        .map(|u| u.id.as_str())
        .filter(|id| id.contains('/'))
        .take(3)
        .collect();
    ids.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::RecipeConfig;
    use crate::recipe::plan::plan;

    fn units() -> Vec<Unit> {
        plan(&RecipeConfig::from_toml("tasks = [\"click-button\"]").unwrap()).unwrap()
    }

    #[test]
    fn stages_and_unit_ids_mix_in_one_list() {
        let plan = units();
        let sel =
            Selection::parse(" sft/baseline, report,eval-sft/sft-baseline,report", &plan).unwrap();
        let picked: Vec<&str> = plan
            .iter()
            .filter(|u| sel.picks(u))
            .map(|u| u.id.as_str())
            .collect();
        assert_eq!(
            picked,
            ["sft/baseline", "eval-sft/sft-baseline", "report"],
            "a stage picks all its units, an id only its own"
        );
        let all_rl = Selection::parse("rl", &plan).unwrap();
        let rl: Vec<&Unit> = plan.iter().filter(|u| all_rl.picks(u)).collect();
        assert!(rl.len() > 1 && rl.iter().all(|u| u.stage() == Stage::Rl));
    }

    #[test]
    fn unknown_words_and_empty_lists_are_refused() {
        let plan = units();
        let e = Selection::parse("sft/nothing", &plan)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`sft/nothing`")
                && e.contains("eval-sft")
                && e.contains("collect/reflection"),
            "{e}"
        );
        let e = Selection::parse("rl,tr\u{1b}[2Jain", &plan)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\u{1b}') && e.contains("ain"), "{e}");
        assert!(Selection::parse(" , ", &plan).is_err());
    }
}
