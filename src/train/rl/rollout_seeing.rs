//! Group sampling for a Qwen3-VL policy: prompts shown a screenshot are encoded one
//! by one with their image, then every group's rows decode together on the decoder
//! (each prompt's cached keys turned to a common rotary position); prompts without
//! one decode as [`super::rollout::sample_groups`] does.

use super::rollout::{Decode, GroupDecoding, Rollout, RolloutConfig, decode_rows, sample_groups};
use crate::model::KvCache;
use crate::model::kv_cache::left_pad_mask;
use crate::model::sample::Constraint;
use crate::model::vl::prompt::Screenshot;
use crate::model::vl::{MropePositions, Qwen3Vl, VlCache};
use anyhow::Result;
use candle_core::Tensor;

/// [`sample_groups`] for a Qwen3-VL policy: a prompt with a screenshot (its image
/// placeholders expanded) is encoded alone by the whole model, the tower run once,
/// then the `n` rows of every such prompt decode together on the decoder, each at
/// its prompt's rotary offset, never drawing an image token (a response is text);
/// prompts without one decode as [`sample_groups`] does.
/// Row seeds are as there, so a group draws the same whichever prompts share its
/// batch.
#[allow(clippy::too_many_arguments)]
pub fn sample_groups_seeing(
    vl: &Qwen3Vl,
    prompts: &[&[u32]],
    images: &[Option<&Screenshot>],
    n: usize,
    stop: &[u32],
    cfg: &RolloutConfig,
    seeds: &[u64],
    with: GroupDecoding<'_>,
) -> Result<Vec<Vec<Rollout>>> {
    anyhow::ensure!(
        images.len() == prompts.len() && seeds.len() == prompts.len(),
        "one image slot and one seed per prompt"
    );
    anyhow::ensure!(
        with.rules.is_none_or(|r| r.len() == prompts.len()),
        "one constraint per prompt"
    );
    let decoder = vl.text().decoder();
    let ids = vl.token_ids();
    let banned = &[ids.image_token_id, ids.vision_start_token_id];
    let mut out: Vec<Vec<Rollout>> = vec![Vec::new(); prompts.len()];
    let text: Vec<usize> = (0..prompts.len())
        .filter(|&i| images[i].is_none())
        .collect();
    if !text.is_empty() {
        let rules: Option<Vec<Constraint<'_>>> = with
            .rules
            .map(|r| text.iter().map(|&i| r[i].clone()).collect());
        let sampled = sample_groups(
            decoder,
            &text.iter().map(|&i| prompts[i]).collect::<Vec<_>>(),
            n,
            stop,
            cfg,
            &text.iter().map(|&i| seeds[i]).collect::<Vec<_>>(),
            GroupDecoding {
                rules: rules.as_deref(),
                prefix: with.prefix,
                banned,
            },
        )?;
        for (&i, group) in text.iter().zip(sampled) {
            out[i] = group;
        }
    }
    let seen: Vec<(usize, &Screenshot)> = images
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|s| (i, s)))
        .collect();
    if seen.is_empty() {
        return Ok(out);
    }
    let rules: Option<Vec<Constraint<'_>>> = with
        .rules
        .map(|r| seen.iter().map(|&(i, _)| r[i].clone()).collect());
    let d = Decode {
        n,
        stop,
        cfg,
        seeds: &seen.iter().map(|&(i, _)| seeds[i]).collect::<Vec<_>>(),
        rules: rules.as_deref(),
        banned,
    };
    let shown: Vec<(&[u32], &Screenshot)> = seen.iter().map(|&(i, s)| (prompts[i], s)).collect();
    let groups = sample_seen_groups(vl, &shown, &d)?;
    for (&(i, _), group) in seen.iter().zip(groups) {
        out[i] = group;
    }
    Ok(out)
}

/// The groups of prompts shown a screenshot, all rows decoding in one batch (see
/// [`sample_groups_seeing`]).
fn sample_seen_groups(
    vl: &Qwen3Vl,
    prompts: &[(&[u32], &Screenshot)],
    d: &Decode<'_, '_>,
) -> Result<Vec<Vec<Rollout>>> {
    let decoder = vl.text().decoder();
    let max_pos = decoder.config.max_position_embeddings;
    let headroom = d.cfg.max_new_tokens + 1;
    // Each prompt with its screenshot alone through the whole model.
    let (mut parts, mut firsts, mut next) = (Vec::new(), Vec::new(), Vec::new());
    for &(prompt, shot) in prompts {
        anyhow::ensure!(
            !prompt.is_empty() && prompt.len() + headroom <= max_pos,
            "prompt of {} tokens and {} new ones do not fit the model's {max_pos} positions",
            prompt.len(),
            d.cfg.max_new_tokens
        );
        let mut cache = VlCache::new();
        let hidden = vl.forward_hidden(prompt, Some(shot.images()), Some(&mut cache))?;
        firsts.push(hidden.narrow(1, prompt.len() - 1, 1)?);
        next.push(cache.next_position());
        parts.push(cache);
    }
    // Then all their rows decode together: rotary embeddings are relative, so each
    // prompt's cached keys turn by the offset that puts its next token at the
    // common position `start` (a uniform shift of all three M-RoPE axes is a plain
    // rotation), and left padding is masked out.
    let start = next.iter().copied().max().unwrap_or(0).max(0);
    let longest = parts.iter().map(VlCache::len).max().unwrap_or(0);
    let mut turned = Vec::with_capacity(parts.len());
    for (p, &n) in parts.iter().zip(&next) {
        let shift =
            u32::try_from(start - n).map_err(|_| anyhow::anyhow!("rotary position overflows"))?;
        let rope = vl.text().rope(&MropePositions::text(shift, 1)?)?;
        turned.push(p.kv().turned(&rope)?);
    }
    let cache = KvCache::stack_left_padded(&turned, headroom)?;
    let key_mask: Vec<Vec<f32>> = parts
        .iter()
        .map(|p| left_pad_mask(longest - p.len(), longest))
        .collect();
    let first = decoder.logits(&Tensor::cat(&firsts, 0)?)?.squeeze(1)?;
    let text = vl.text();
    let mut step = |input: &Tensor, pos: usize, cache: &mut KvCache, km: Option<&Tensor>| {
        let at = u32::try_from(start + (pos - longest) as i64)
            .map_err(|_| anyhow::anyhow!("rotary position overflows"))?;
        let rope = text.rope(&MropePositions::text(at, 1)?)?;
        let embeds = text.embed(input)?;
        Ok(decoder.forward_embeds(embeds, &rope, Some(cache), km, &mut |_, x| Ok(x))?)
    };
    decode_rows(
        decoder,
        &first,
        cache,
        Some(key_mask),
        longest,
        d,
        &mut step,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::D;

    /// A Qwen3-VL policy's groups decode together whatever their screenshots (other
    /// sizes: other token counts and rotary offsets), prompt lengths (left padding)
    /// or lack of one: every recorded log-probability is the whole model's on one
    /// full pass of the prompt, its image and the response, and a group draws what
    /// it draws alone.
    #[test]
    fn vl_groups_decoding_together_carry_the_full_passes_log_probs() {
        let (vl, image_cfg) = crate::train::rl::test_vl_model(3, 6.0);
        let dev = candle_core::Device::Cpu;
        let shot = |w: u32, h: u32, c: u8| {
            let img = image::RgbImage::from_fn(w, h, |x, y| {
                image::Rgb([c, (x * 13 % 255) as u8, (y * 29 % 255) as u8])
            });
            Screenshot::of_image(&image::DynamicImage::ImageRgb8(img), &image_cfg, &dev).unwrap()
        };
        let (small, tall) = (shot(16, 16, 40), shot(16, 40, 200));
        assert!(tall.tokens > small.tokens);
        let with_image = |before: &[u32], s: &Screenshot, after: &[u32]| {
            let mut p = before.to_vec();
            p.push(36);
            p.extend(std::iter::repeat_n(38, s.tokens));
            p.push(37);
            p.extend_from_slice(after);
            p
        };
        let p1 = with_image(&[1, 2, 3], &small, &[5, 6]);
        let p2 = with_image(&[1, 2], &tall, &[7, 8, 9, 10]);
        let p3: Vec<u32> = vec![4, 5, 6, 7];
        let p4 = with_image(&[], &small, &[9]);
        let prompts: Vec<&[u32]> = vec![&p1, &p2, &p3, &p4];
        let images = [Some(&small), Some(&tall), None, Some(&small)];
        let cfg = RolloutConfig {
            temperature: 1.0,
            top_p: 1.0,
            max_new_tokens: 6,
        };
        let stop = [39u32];
        let seeds = [21, 22, 23, 24];
        let free = GroupDecoding::default();
        let groups =
            sample_groups_seeing(&vl, &prompts, &images, 3, &stop, &cfg, &seeds, free).unwrap();
        let mut spread = 0.0f32;
        for (g, group) in groups.iter().enumerate() {
            assert_eq!(group.len(), 3);
            for r in group {
                let mut ids = prompts[g].to_vec();
                ids.extend(&r.ids);
                let logits = vl
                    .forward(&ids, images[g].map(Screenshot::images), None)
                    .unwrap();
                let lsm: Vec<Vec<f32>> =
                    candle_nn::ops::log_softmax(&logits.squeeze(0).unwrap(), D::Minus1)
                        .unwrap()
                        .to_vec2()
                        .unwrap();
                for (k, (&t, &got)) in r.ids.iter().zip(&r.logps).enumerate() {
                    let want = lsm[prompts[g].len() - 1 + k][t as usize];
                    assert!((got - want).abs() < 1e-4, "group {g}: {got} vs {want}");
                    spread = spread.max(-want);
                }
            }
            // Alone, the group draws the same.
            let alone = sample_groups_seeing(
                &vl,
                &prompts[g..=g],
                &images[g..=g],
                3,
                &stop,
                &cfg,
                &seeds[g..=g],
                free,
            )
            .unwrap();
            let ids = |v: &[Rollout]| v.iter().map(|r| r.ids.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&alone[0]), ids(group), "group {g}");
        }
        assert!(spread > 0.5, "the draws are all near-certain ({spread})");
    }
}
