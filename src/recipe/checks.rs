//! What the training stages need of their resolved trainer configs, checked when
//! `recipe.toml` loads rather than when the stage starts (after collection and SFT):
//! every number finite, rates and coefficients in their ranges. Errors name the
//! recipe key a value came from (`sft.set.lr`, or `sft.lr` for a preset's value)
//! and quote at most 200 bytes of it.

use anyhow::{Result, bail};
use serde::Serialize;

/// What a number must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Above 0.
    Positive,
    /// 0 or more.
    NonNegative,
    /// In 0..=1.
    Share,
    /// In 0..1 (a dropout of 1 would drop everything).
    Dropout,
}

impl Need {
    fn holds(self, v: f64) -> bool {
        match self {
            Need::Positive => v > 0.0,
            Need::NonNegative => v >= 0.0,
            Need::Share => (0.0..=1.0).contains(&v),
            Need::Dropout => (0.0..1.0).contains(&v),
        }
    }

    fn says(self) -> &'static str {
        match self {
            Need::Positive => "a number above 0",
            Need::NonNegative => "a number of at least 0",
            Need::Share => "a number from 0 to 1",
            Need::Dropout => "a number from 0 up to (not including) 1",
        }
    }
}

/// The SFT trainer's numbers and their ranges (dotted config keys).
pub const SFT_NEEDS: &[(&str, Need)] = &[
    ("lr", Need::Positive),
    ("weight_decay", Need::NonNegative),
    ("warmup_ratio", Need::Share),
    ("max_grad_norm", Need::NonNegative),
    ("lora.alpha", Need::Positive),
    ("lora.dropout", Need::Dropout),
];

/// The RL trainer's numbers and their ranges (dotted config keys).
pub const RL_NEEDS: &[(&str, Need)] = &[
    ("lr", Need::Positive),
    ("weight_decay", Need::NonNegative),
    ("warmup_ratio", Need::Share),
    ("max_grad_norm", Need::NonNegative),
    ("kl_coef", Need::NonNegative),
    ("salvage_coef", Need::NonNegative),
    ("eps_sigma", Need::NonNegative),
    ("r_comp", Need::Share),
    ("temperature", Need::Positive),
    ("lora.alpha", Need::Positive),
    ("lora.dropout", Need::Dropout),
];

/// The recipe key of trainer config key `dotted` in section `section` (`sft`,
/// `rl`): under `set` when the override table holds it, else the section's own.
pub fn recipe_key(section: &str, set: &toml::Table, dotted: &str) -> String {
    let mut t = set;
    let parts: Vec<&str> = dotted.split('.').collect();
    for (i, p) in parts.iter().enumerate() {
        match t.get(*p) {
            Some(toml::Value::Table(inner)) if i + 1 < parts.len() => t = inner,
            Some(_) if i + 1 == parts.len() => return format!("{section}.set.{dotted}"),
            _ => break,
        }
    }
    format!("{section}.{dotted}")
}

/// Checks a resolved trainer config: every float finite, each of `needs` in range.
pub fn check_trainer(
    section: &str,
    set: &toml::Table,
    cfg: &impl Serialize,
    needs: &[(&str, Need)],
) -> Result<()> {
    let value = toml::Value::try_from(cfg)?;
    let mut todo: Vec<(String, &toml::Value)> = vec![(String::new(), &value)];
    while let Some((at, v)) = todo.pop() {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let key = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    todo.push((key, v));
                }
            }
            toml::Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    todo.push((format!("{at}[{i}]"), v));
                }
            }
            toml::Value::Float(x) if !x.is_finite() => bail!(
                "key `{}`: {x} is not a finite number",
                recipe_key(section, set, &at)
            ),
            _ => {}
        }
    }
    for (dotted, need) in needs {
        let mut v = Some(&value);
        for p in dotted.split('.') {
            v = v.and_then(|v| v.get(p));
        }
        let x = match v {
            Some(toml::Value::Float(x)) => *x,
            Some(toml::Value::Integer(i)) => *i as f64,
            _ => continue,
        };
        if !need.holds(x) {
            bail!(
                "key `{}`: {x} is not {}",
                recipe_key(section, set, dotted),
                need.says()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Lora {
        alpha: f64,
        dropout: f32,
    }

    #[derive(Serialize)]
    struct Cfg {
        lr: f64,
        lora: Lora,
        steps: usize,
    }

    fn set(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn values_are_named_by_the_key_they_came_from() {
        let ok = Cfg {
            lr: 1e-3,
            lora: Lora {
                alpha: 32.0,
                dropout: 0.05,
            },
            steps: 3,
        };
        check_trainer("sft", &set(""), &ok, SFT_NEEDS).unwrap();
        let nan = Cfg { lr: f64::NAN, ..ok };
        let e = check_trainer("sft", &set("lr = nan"), &nan, SFT_NEEDS).unwrap_err();
        assert!(e.to_string().contains("key `sft.set.lr`: NaN"), "{e}");
        let drop = Cfg {
            lr: 1e-3,
            lora: Lora {
                alpha: 32.0,
                dropout: 1.0,
            },
            steps: 3,
        };
        let e = check_trainer("rl", &set("lora = { dropout = 1.0 }"), &drop, RL_NEEDS).unwrap_err();
        assert!(e.to_string().contains("key `rl.set.lora.dropout`"), "{e}");
        let e = check_trainer("rl", &set(""), &drop, RL_NEEDS).unwrap_err();
        assert!(e.to_string().contains("key `rl.lora.dropout`"), "{e}");
    }
}
