#!/usr/bin/env python3
"""Generates the Hugging Face reference fixtures of tests/it/hf.rs (CI only reads them).

Run from the repository root, with transformers 5, peft, torch and safetensors
installed (e.g. the venv of .ci/install-env.sh's helpers, ~/.cache/rmsweb/venv-hf):

    cargo build && ~/.cache/rmsweb/venv-hf/bin/python tests/data/hf/make_fixtures.py

What it writes under tests/data/hf/ (each model folder a few hundred KB):

- tiny-ckpt/: a checkpoint of rmsweb's `tiny` SFT preset (shrunk with --set), exactly
  as rmsweb writes it: config.json, model.safetensors, tokenizer.json,
  tokenizer_config.json. transformers loads it as Qwen3ForCausalLM + AutoTokenizer.
- Random Qwen3 models saved by transformers with tiny-ckpt's tokenizer, one per layout:
  t5-tied (transformers 5 `rope_parameters`, chat_template.jinja holding Qwen3's
  template, tied embeddings), legacy-untied (the transformers 4 layout: top-level
  rope_theta, chat template inside tokenizer_config.json, here with `{% generation %}`
  blocks), linear-rope (legacy `rope_scaling` linear x4), yarn-rope, llama3-rope,
  dynamic-rope (transformers 5 spellings), sharded (model.safetensors.index.json).
- peft-adapter/: a LoRA adapter made by PEFT on t5-tied, with B != 0.
- <folder>/reference.safetensors: `input_ids` (a fixed token sequence), `logits`
  (transformers' forward of it, f32 [seq, vocab]), `greedy` (the first PROMPT ids
  followed by GREEDY tokens chosen by argmax, full forward each step).
- expected.json: AutoTokenizer ids of TEXTS, chat renderings by apply_chat_template of
  CHATS (every prefix, with and without the generation prompt), transformers'
  assistant masks for the `{% generation %}` template.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SEQ = 48
PROMPT = 8
GREEDY = 12
MAX_POS = 128
MIN_MARGIN = 0.01

# The tiny model every transformers-made folder shares (tiny-ckpt has the same shape).
SHAPE = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=MAX_POS,
)

TEXTS = [
    "click the Submit button",
    "Type 'hello world' into the search box.",
    "  two  leading spaces and  doubled  ones",
    "trailing space ",
    "tabs\tand\nnewlines\r\nmixed",
    "numbers 0 1 12 123 1234 12345 3.14159 -7",
    "ünïcödé àccents and ß",
    "中文字符 and 日本語のテキスト",
    "emoji 🙂🚀 and symbols ©®™",
    "<|im_start|>user\nhi<|im_end|>\n",
    "<|im_start|>assistant\n{\"action\": [{\"click\": {\"index\": 3}}]}<|im_end|>",
    "<|endoftext|>",
    "text<|im_end|>glued<|im_start|>",
    '{"thinking": "", "memory": "m", "next_goal": "go", "action": [{"done": {"text": "ok"}}]}',
    "[12] <button> Submit </button>",
    "https://example.com/path?q=1&r=two#frag",
    "CamelCaseWords and snake_case_words",
    "it's don't we'll they're I'M",
    "   ",
    "",
    "\n\n\n",
    "a",
    "Ω≈ç√∫˜µ≤≥÷",
    "mixed 中 English 한국어 text",
    "email: someone@example.org",
    "price $12.99, 50% off!",
    "path/to/file.txt and C:\\Windows\\System32",
    "<think>\nreasoning\n</think>\n\nanswer",
    "repeat repeat repeat repeat repeat",
    "UPPER lower MiXeD",
    "line one\n  indented line\n\tline with tab",
    "quotes \"double\" and 'single' and `back`",
    "zero\u200bwidth space",
    "ellipsis… and dashes – —",
    "select option 'Red' from dropdown [7]",
]

CHATS = {
    "single": [
        {"role": "system", "content": "You are a web agent."},
        {"role": "user", "content": "Task: click Submit"},
        {"role": "assistant", "content": '{"action": [{"click": {"index": 1}}]}'},
    ],
    "multi": [
        {"role": "system", "content": "You are a web agent."},
        {"role": "user", "content": "Task: click Submit"},
        {"role": "assistant", "content": '{"action": [{"click": {"index": 1}}]}'},
        {"role": "user", "content": "Next?"},
        {"role": "assistant", "content": '{"action": [{"done": {"text": "ok"}}]}'},
    ],
    "thinking": [
        {"role": "user", "content": "Which button?"},
        {"role": "assistant", "content": "<think>\nThe blue one.\n</think>\n\nblue"},
        {"role": "user", "content": "And then?"},
        {"role": "assistant", "content": "<think>\nSubmit.\n</think>\n\nsubmit"},
    ],
}

# ChatML with transformers' assistant-mask blocks.
CHATML_GENERATION = (
    "{% for m in messages %}"
    "{% if m.role == 'assistant' %}<|im_start|>assistant\n"
    "{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def run_rmsweb(binary, out):
    """A shrunk tiny-preset SFT run on the bundled fixtures; returns its checkpoint."""
    run = Path(tempfile.mkdtemp()) / "run"
    sets = {
        "tiny.vocab_size": 400,
        "tiny.hidden_size": SHAPE["hidden_size"],
        "tiny.intermediate_size": SHAPE["intermediate_size"],
        "tiny.num_hidden_layers": SHAPE["num_hidden_layers"],
        "tiny.num_attention_heads": SHAPE["num_attention_heads"],
        "tiny.num_key_value_heads": SHAPE["num_key_value_heads"],
        "tiny.head_dim": SHAPE["head_dim"],
        "context": 512,
        "micro_batch": 2,
        "grad_accum": 1,
        "lr": 0.05,
        "checkpoint_every": 3,
    }
    cmd = [str(binary), "train", "sft", "--preset", "tiny", "--dataset", str(ROOT / "fixtures"),
           "--run-dir", str(run), "--steps", "3"]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    subprocess.run(cmd, check=True)
    ckpts = sorted((run / "checkpoints").iterdir())
    ckpt = ckpts[-1]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]:
        shutil.copy(ckpt / name, out / name)
    shutil.rmtree(run.parent)


def randomize(model, seed):
    """Every weight random (std 0.2, norms around 1), so that every tensor matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * noise)
            else:
                p.copy_(0.2 * noise)


def references(model, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (1, SEQ), generator=g)
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


def save_references(folder, model, vocab, seed, report):
    # A near tie between the two likeliest tokens would make the greedy comparison
    # hinge on rounding: draw another sequence until the smallest margin is clear.
    for attempt in range(50):
        refs, margin = references(model, vocab, 1000 * seed + attempt)
        if margin >= MIN_MARGIN:
            break
    else:
        raise SystemExit(f"{folder.name}: no sequence with a greedy margin of {MIN_MARGIN}")
    save_file(refs, str(folder / "reference.safetensors"))
    report[folder.name] = {"min_greedy_margin": margin}


def legacy_config(folder, rope_scaling=None):
    """Rewrites a transformers 5 config.json into the layout transformers 4 wrote."""
    p = folder / "config.json"
    c = json.loads(p.read_text())
    rope = c.pop("rope_parameters")
    c.pop("layer_types", None)
    c["rope_theta"] = rope["rope_theta"]
    c["rope_scaling"] = rope_scaling
    c["torch_dtype"] = c.pop("dtype", "float32")
    c["transformers_version"] = "4.51.3"
    p.write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")


def save_tokenizer(tok, folder, template, legacy):
    tok.chat_template = template
    if legacy:
        # transformers 4: everything in tokenizer_config.json.
        shutil.copy(HERE / "tiny-ckpt" / "tokenizer.json", folder / "tokenizer.json")
        cfg = json.loads((HERE / "tiny-ckpt" / "tokenizer_config.json").read_text())
        cfg["chat_template"] = template
        (folder / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    else:
        tok.save_pretrained(folder)


def make_model(name, seed, tok, template, tied=True, legacy=False, rope=None, rope_scaling=None,
               shard=None, report=None):
    folder = HERE / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    vocab = len(tok)
    cfg = Qwen3Config(
        vocab_size=vocab,
        tie_word_embeddings=tied,
        rope_parameters=rope or {"rope_type": "default", "rope_theta": 50_000.0},
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        **SHAPE,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg)
    randomize(model, seed)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(folder, **kwargs)
    if legacy:
        legacy_config(folder, rope_scaling)
    save_tokenizer(tok, folder, template, legacy)
    # References from the saved folder, read back the way a user loads it.
    loaded = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    save_references(folder, loaded, vocab, seed, report)
    return folder


def make_adapter(base, seed, report):
    from peft import LoraConfig, PeftModel, get_peft_model

    folder = HERE / "peft-adapter"
    if folder.exists():
        shutil.rmtree(folder)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, attn_implementation="eager")
    cfg = LoraConfig(
        r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(seed)
    peft_model = get_peft_model(model, cfg)
    peft_model.save_pretrained(folder)
    c = json.loads((folder / "adapter_config.json").read_text())
    c["base_model_name_or_path"] = str(base.relative_to(ROOT))
    (folder / "adapter_config.json").write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
    (folder / "README.md").unlink(missing_ok=True)
    base_model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, attn_implementation="eager")
    loaded = PeftModel.from_pretrained(base_model, folder)
    save_references(folder, loaded, len(AutoTokenizer.from_pretrained(base)), seed, report)


def render_all(tok, template):
    """Every prefix of every chat, with and without the generation prompt."""
    out = {}
    for name, chat in CHATS.items():
        rows = []
        for k in range(1, len(chat) + 1):
            row = {"n": k}
            for gen in [False, True]:
                row["gen" if gen else "plain"] = tok.apply_chat_template(
                    chat[:k], chat_template=template, tokenize=False, add_generation_prompt=gen
                )
            rows.append(row)
        out[name] = rows
    return out


GENERATE_PROMPT = "Task: click Submit"
GENERATE_MAX = 8


def chat_logprobs(model, ids):
    """log p(ids[i] | ids[:i]) for i >= 1."""
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
    return [float(lp[i - 1, ids[i]]) for i in range(1, len(ids))]


def greedy_reply(model, tok, template, prompt):
    """Greedy decoding after the chat template's generation prompt, stopping at the
    end-of-turn tokens (rmsweb's stop set for this tokenizer)."""
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}], chat_template=template,
                                  tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]
    stop = {tok.convert_tokens_to_ids(t) for t in ["<|im_end|>", "<|endoftext|>"]}
    out = []
    with torch.no_grad():
        for _ in range(GENERATE_MAX):
            nxt = int(model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax())
            if nxt in stop:
                break
            out.append(nxt)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rmsweb", default=str(ROOT / "target" / "debug" / "rmsweb"))
    ap.add_argument("--keep-tiny", action="store_true",
                    help="reuse tiny-ckpt/ instead of training it again with rmsweb")
    args = ap.parse_args()
    torch.set_num_threads(2)
    report = {}

    if not args.keep_tiny:
        run_rmsweb(args.rmsweb, HERE / "tiny-ckpt")
    tok = AutoTokenizer.from_pretrained(HERE / "tiny-ckpt")
    ckpt = AutoModelForCausalLM.from_pretrained(HERE / "tiny-ckpt", dtype=torch.float32, attn_implementation="eager")
    save_references(HERE / "tiny-ckpt", ckpt, len(tok), 1, report)

    qwen3 = (HERE / "qwen3_chat_template.jinja").read_text()
    chatml = tok.chat_template
    t5 = make_model("t5-tied", 2, tok, qwen3, report=report)
    make_model("legacy-untied", 3, tok, CHATML_GENERATION, tied=False, legacy=True, report=report)
    make_model("linear-rope", 4, tok, chatml, legacy=True,
               rope={"rope_type": "linear", "factor": 4.0, "rope_theta": 10_000.0},
               rope_scaling={"type": "linear", "factor": 4.0}, report=report)
    make_model("yarn-rope", 5, tok, chatml,
               rope={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                     "rope_theta": 10_000.0}, report=report)
    make_model("llama3-rope", 6, tok, chatml,
               rope={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 32,
                     "rope_theta": 10_000.0}, report=report)
    make_model("dynamic-rope", 7, tok, chatml,
               rope={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10_000.0}, report=report)
    make_model("sharded", 8, tok, chatml, tied=False, shard="40KB", report=report)
    make_adapter(t5, 9, report)

    expected = {
        "texts": TEXTS,
        "ids": [tok(t)["input_ids"] for t in TEXTS],
        "eos_token": tok.eos_token,
        "pad_token": tok.pad_token,
        "chats": CHATS,
        "renderings": {
            "tiny-ckpt": render_all(tok, chatml),
            "t5-tied": render_all(tok, qwen3),
            "legacy-untied": render_all(tok, CHATML_GENERATION),
        },
        "chat_ids": {
            name: tok.apply_chat_template(chat, chat_template=chatml, tokenize=True, return_dict=True)["input_ids"]
            for name, chat in CHATS.items()
        },
        "assistant_masks": {
            name: tok.apply_chat_template(
                chat, chat_template=CHATML_GENERATION, tokenize=True, return_dict=True,
                return_assistant_tokens_mask=True,
            )["assistant_masks"]
            for name, chat in CHATS.items()
        },
        "chat_logprobs": {
            name: chat_logprobs(ckpt, tok.apply_chat_template(chat, chat_template=chatml, tokenize=True,
                                                              return_dict=True)["input_ids"])
            for name, chat in CHATS.items()
        },
        "generate": {"prompt": GENERATE_PROMPT, "max_tokens": GENERATE_MAX,
                     "ids": greedy_reply(ckpt, tok, chatml, GENERATE_PROMPT)},
        "margins": report,
        "versions": {
            "transformers": __import__("transformers").__version__,
            "torch": torch.__version__,
            "peft": __import__("peft").__version__,
            "tokenizers": __import__("tokenizers").__version__,
        },
    }
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    for name, r in report.items():
        print(f"{name}: smallest greedy margin {r['min_greedy_margin']:.4f}")


if __name__ == "__main__":
    sys.exit(main())
