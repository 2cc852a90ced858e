//! Loading, checking and resolving `recipe.toml`.

use super::*;
use crate::policy::format::PromptFormat;
use crate::train::rl::groups::Mode;

const MIN: &str = "tasks = [\"click-button\", \"miniwob:enter-text\"]\n";

fn err(text: &str) -> String {
    format!("{:#}", RecipeConfig::from_toml(text).unwrap_err())
}

#[test]
fn defaults_fill_every_section() {
    let c = RecipeConfig::from_toml(MIN).unwrap();
    assert_eq!(c.task_names(), vec!["click-button", "enter-text"]);
    assert_eq!(c.filter.min_effective_steps, 1);
    assert_eq!(c.collect.seeds, 60);
    assert_eq!(c.eval.seed_start, 10_000);
    assert_eq!(c.variants().unwrap().len(), 5);
    assert_eq!(c.rl.seeds, vec![1]);
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    let e = err(&format!("{MIN}[collect]\nseedz = 3\n"));
    assert!(e.contains("collect") && e.contains("seedz"), "{e}");
    let e = err(&format!("{MIN}bogus = 1\n"));
    assert!(e.contains("bogus"), "{e}");
    let e = err(&format!("{MIN}[collect]\nseeds = \"many\"\n"));
    assert!(e.contains("collect.seeds"), "{e}");
    let e = err(&format!("{MIN}[collect]\nmistake_rate = 2.0\n"));
    assert!(e.contains("collect.mistake_rate"), "{e}");
    let e = err("tasks = [\"book-flight\"]\n");
    assert!(e.contains("tasks[0]") && e.contains("book-flight"), "{e}");
    let e = err(&format!("{MIN}[mine]\nmin_scor = 0.1\n"));
    assert!(e.contains("mine") && e.contains("min_scor"), "{e}");
    let e = err(&format!("{MIN}[sft.set]\nepochz = 2\n"));
    assert!(e.contains("sft") && e.contains("epochz"), "{e}");
    let e = err(&format!("{MIN}[rl.set]\nn = 1\n"));
    assert!(e.contains("rl") && e.contains("`n`"), "{e}");
    let e = err(&format!("{MIN}[rl]\nvariants = [\"ppo\"]\n"));
    assert!(e.contains("rl.variants[0]") && e.contains("ppo"), "{e}");
    let e = err(&format!("{MIN}[rl]\nvariants = [\"dapo+all\"]\n"));
    assert!(e.contains("all"), "{e}");
    let e = err(&format!("{MIN}[collect]\nthinking = \"verbose\"\n"));
    assert!(
        e.contains("collect.thinking") && e.contains("progress"),
        "{e}"
    );
    let e = err(&format!("{MIN}[flatten]\nformat = \"echo\"\n"));
    assert!(
        e.contains("flatten.format") && e.contains("rmsweb-echo"),
        "{e}"
    );
}

#[test]
fn the_prompt_layout_is_chosen_once_for_samples_and_the_local_policy() {
    let c = RecipeConfig::from_toml(MIN).unwrap();
    assert_eq!(c.flatten.format, PromptFormat::Rmsweb);
    let c =
        RecipeConfig::from_toml(&format!("{MIN}[flatten]\nformat = \"rmsweb-echo\"\n")).unwrap();
    assert_eq!(c.flatten.format, PromptFormat::RmswebEcho);
}

#[test]
fn a_base_model_needs_a_lora_preset_and_parallel_is_bounded() {
    let e = err(&format!("{MIN}[model]\nsource = \"/m/x.gguf\"\n"));
    assert!(e.contains("sft.preset") && e.contains("tiny"), "{e}");
    let c = RecipeConfig::from_toml(&format!(
        "{MIN}[model]\nsource = \"/m/x.gguf\"\nlayers = 2\n[sft]\npreset = \"lora\"\n"
    ))
    .unwrap();
    let b = c.base_model().unwrap().unwrap();
    assert_eq!((b.is_file(), b.layers), (true, Some(2)));
    let e = err(&format!(
        "{MIN}[model]\nsource = \"/a.gguf\"\n[sft]\npreset = \"lora\"\nmodel = \"/b\"\n"
    ));
    assert!(e.contains("sft.model"), "{e}");
    for n in [0, 65] {
        let e = err(&format!("{MIN}[eval]\nparallel = {n}\n"));
        assert!(e.contains("eval.parallel"), "{e}");
    }
    let e = err(&format!("{MIN}[model]\nsourse = \"/m\"\n"));
    assert!(e.contains("sourse"), "{e}");
}

#[test]
fn evaluation_seeds_must_be_held_out() {
    let e = err(&format!(
        "{MIN}[collect]\nseeds = 20\nseed_start = 0\n[eval]\nseed_start = 15\nepisodes = 10\n"
    ));
    assert!(
        e.contains("eval.seed_start") && e.contains("overlap"),
        "{e}"
    );
    // Adjacent ranges are fine.
    RecipeConfig::from_toml(&format!(
        "{MIN}[collect]\nseeds = 20\n[eval]\nseed_start = 20\nepisodes = 10\n"
    ))
    .unwrap();
}

#[test]
fn validation_seeds_must_be_their_own() {
    // Off by default: nothing to check.
    let c = RecipeConfig::from_toml(MIN).unwrap();
    assert_eq!(c.rl.validation.episodes, 0);
    for (start, what) in [(5, "training"), (10_003, "held-out")] {
        let e = err(&format!(
            "{MIN}[rl.validation]\nepisodes = 4\nseed_start = {start}\n"
        ));
        assert!(
            e.contains("rl.validation.seed_start") && e.contains(what),
            "{e}"
        );
    }
    let c = RecipeConfig::from_toml(&format!(
        "{MIN}[rl.validation]\nepisodes = 4\nseed_start = 10010\n"
    ))
    .unwrap();
    assert_eq!(c.rl.validation.seed_start, 10_010);
    let e = err(&format!("{MIN}[rl.validation]\nepisode = 4\n"));
    assert!(e.contains("episode"), "{e}");
}

#[test]
fn overrides_become_set_arguments_and_reach_the_trainers() {
    let c = RecipeConfig::from_toml(&format!(
        "{MIN}[sft]\nsteps = 7\n[sft.set]\nepochs = 2\nlr = 0.001\n[rl]\nsteps = 3\nseeds = [4]\n[rl.set]\nn = 4\nlora = {{ r = 4 }}\n"
    ))
    .unwrap();
    assert_eq!(set_args(&c.sft.set), vec!["epochs=2", "lr=0.001"]);
    assert_eq!(set_args(&c.rl.set), vec!["lora.r=4", "n=4"]);
    let s = c.sft_config(Path::new("d"), None).unwrap();
    assert_eq!((s.max_steps, s.epochs, s.lr), (7, 2, 0.001));
    let v = Variant::parse("dapo+full-corpus").unwrap();
    assert_eq!(v.name(), "dapo+full-corpus");
    assert_eq!(
        (v.mode_arg(), v.prompts_arg()),
        ("dapo".into(), "full-corpus".into())
    );
    let r = c.rl_config(v, 4, Path::new("i"), Path::new("d")).unwrap();
    assert_eq!((r.steps, r.n, r.lora.r, r.seed), (3, 4, 4, 4));
    assert_eq!(r.mode, Mode::Dapo);
}
