#!/usr/bin/env python3
"""transformers' logits of a Qwen3-VL folder (optionally with a PEFT adapter) for the
prompt of a reference file: the cross-check of tests/it/vl/hf.rs that folders and
adapters rmsweb exports load in transformers and PEFT as they are (the verl venv of
.ci/install-verl.sh has torch, transformers 5 and peft).

    python scripts/vl/transformers_logits.py MODEL_DIR REFERENCE OUT [--adapter DIR]

REFERENCE is a reference.safetensors of make_hf_fixture.py; OUT gets `logits`.
"""

import argparse

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3VLForConditionalGeneration


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("reference")
    ap.add_argument("out")
    ap.add_argument("--adapter")
    a = ap.parse_args()
    model = Qwen3VLForConditionalGeneration.from_pretrained(
        a.model, dtype=torch.float32, attn_implementation="eager"
    )
    if a.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, a.adapter)
    model.eval()
    ref = load_file(a.reference)
    ids = ref["input_ids"].long().unsqueeze(0)
    image_token = model.config.image_token_id
    with torch.no_grad():
        out = model(
            input_ids=ids,
            pixel_values=ref["pixel_values"],
            image_grid_thw=ref["image_grid_thw"].long(),
            mm_token_type_ids=(ids == image_token).long(),
        )
    save_file({"logits": out.logits[0].float().contiguous()}, a.out)


if __name__ == "__main__":
    main()
