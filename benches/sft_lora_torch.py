#!/usr/bin/env python3
"""PyTorch + PEFT CPU reference for rmsweb's LoRA SFT throughput on a real checkpoint
(SmolLM2-135M-Instruct, `LlamaForCausalLM`).

It measures the training tokens per second of one LoRA SFT step, as rmsweb's trainer does it:
the base model frozen in float32, LoRA adapters (r 16, alpha 32, dropout 0.05) on every
attention and MLP projection (q/k/v/o, gate/up/down), random token batches from a seeded
generator, and the loss on the second half of each sequence only: the decoder's hidden
states, the (tied) LM head applied to the target positions alone, log-softmax, NLL of the
next token, summed and divided by the target tokens of the whole optimizer step;
`backward()` per micro-batch, then grad clipping (1.0), AdamW (weight decay 0.01) over the
adapters and zero_grad. Dropout is active (train mode). One warm-up step is not timed;
tokens/s = micro_batch * seq * grad_accum per step over the timed steps. Memory: at the
defaults the saved activations of one micro-batch take ~7 GB (PEFT's LoRA dropout keeps its
own copy of each projection's input) and the peak RSS was ~11 GB.

    python3 benches/sft_lora_torch.py --model DIR --seq 512 --micro-batch 4 --grad-accum 2 \\
        --steps 6 --r 16 --alpha 32 --threads 2

DIR is a Hugging Face folder (config.json, model.safetensors, tokenizer files; e.g. the one
`rmsweb model import` makes from the SmolLM2 GGUF of scripts/fetch-smollm2.sh). Needs
torch, transformers and peft; set HF_HUB_OFFLINE=1, nothing is downloaded.

Compare with the Rust side, `cargo bench --bench sft_lora -- --model DIR ...`, run with the
same flags, which must match: --seq --micro-batch --grad-accum --steps --r --alpha (whole
numbers there). Match the thread count too: --threads N here (0 keeps torch's default),
RAYON_NUM_THREADS=N there. --attn picks the attention kernel (sdpa, PyTorch's fastest on
CPU, the default; or eager). The seeds differ, so the losses are not comparable.

OMP_WAIT_POLICY defaults to PASSIVE here (set it to ACTIVE in the environment to get
OpenMP's spinning workers back): on a machine shared with other work (compiles), spinning
OpenMP threads are preempted and a 2-thread step ran 3-6x slower than a 1-thread one,
while PASSIVE put 2 threads back at or below the 1-thread time.
"""
import argparse
import os
import time
import warnings

# Must be set before the OpenMP runtime starts (with torch's import).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, help="Hugging Face model folder (LlamaForCausalLM)")
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--grad-accum", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--r", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32)
    p.add_argument("--dropout", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=42)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)  # LoRA init and dropout masks
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers deprecations

    t0 = time.perf_counter()
    base = AutoModelForCausalLM.from_pretrained(
        a.model, dtype=torch.float32, attn_implementation=a.attn
    )
    base.config.use_cache = False
    cfg = LoraConfig(
        task_type="CAUSAL_LM",
        r=a.r,
        lora_alpha=a.alpha,
        lora_dropout=a.dropout,
        target_modules=TARGETS,
        bias="none",
    )
    model = get_peft_model(base, cfg)
    model.train()
    trainable, total = model.get_nb_trainable_parameters()
    print(
        f"loaded {a.model} ({a.attn}) in {time.perf_counter() - t0:.1f}s: "
        f"trainable {trainable:,} of {total:,} params ({100 * trainable / total:.2f}%)"
    )
    # The adapters are injected in place, so the inner decoder (LlamaModel) runs them.
    decoder = model.get_base_model().model
    lm_head = model.get_base_model().lm_head  # tied to embed_tokens, frozen
    vocab = model.get_base_model().config.vocab_size

    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(a.seed)
    n_targets = a.grad_accum * a.micro_batch * (a.seq // 2)
    # Positions (of the input ids[:, :-1]) whose next token is a target: the second half.
    mask = torch.zeros(a.micro_batch, a.seq - 1, dtype=torch.bool)
    mask[:, a.seq // 2 - 1 :] = True

    tokens, elapsed = 0, 0.0
    for step in range(a.steps + 1):
        t0 = time.perf_counter()
        batches = [
            torch.randint(0, vocab, (a.micro_batch, a.seq), generator=gen)
            for _ in range(a.grad_accum)
        ]
        step_loss = 0.0
        for ids in batches:
            # As rmsweb's trainer: the LM head and softmax only on target positions.
            hidden = decoder(input_ids=ids[:, :-1], use_cache=False).last_hidden_state
            logits = lm_head(hidden[mask])
            logp = logits.log_softmax(-1).gather(-1, ids[:, 1:][mask][:, None]).squeeze(-1)
            loss = -logp.sum() / n_targets
            loss.backward()
            step_loss += loss.item()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad()
        dt = time.perf_counter() - t0
        if step > 0:  # the first step warms up
            tokens += a.grad_accum * a.micro_batch * a.seq
            elapsed += dt
        print(f"step {step} loss {step_loss:.4f} {dt:.2f}s")
    print(f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} attn={a.attn}")
    print(f"torch {torch.__version__} threads {torch.get_num_threads()}: {tokens / elapsed:.0f} tokens/s")


if __name__ == "__main__":
    main()
