#!/usr/bin/env python3
"""Generates the Llama reference fixtures of rmsweb's Llama tests (CI only reads them).

Run from the repository root, with transformers 5, peft, torch and safetensors installed
(~/.cache/rmsweb/venv-hf), offline:

    HF_HUB_OFFLINE=1 ~/.cache/rmsweb/venv-hf/bin/python tests/data/llama/make_fixtures.py

What it writes under tests/data/llama/ (each folder a couple of hundred KB), following
tests/data/hf/make_fixtures.py:

- Random tiny LlamaForCausalLM folders saved by transformers (config.json,
  generation_config.json, model.safetensors) with the tokenizer files of
  tests/data/hf/t5-tied/ copied verbatim (byte-level BPE, 400 ids, <|endoftext|>
  <|im_start|> <|im_end|> at 0..2; chat_template.jinja is that folder's Qwen3 template):
    tied/          tie_word_embeddings, no biases, default head_dim (hidden / heads = 8)
    bias-untied/   separate lm_head, attention_bias and mlp_bias (random, nonzero biases)
    llama3-rope/   rope_parameters of type llama3 (factor 8, low_freq_factor 1,
                   high_freq_factor 4, original_max_position_embeddings 32), head_dim 16
                   given explicitly (!= hidden / heads)
- peft-adapter/: a PEFT LoRA adapter (r 8, alpha 16, on q k v o gate up down) of
  bias-untied/, lora_A and lora_B random and nonzero, saved by save_pretrained
  (adapter_config.json with base_model_name_or_path = tests/data/llama/bias-untied,
  adapter_model.safetensors).
- <folder>/reference.safetensors: `input_ids` int64 [48] (a fixed sequence), `logits` f32
  [48, vocab] (float32 eager forward of the folder as loaded back from disk; base +
  adapter for peft-adapter/), `greedy` int64 [8 + 12] (the first 8 ids, then 12 argmax
  tokens, full forward each step). peft-adapter/ also has `merged_logits`: the same
  forward after merge_and_unload() (checked equal to `logits`).
- expected.json: the shapes, smallest greedy margin of each folder, the adapter's
  merged-vs-unmerged difference, versions.
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TOKENIZER = ROOT / "tests" / "data" / "hf" / "t5-tied"
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]
VOCAB = 400  # t5-tied's tokenizer
SEQ = 48
PROMPT = 8
GREEDY = 12
MIN_MARGIN = 0.05

SHAPE = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    rms_norm_eps=1e-5,
    eos_token_id=2,
    pad_token_id=0,
    bos_token_id=None,
)


def randomize(model, seed):
    """Every weight random (std 0.2, norms around 1), biases included."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1.0 + 0.2 * noise if name.endswith("norm.weight") else 0.2 * noise)


def references(model, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (1, SEQ), generator=g)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float().contiguous()
        seq = ids[:, :PROMPT]
        margins = []
        for _ in range(GREEDY):
            last = model(input_ids=seq).logits[0, -1]
            top = torch.topk(last, 2).values
            margins.append(float(top[0] - top[1]))
            seq = torch.cat([seq, last.argmax().view(1, 1)], dim=1)
    return {"input_ids": ids[0].contiguous(), "logits": logits, "greedy": seq[0].contiguous()}, min(margins)


def pick_references(name, model, seed):
    """A near tie between the two likeliest tokens would make the greedy comparison hinge
    on rounding: draw another sequence until the smallest margin is clear."""
    for attempt in range(200):
        refs, margin = references(model, 1000 * seed + attempt)
        if margin >= MIN_MARGIN:
            return refs, margin
    raise SystemExit(f"{name}: no sequence with a greedy margin of {MIN_MARGIN}")


def save_refs(folder, refs):
    save_file(refs, str(folder / "reference.safetensors"))


def load(folder):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")


def make_model(name, seed, report, **overrides):
    folder = HERE / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    cfg = LlamaConfig(**(SHAPE | {"rope_parameters": {"rope_type": "default", "rope_theta": 50_000.0}} | overrides))
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    randomize(model, seed)
    model.save_pretrained(folder)
    for f in TOKENIZER_FILES:
        shutil.copy(TOKENIZER / f, folder / f)
    # References from the saved folder, read back the way a user loads it.
    loaded = load(folder)
    assert isinstance(loaded, LlamaForCausalLM)
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), (name, k)
    refs, margin = pick_references(name, loaded, seed)
    save_refs(folder, refs)
    report["margins"][name] = margin
    report["configs"][name] = json.loads((folder / "config.json").read_text())
    return folder


def make_adapter(base, seed, report):
    from peft import LoraConfig, PeftModel, get_peft_model

    folder = HERE / "peft-adapter"
    if folder.exists():
        shutil.rmtree(folder)
    cfg = LoraConfig(
        r=8,
        lora_alpha=16,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(seed)
    peft_model = get_peft_model(load(base), cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    peft_model.save_pretrained(folder)
    c = json.loads((folder / "adapter_config.json").read_text())
    c["base_model_name_or_path"] = str(base.relative_to(ROOT))
    c["target_modules"] = sorted(c["target_modules"])
    (folder / "adapter_config.json").write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
    (folder / "README.md").unlink(missing_ok=True)

    loaded = PeftModel.from_pretrained(load(base), folder)
    loaded.eval()
    refs, margin = pick_references("peft-adapter", loaded, seed)
    with torch.no_grad():
        base_logits = load(base)(input_ids=refs["input_ids"][None]).logits[0]
        merged = loaded.merge_and_unload()
        merged_logits = merged(input_ids=refs["input_ids"][None]).logits[0].float().contiguous()
    diff = float((merged_logits - refs["logits"]).abs().max())
    effect = float((base_logits - refs["logits"]).abs().max())
    assert diff < 1e-4, f"merge_and_unload changed the logits by {diff}"
    assert effect > 0.1, f"the adapter hardly changes the logits ({effect})"
    save_refs(folder, refs | {"merged_logits": merged_logits})
    report["margins"]["peft-adapter"] = margin
    report["adapter"] = {"merged_max_abs_diff": diff, "max_abs_effect_on_logits": effect,
                         "adapter_config": c}


def main():
    t0 = time.time()
    torch.set_num_threads(int(os.environ.get("THREADS", "1")))
    report = {"margins": {}, "configs": {}}
    make_model("tied", 21, report, tie_word_embeddings=True)
    base = make_model("bias-untied", 22, report, tie_word_embeddings=False, attention_bias=True, mlp_bias=True)
    make_model("llama3-rope", 23, report, tie_word_embeddings=True, head_dim=16,
               rope_parameters={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 32,
                                "rope_theta": 10_000.0})
    make_adapter(base, 24, report)
    import peft
    import transformers

    report["seq"], report["prompt"], report["greedy_new_tokens"] = SEQ, PROMPT, GREEDY
    report["versions"] = {"transformers": transformers.__version__, "torch": torch.__version__,
                          "peft": peft.__version__}
    (HERE / "expected.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    for p in HERE.rglob("*"):
        if p.is_file() and p.suffix != ".py":
            p.chmod(0o644)
    for name, m in report["margins"].items():
        print(f"{name}: smallest greedy margin {m:.4f}")
    print(f"adapter: merged vs unmerged {report['adapter']['merged_max_abs_diff']:.2e}, "
          f"effect {report['adapter']['max_abs_effect_on_logits']:.3f}")
    print(f"total {time.time() - t0:.1f}s")


if __name__ == "__main__":
    sys.exit(main())
