//! The recipe as a list of units of work in dependency order, each with a key: the
//! hash of its config section and of its inputs' keys. Keys follow from the config
//! alone, so a changed section changes the key of its units and of everything
//! downstream, and nothing else.

use super::config::{RecipeConfig, Variant};
use anyhow::Result;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Bumped when a stage's outputs change meaning (every key changes with it).
pub const PLAN_VERSION: u32 = 1;

/// The stages, in order; `--stages` takes their names (and units' ids, `select`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    Model,
    EvalBase,
    Collect,
    Filter,
    Flatten,
    Sft,
    EvalSft,
    SftCollect,
    Mine,
    Rl,
    EvalRl,
    Report,
}

impl Stage {
    /// Every stage in order.
    pub const ALL: [Stage; 12] = [
        Stage::Model,
        Stage::EvalBase,
        Stage::Collect,
        Stage::Filter,
        Stage::Flatten,
        Stage::Sft,
        Stage::EvalSft,
        Stage::SftCollect,
        Stage::Mine,
        Stage::Rl,
        Stage::EvalRl,
        Stage::Report,
    ];

    /// The name `--stages` takes.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Model => "model",
            Stage::EvalBase => "eval-base",
            Stage::Collect => "collect",
            Stage::Filter => "filter",
            Stage::Flatten => "flatten",
            Stage::Sft => "sft",
            Stage::EvalSft => "eval-sft",
            Stage::SftCollect => "sft-collect",
            Stage::Mine => "mine",
            Stage::Rl => "rl",
            Stage::EvalRl => "eval-rl",
            Stage::Report => "report",
        }
    }

    /// One line on what the stage does.
    pub fn about(self) -> &'static str {
        match self {
            Stage::Model => "the pretrained base imported (a .gguf or a wheel) or cut ([model])",
            Stage::EvalBase => "the pretrained base zero-shot on the held-out seeds",
            Stage::Collect => "scripted teacher on the training seeds, with and without reflection",
            Stage::Filter => "quality filter of each collection",
            Stage::Flatten => "kept trajectories into SFT samples",
            Stage::Sft => "SFT on each collection (rmsweb train sft)",
            Stage::EvalSft => "both SFT policies on the held-out seeds",
            Stage::SftCollect => "the SFT policy on the training seeds, joining the mining pool",
            Stage::Mine => "critical-step pairs from the pool",
            Stage::Rl => "every RL variant × seed from the SFT checkpoint (rmsweb train rl)",
            Stage::EvalRl => "every RL policy on the held-out seeds",
            Stage::Report => "report.md, report.json and figures",
        }
    }
}

/// The two teacher collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arm {
    /// Retries carry a reflection (the recipe's collection).
    Reflection,
    /// Plain retries on the same seeds (the comparison baseline).
    Baseline,
}

impl Arm {
    pub const BOTH: [Arm; 2] = [Arm::Reflection, Arm::Baseline];

    pub fn name(self) -> &'static str {
        match self {
            Arm::Reflection => "reflection",
            Arm::Baseline => "baseline",
        }
    }
}

/// What a unit does.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    Model,
    EvalBase,
    Collect(Arm),
    Filter(Arm),
    Flatten(Arm),
    Sft(Arm),
    EvalSft(Arm),
    SftCollect,
    Mine,
    Rl { variant: Variant, seed: u64 },
    EvalRl { variant: Variant, seed: u64 },
    Report,
}

/// The run folder name of an RL variant and seed (`rl-dapo-s1`).
pub fn rl_run_name(v: &Variant, seed: u64) -> String {
    format!("rl-{}-s{seed}", v.name())
}

impl Work {
    /// The stage the unit belongs to.
    pub fn stage(&self) -> Stage {
        match self {
            Work::Model => Stage::Model,
            Work::EvalBase => Stage::EvalBase,
            Work::Collect(_) => Stage::Collect,
            Work::Filter(_) => Stage::Filter,
            Work::Flatten(_) => Stage::Flatten,
            Work::Sft(_) => Stage::Sft,
            Work::EvalSft(_) => Stage::EvalSft,
            Work::SftCollect => Stage::SftCollect,
            Work::Mine => Stage::Mine,
            Work::Rl { .. } => Stage::Rl,
            Work::EvalRl { .. } => Stage::EvalRl,
            Work::Report => Stage::Report,
        }
    }

    /// The unit's id: `stage` or `stage/what` (`rl/dapo/s1`).
    pub fn id(&self) -> String {
        let st = self.stage().name();
        match self {
            Work::Collect(a) | Work::Filter(a) | Work::Flatten(a) | Work::Sft(a) => {
                format!("{st}/{}", a.name())
            }
            Work::EvalSft(a) => format!("{st}/sft-{}", a.name()),
            Work::Rl { variant, seed } => format!("{st}/{}/s{seed}", variant.name()),
            Work::EvalRl { variant, seed } => format!("{st}/{}", rl_run_name(variant, *seed)),
            Work::Model | Work::EvalBase | Work::SftCollect | Work::Mine | Work::Report => {
                st.to_string()
            }
        }
    }
}

/// One unit of work.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub work: Work,
    pub id: String,
    /// Hash of the config the unit reads.
    pub config_hash: String,
    /// Ids of the units whose outputs it reads.
    pub inputs: Vec<String>,
    /// Hash of `config_hash` and the inputs' keys.
    pub key: String,
}

impl Unit {
    pub fn stage(&self) -> Stage {
        self.work.stage()
    }
}

/// Short hex SHA-256 of a value's canonical JSON (object keys sorted).
pub fn hash_of<T: Serialize>(v: &T) -> String {
    let value = serde_json::to_value(v).unwrap_or(serde_json::Value::Null);
    let bytes = serde_json::to_vec(&value).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

struct Planner {
    units: Vec<Unit>,
}

impl Planner {
    fn add<T: Serialize>(&mut self, work: Work, config: &T, inputs: &[String]) -> String {
        let id = work.id();
        let config_hash = hash_of(&serde_json::json!({ "unit": id, "config": config }));
        let input_keys: Vec<(String, String)> = inputs
            .iter()
            .map(|i| {
                let key = self
                    .units
                    .iter()
                    .find(|u| &u.id == i)
                    .map(|u| u.key.clone())
                    .unwrap_or_default();
                (i.clone(), key)
            })
            .collect();
        let key = hash_of(&serde_json::json!({
            "version": PLAN_VERSION,
            "config": config_hash,
            "inputs": input_keys,
        }));
        self.units.push(Unit {
            work,
            id: id.clone(),
            config_hash,
            inputs: inputs.to_vec(),
            key,
        });
        id
    }
}

/// Every unit of the recipe, in an order where inputs come first.
// Kept whole: it is the recipe's graph, stage by stage in pipeline order, and each
// unit's key and inputs are read beside the others'.
pub fn plan(cfg: &RecipeConfig) -> Result<Vec<Unit>> {
    let tasks = cfg.task_names();
    let mut p = Planner { units: Vec::new() };
    let mut sft_ids = Vec::new();
    let mut flatten_ids = Vec::new();
    let mut eval_ids = Vec::new();
    let mut collect_ids = Vec::new();
    // `parallel` changes how fast, not what: it is no part of a key.
    let mut eval_section = serde_json::to_value(&cfg.eval)?;
    if let Some(o) = eval_section.as_object_mut() {
        o.remove("parallel");
    }
    let eval_cfg =
        serde_json::json!({ "tasks": tasks, "eval": eval_section, "flatten": cfg.flatten });
    let base = cfg.base_model()?;
    // The base model's units; the SFT units read the model the `model` stage wrote.
    let mut base_inputs = Vec::new();
    if let Some(b) = &base {
        if b.needs_preparing() {
            base_inputs.push(p.add(Work::Model, b, &[]));
        }
        if cfg.model.zero_shot {
            let conf = serde_json::json!({ "eval": eval_cfg, "model": b });
            eval_ids.push(p.add(Work::EvalBase, &conf, &base_inputs));
        }
    }
    // Without a base the SFT key is the section's alone (as before `[model]`).
    let sft_conf = match &base {
        Some(b) => serde_json::json!({ "sft": cfg.sft, "model": b }),
        None => serde_json::to_value(&cfg.sft)?,
    };
    for arm in Arm::BOTH {
        let c = p.add(
            Work::Collect(arm),
            &serde_json::json!({ "tasks": tasks, "collect": cfg.collect, "arm": arm.name() }),
            &[],
        );
        let f = p.add(Work::Filter(arm), &cfg.filter, std::slice::from_ref(&c));
        let fl = p.add(Work::Flatten(arm), &cfg.flatten, &[f]);
        let mut inputs = vec![fl.clone()];
        inputs.extend(base_inputs.iter().cloned());
        let s = p.add(Work::Sft(arm), &sft_conf, &inputs);
        collect_ids.push(c);
        flatten_ids.push(fl);
        sft_ids.push(s);
    }
    for (arm, sft) in Arm::BOTH.into_iter().zip(&sft_ids) {
        eval_ids.push(p.add(Work::EvalSft(arm), &eval_cfg, std::slice::from_ref(sft)));
    }
    let pool = p.add(
        Work::SftCollect,
        &serde_json::json!({ "sft_collect": cfg.sft_collect, "flatten": cfg.flatten }),
        &[
            collect_ids[0].clone(),
            flatten_ids[0].clone(),
            sft_ids[0].clone(),
        ],
    );
    let mine = p.add(Work::Mine, &cfg.mine, std::slice::from_ref(&pool));
    // The RL section without the variant and seed lists: adding a variant or a seed
    // leaves the other runs' keys alone.
    let rl_common = serde_json::json!({
        "preset": cfg.rl.preset,
        "device": cfg.rl.device,
        "steps": cfg.rl.steps,
        "set": cfg.rl.set,
    });
    // The checkpoint choice is part of the RL evaluations only: changing it re-runs
    // them, not the training. Off, the key is the plain evaluation's (folders made
    // before the choice existed stay up to date).
    let eval_rl_cfg = if cfg.rl.validation.episodes == 0 {
        eval_cfg.clone()
    } else {
        serde_json::json!({ "eval": eval_cfg, "validation": cfg.rl.validation })
    };
    let mut rl_ids = Vec::new();
    for variant in cfg.variants()? {
        for &seed in &cfg.rl.seeds {
            let conf =
                serde_json::json!({ "rl": rl_common, "variant": variant.name(), "seed": seed });
            let r = p.add(
                Work::Rl { variant, seed },
                &conf,
                &[mine.clone(), sft_ids[0].clone()],
            );
            eval_ids.push(p.add(
                Work::EvalRl { variant, seed },
                &eval_rl_cfg,
                std::slice::from_ref(&r),
            ));
            rl_ids.push(r);
        }
    }
    let mut report_inputs = collect_ids;
    report_inputs.push(pool);
    report_inputs.push(mine);
    report_inputs.extend(rl_ids);
    report_inputs.extend(eval_ids);
    p.add(Work::Report, &serde_json::json!({}), &report_inputs);
    Ok(p.units)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> RecipeConfig {
        RecipeConfig::from_toml(&format!(
            "tasks = [\"click-button\"]\n[rl]\nvariants = [\"salvage-ds\", \"dapo+full-corpus\"]\nseeds = [1, 2]\n{extra}"
        ))
        .unwrap()
    }

    fn keys(units: &[Unit]) -> std::collections::BTreeMap<String, String> {
        units
            .iter()
            .map(|u| (u.id.clone(), u.key.clone()))
            .collect()
    }

    #[test]
    fn plan_lists_every_unit_with_inputs_first() {
        let units = plan(&cfg("")).unwrap();
        let ids: Vec<&str> = units.iter().map(|u| u.id.as_str()).collect();
        for id in [
            "collect/reflection",
            "collect/baseline",
            "filter/baseline",
            "flatten/reflection",
            "sft/baseline",
            "eval-sft/sft-reflection",
            "sft-collect",
            "mine",
            "rl/salvage-ds/s1",
            "rl/dapo+full-corpus/s2",
            "eval-rl/rl-dapo+full-corpus-s2",
            "report",
        ] {
            assert!(ids.contains(&id), "{id} missing from {ids:?}");
        }
        assert_eq!(units.len(), 8 + 2 + 2 + 4 * 2 + 1);
        for (i, u) in units.iter().enumerate() {
            for inp in &u.inputs {
                let j = ids.iter().position(|x| x == inp).unwrap();
                assert!(j < i, "{} comes before its input {inp}", u.id);
            }
        }
    }

    #[test]
    fn a_changed_section_changes_only_its_units_and_downstream() {
        let base = keys(&plan(&cfg("")).unwrap());
        assert_eq!(base, keys(&plan(&cfg("")).unwrap()), "keys are stable");
        let rl = keys(&plan(&cfg("[rl.set]\nlr = 0.0005\n")).unwrap());
        let changed: Vec<&String> = base.keys().filter(|k| base[*k] != rl[*k]).collect();
        assert!(
            changed
                .iter()
                .all(|k| k.starts_with("rl/") || k.starts_with("eval-rl/") || *k == "report"),
            "{changed:?}"
        );
        assert_eq!(changed.len(), 4 + 4 + 1);
        let filt = keys(&plan(&cfg("[filter]\nmax_effective_steps = 9\n")).unwrap());
        for k in ["collect/reflection", "collect/baseline"] {
            assert_eq!(base[k], filt[k]);
        }
        for k in [
            "filter/baseline",
            "sft/reflection",
            "mine",
            "rl/salvage-ds/s2",
            "report",
        ] {
            assert_ne!(base[k], filt[k], "{k}");
        }
        // The checkpoint choice changes the RL evaluations and the report only.
        let val = keys(&plan(&cfg("[rl.validation]\nepisodes = 2\n")).unwrap());
        let changed: Vec<&String> = base.keys().filter(|k| base[*k] != val[*k]).collect();
        assert!(
            changed
                .iter()
                .all(|k| k.starts_with("eval-rl/") || *k == "report"),
            "{changed:?}"
        );
        assert_eq!(changed.len(), 4 + 1);
        // The environment section is not part of any key.
        let env = keys(&plan(&cfg("[env]\nchromium = \"/opt/chrome\"\n")).unwrap());
        assert_eq!(base, env);
    }

    #[test]
    fn adding_a_seed_leaves_the_other_runs_alone() {
        let base = keys(&plan(&cfg("")).unwrap());
        let more = RecipeConfig::from_toml(
            "tasks = [\"click-button\"]\n[rl]\nvariants = [\"salvage-ds\", \"dapo+full-corpus\"]\nseeds = [1, 2, 3]\n",
        )
        .unwrap();
        let more = keys(&plan(&more).unwrap());
        assert_eq!(base["rl/salvage-ds/s1"], more["rl/salvage-ds/s1"]);
        assert!(more.contains_key("rl/salvage-ds/s3"));
        assert_ne!(base["report"], more["report"]);
    }

    #[test]
    fn a_base_model_adds_its_units_and_keys_the_sft_runs() {
        let base = keys(&plan(&cfg("")).unwrap());
        assert!(!base.contains_key("model") && !base.contains_key("eval-base"));
        let with = |model: &str| {
            let units = plan(&cfg(&format!(
                "[model]\n{model}\n[sft]\npreset = \"lora\"\n"
            )))
            .unwrap();
            let ids: Vec<String> = units.iter().map(|u| u.id.clone()).collect();
            (units, ids)
        };
        // A wheel is imported by the `model` unit, which the base evaluation and both
        // SFT runs read.
        let (units, ids) = with("source = \"/m/x.whl\"");
        assert_eq!(&ids[..2], ["model", "eval-base"]);
        for id in ["eval-base", "sft/reflection", "sft/baseline"] {
            let u = units.iter().find(|u| u.id == id).unwrap();
            assert!(u.inputs.contains(&"model".to_string()), "{id}");
        }
        // A folder is used in place: no `model` unit; zero_shot off: no eval-base.
        let (_, ids) = with("source = \"/m/folder\"\nzero_shot = false");
        assert!(!ids.contains(&"model".into()) && !ids.contains(&"eval-base".into()));
        // Cutting the model changes the SFT keys and everything downstream, not the
        // collection.
        let whole = keys(&with("source = \"/m/x.whl\"").0);
        let cut = keys(&with("source = \"/m/x.whl\"\nlayers = 2").0);
        for k in [
            "model",
            "eval-base",
            "sft/reflection",
            "rl/salvage-ds/s1",
            "report",
        ] {
            assert_ne!(whole[k], cut[k], "{k}");
        }
        assert_eq!(whole["collect/reflection"], cut["collect/reflection"]);
        assert_eq!(whole["flatten/baseline"], base["flatten/baseline"]);
    }

    #[test]
    fn the_teachers_wording_keys_the_collection_and_plain_keeps_old_keys() {
        let base = keys(&plan(&cfg("")).unwrap());
        // Spelled out, the default leaves every key as it was before the choice existed.
        assert_eq!(
            base,
            keys(&plan(&cfg("[collect]\nthinking = \"plain\"\n")).unwrap())
        );
        let progress = keys(&plan(&cfg("[collect]\nthinking = \"progress\"\n")).unwrap());
        let ledger = keys(&plan(&cfg("[collect]\nthinking = \"ledger\"\n")).unwrap());
        let checklist = keys(&plan(&cfg("[collect]\nthinking = \"checklist\"\n")).unwrap());
        let titled = keys(&plan(&cfg("[collect]\nthinking = \"titled\"\n")).unwrap());
        let headed = keys(&plan(&cfg("[collect]\nthinking = \"headed\"\n")).unwrap());
        for k in [
            "collect/reflection",
            "collect/baseline",
            "sft/reflection",
            "report",
        ] {
            let all = [
                &base[k],
                &progress[k],
                &ledger[k],
                &checklist[k],
                &titled[k],
                &headed[k],
            ];
            for (i, a) in all.iter().enumerate() {
                for b in &all[i + 1..] {
                    assert_ne!(a, b, "{k}");
                }
            }
        }
    }

    #[test]
    fn playing_episodes_side_by_side_is_no_part_of_any_key() {
        let base = keys(&plan(&cfg("")).unwrap());
        assert_eq!(base, keys(&plan(&cfg("[eval]\nparallel = 4\n")).unwrap()));
        assert_ne!(base, keys(&plan(&cfg("[eval]\nmax_steps = 4\n")).unwrap()));
    }
}
