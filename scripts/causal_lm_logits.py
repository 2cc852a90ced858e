#!/usr/bin/env python3
"""transformers' logits of a causal-LM folder (optionally with a PEFT adapter) for the
token ids of a safetensors file: the cross-check of tests/it/smollm2.rs that folders
rmsweb imports and adapters it trains load in transformers and PEFT as they are (the
verl venv of .ci/install-verl.sh has torch, transformers 5 and peft).

    python scripts/causal_lm_logits.py MODEL_DIR IDS OUT [--adapter DIR]

IDS holds `input_ids` (int64, one sequence); OUT gets `logits` (f32 [seq, vocab]).
"""

import argparse

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("ids")
    ap.add_argument("out")
    ap.add_argument("--adapter")
    a = ap.parse_args()
    model = AutoModelForCausalLM.from_pretrained(
        a.model, dtype=torch.float32, attn_implementation="eager"
    )
    if a.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, a.adapter)
    model.eval()
    ids = load_file(a.ids)["input_ids"].long().unsqueeze(0)
    with torch.no_grad():
        out = model(input_ids=ids)
    save_file({"logits": out.logits[0].float().contiguous()}, a.out)


if __name__ == "__main__":
    main()
