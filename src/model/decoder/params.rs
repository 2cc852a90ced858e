//! [`Decoder`]'s parameters: its linear layers, LoRA adapters added, merged and
//! listed, the named parameters (trainable and frozen) and loading them by name.

use super::Decoder;
use crate::model::lora::{Linear, LoraConfig, Param};
use candle_core::{Result, Tensor, Var};
use std::collections::HashMap;

impl Decoder {
    fn linears_mut(&mut self) -> Vec<&mut Linear> {
        let mut v = Vec::new();
        for l in &mut self.layers {
            let a = &mut l.attn;
            let m = &mut l.mlp;
            v.extend([
                &mut a.q_proj,
                &mut a.k_proj,
                &mut a.v_proj,
                &mut a.o_proj,
                &mut m.gate_proj,
                &mut m.up_proj,
                &mut m.down_proj,
            ]);
        }
        v
    }

    /// Every linear layer, in HF order.
    pub fn linears(&self) -> Vec<&Linear> {
        let mut v = Vec::new();
        for l in &self.layers {
            let (a, m) = (&l.attn, &l.mlp);
            v.extend([
                &a.q_proj,
                &a.k_proj,
                &a.v_proj,
                &a.o_proj,
                &m.gate_proj,
                &m.up_proj,
                &m.down_proj,
            ]);
        }
        v
    }

    /// Attaches LoRA adapters to the target modules; returns how many were added.
    pub fn add_lora(&mut self, cfg: &LoraConfig, seed: u64) -> Result<usize> {
        self.add_lora_where(cfg, seed, |name| cfg.targets(name))
    }

    /// Attaches LoRA adapters to the linear layers named in `modules` (full paths,
    /// `model.layers.0.self_attn.q_proj`); returns how many were added.
    pub fn add_lora_to(
        &mut self,
        cfg: &LoraConfig,
        seed: u64,
        modules: &std::collections::BTreeSet<String>,
    ) -> Result<usize> {
        self.add_lora_where(cfg, seed, |name| modules.contains(name))
    }

    fn add_lora_where(
        &mut self,
        cfg: &LoraConfig,
        seed: u64,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<usize> {
        let key = self.dropout_key.clone();
        let mut n = 0;
        for lin in self.linears_mut() {
            if wanted(&lin.name) {
                lin.add_lora(cfg, seed, key.clone())?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Folds every adapter into its base weight.
    pub fn merge_lora(&mut self) -> Result<()> {
        for lin in self.linears_mut() {
            lin.merge()?;
        }
        Ok(())
    }

    /// Every parameter by HF name (adapters as `<module>.lora_A.weight` /
    /// `<module>.lora_B.weight`), with whether it trains.
    pub fn named_params(&self) -> Vec<(String, Param)> {
        let mut v: Vec<(String, Param)> = vec![(
            "model.embed_tokens.weight".into(),
            self.embed_tokens.clone(),
        )];
        for (i, l) in self.layers.iter().enumerate() {
            let p = format!("model.layers.{i}");
            let norms = [
                ("self_attn.q_norm", l.attn.q_norm.as_ref()),
                ("self_attn.k_norm", l.attn.k_norm.as_ref()),
                ("input_layernorm", Some(&l.input_layernorm)),
                (
                    "post_attention_layernorm",
                    Some(&l.post_attention_layernorm),
                ),
            ];
            for (n, norm) in norms {
                if let Some(norm) = norm {
                    v.push((format!("{p}.{n}.weight"), norm.clone()));
                }
            }
        }
        let mut lins = self.linears();
        if let Some(h) = &self.lm_head {
            lins.push(h);
        }
        for lin in lins {
            v.push((format!("{}.weight", lin.name), lin.weight.clone()));
            if let Some(b) = &lin.bias {
                v.push((format!("{}.bias", lin.name), b.clone()));
            }
            if let Some(l) = &lin.lora {
                v.push((format!("{}.lora_A.weight", lin.name), l.a.clone()));
                v.push((format!("{}.lora_B.weight", lin.name), l.b.clone()));
            }
        }
        v.push(("model.norm.weight".into(), self.norm.clone()));
        v
    }

    /// The trainable variables by name.
    pub fn trainable_vars(&self) -> Vec<(String, Var)> {
        self.named_params()
            .into_iter()
            .filter_map(|(n, p)| match p {
                Param::Trainable(v) => Some((n, v)),
                Param::Frozen(_) => None,
            })
            .collect()
    }

    /// Base weights (no adapters) by HF name, e.g. for saving a merged model.
    pub fn base_weights(&self) -> HashMap<String, Tensor> {
        self.named_params()
            .into_iter()
            .filter(|(n, _)| !n.contains(".lora_"))
            .map(|(n, p)| (n, p.tensor().clone()))
            .collect()
    }

    /// Sets parameters by name (e.g. from a checkpoint); unknown names are an error.
    pub fn load_params(&mut self, values: &HashMap<String, Tensor>) -> anyhow::Result<()> {
        let params: HashMap<String, Param> = self.named_params().into_iter().collect();
        for (name, t) in values {
            let p = params
                .get(name)
                .ok_or_else(|| anyhow::anyhow!("checkpoint has unknown parameter `{name}`"))?;
            let cur = p.tensor();
            anyhow::ensure!(
                cur.dims() == t.dims(),
                "parameter `{name}`: checkpoint shape {:?}, model shape {:?}",
                t.dims(),
                cur.dims()
            );
            let t = t.to_dtype(cur.dtype())?.to_device(cur.device())?;
            match p {
                Param::Trainable(v) => v.set(&t)?,
                Param::Frozen(_) => self.set_frozen(name, &t)?,
            }
        }
        Ok(())
    }

    fn set_frozen(&mut self, name: &str, t: &Tensor) -> anyhow::Result<()> {
        let mut slots: Vec<(String, &mut Param)> = Vec::new();
        slots.push(("model.embed_tokens.weight".into(), &mut self.embed_tokens));
        slots.push(("model.norm.weight".into(), &mut self.norm));
        let mut lins: Vec<&mut Linear> = Vec::new();
        for (i, l) in self.layers.iter_mut().enumerate() {
            let p = format!("model.layers.{i}");
            if let Some(n) = &mut l.attn.q_norm {
                slots.push((format!("{p}.self_attn.q_norm.weight"), n));
            }
            if let Some(n) = &mut l.attn.k_norm {
                slots.push((format!("{p}.self_attn.k_norm.weight"), n));
            }
            slots.push((
                format!("{p}.input_layernorm.weight"),
                &mut l.input_layernorm,
            ));
            slots.push((
                format!("{p}.post_attention_layernorm.weight"),
                &mut l.post_attention_layernorm,
            ));
            lins.extend([
                &mut l.attn.q_proj,
                &mut l.attn.k_proj,
                &mut l.attn.v_proj,
                &mut l.attn.o_proj,
                &mut l.mlp.gate_proj,
                &mut l.mlp.up_proj,
                &mut l.mlp.down_proj,
            ]);
        }
        if let Some(h) = &mut self.lm_head {
            lins.push(h);
        }
        for lin in lins {
            slots.push((format!("{}.weight", lin.name), &mut lin.weight));
            if let Some(b) = &mut lin.bias {
                slots.push((format!("{}.bias", lin.name), b));
            }
        }
        for (n, slot) in slots {
            if n == name {
                slot.set(t)?;
                return Ok(());
            }
        }
        anyhow::bail!("parameter `{name}` cannot be set")
    }
}
