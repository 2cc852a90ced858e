#!/usr/bin/env python3
"""Writes tests/data/vl/hf/: tiny random Qwen3-VL folders saved by transformers, with
transformers' logits for an image + text prompt (CI reads them without torch).

Run from the repository root with transformers 5 and torch (the venv of
.ci/install-verl.sh has both):

    ~/.cache/rmsweb/venv-verl/bin/python scripts/vl/make_hf_fixture.py

What it writes (each folder well under a megabyte):

- tiny/: `Qwen3VLForConditionalGeneration.save_pretrained` of a random 3-layer model
  (untied LM head, DeepStack after layers 0 and 1, interleaved M-RoPE [4, 2, 2]):
  config.json, model.safetensors, generation_config.json.
- tiny-sharded/: the same weights saved in shards (model.safetensors.index.json),
  tied embeddings.
- <folder>/reference.safetensors: `input_ids` (text, two images of different grids,
  text), `pixel_values` (random patch rows of both images), `image_grid_thw`,
  `logits` (transformers' forward of them, f32 [seq, vocab]).
"""

import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

HERE = Path(__file__).resolve().parents[2] / "tests" / "data" / "vl" / "hf"
VOCAB = 96
IMAGE, VIDEO, START, END = 92, 93, 94, 95
# Patch grids [t, h, w] of the two images (merge 2: 2x3 and 1x2 image tokens).
GRIDS = [[1, 4, 6], [1, 2, 4]]


def config(tied):
    return Qwen3VLConfig(
        text_config=dict(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=256,
            rms_norm_eps=1e-6,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 50_000.0,
                "mrope_section": [4, 2, 2],
                "mrope_interleaved": True,
            },
            tie_word_embeddings=tied,
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            patch_size=4,
            temporal_patch_size=2,
            spatial_merge_size=2,
            in_channels=3,
            out_hidden_size=32,
            num_position_embeddings=16,
            deepstack_visual_indexes=[0, 1],
            hidden_act="gelu_pytorch_tanh",
        ),
        image_token_id=IMAGE,
        video_token_id=VIDEO,
        vision_start_token_id=START,
        vision_end_token_id=END,
        tie_word_embeddings=tied,
    )


def randomize(model, seed):
    """Every weight random at a scale where each tensor moves the logits."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if name.endswith("norm.weight") or name.endswith("norm1.weight") or name.endswith("norm2.weight"):
                p.copy_(1.0 + 0.2 * noise)
            elif p.dim() >= 2 and "embed_tokens" not in name and "pos_embed" not in name:
                fan_in = p[0].numel()
                p.copy_(noise / fan_in**0.5)
            else:
                p.copy_(0.5 * noise)


def prompt(seed):
    g = torch.Generator().manual_seed(seed)
    text = lambda n: torch.randint(0, IMAGE, (n,), generator=g).tolist()
    ids = text(5)
    for t, h, w in GRIDS:
        ids += [START] + [IMAGE] * (t * h * w // 4) + [END] + text(3)
    ids += text(4)
    rows = sum(t * h * w for t, h, w in GRIDS)
    pixels = torch.randn((rows, 3 * 2 * 4 * 4), generator=g)
    return torch.tensor([ids]), pixels


def make(name, seed, tied, shard=None):
    folder = HERE / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config(tied))
    randomize(model, seed)
    model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    loaded = Qwen3VLForConditionalGeneration.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ids, pixels = prompt(seed)
    grid = torch.tensor(GRIDS)
    with torch.no_grad():
        kinds = (ids == IMAGE).long()  # mm_token_type_ids: 1 on image placeholders
        out = loaded(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, mm_token_type_ids=kinds)
        logits = out.logits[0]
    save_file(
        {
            "input_ids": ids[0].contiguous(),
            "pixel_values": pixels.contiguous(),
            "image_grid_thw": grid.contiguous(),
            "logits": logits.float().contiguous(),
        },
        str(folder / "reference.safetensors"),
    )
    print(f"{name}: {len(ids[0])} tokens, logits std {logits.std():.3f}")


if __name__ == "__main__":
    make("tiny", 1, tied=False)
    make("tiny-sharded", 2, tied=True, shard="60KB")
