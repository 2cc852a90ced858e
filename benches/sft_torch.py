#!/usr/bin/env python3
"""PyTorch CPU reference for rmsweb's tiny SFT preset: the same Qwen3-style decoder
(RMS norm, per-head q/k norm, GQA, RoPE, SwiGLU, tied embeddings), the same shapes,
batch and optimizer (AdamW, grad clipping), trained on random token batches with a
loss on the second half of each sequence (the LM head applied to those positions only,
as rmsweb's trainer does). Prints tokens/s over the timed steps.

    python3 benches/sft_torch.py --seq 512 --micro-batch 4 --grad-accum 2 --steps 6

Compare with `rmsweb train sft --preset tiny ...` (perf/tokens_per_s in metrics.jsonl)
run with the same --seq/batch (see benches/README or the model issue's closing note).
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


def rope(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    rot = torch.cat([-x2, x1], -1)
    return x * cos + rot * sin


class Layer(nn.Module):
    def __init__(self, a):
        super().__init__()
        H, nh, nkv, hd, I = a.hidden, a.heads, a.kv_heads, a.head_dim, a.inter
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q = nn.Linear(H, nh * hd, bias=False)
        self.k = nn.Linear(H, nkv * hd, bias=False)
        self.v = nn.Linear(H, nkv * hd, bias=False)
        self.o = nn.Linear(nh * hd, H, bias=False)
        self.qn, self.kn = RMSNorm(hd), RMSNorm(hd)
        self.ln1, self.ln2 = RMSNorm(H), RMSNorm(H)
        self.gate = nn.Linear(H, I, bias=False)
        self.up = nn.Linear(H, I, bias=False)
        self.down = nn.Linear(I, H, bias=False)

    def forward(self, x, cos, sin, mask):
        b, l, _ = x.shape
        h = self.ln1(x)
        q = self.qn(self.q(h).view(b, l, self.nh, self.hd)).transpose(1, 2)
        k = self.kn(self.k(h).view(b, l, self.nkv, self.hd)).transpose(1, 2)
        v = self.v(h).view(b, l, self.nkv, self.hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, 1)
        v = v.repeat_interleave(rep, 1)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.hd) + mask
        ctx = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, l, -1)
        x = x + self.o(ctx)
        h = self.ln2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.emb = nn.Embedding(a.vocab, a.hidden)
        nn.init.normal_(self.emb.weight, std=0.02)
        self.layers = nn.ModuleList([Layer(a) for _ in range(a.layers)])
        self.norm = RMSNorm(a.hidden)
        inv = 1.0 / (10000 ** (torch.arange(0, a.head_dim, 2).float() / a.head_dim))
        f = torch.outer(torch.arange(a.seq).float(), inv)
        self.register_buffer("cos", torch.cat([f.cos(), f.cos()], -1))
        self.register_buffer("sin", torch.cat([f.sin(), f.sin()], -1))
        m = torch.full((a.seq, a.seq), float("-inf")).triu(1)
        self.register_buffer("mask", m)

    def forward(self, ids):
        l = ids.shape[1]
        x = self.emb(ids)
        cos, sin, mask = self.cos[:l], self.sin[:l], self.mask[:l, :l]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--inter", type=int, default=768)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--grad-accum", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    model = Model(a)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    tokens, elapsed = 0, 0.0
    for step in range(a.steps + 1):
        t0 = time.perf_counter()
        batches = [torch.randint(0, a.vocab, (a.micro_batch, a.seq)) for _ in range(a.grad_accum)]
        n_targets = a.grad_accum * a.micro_batch * (a.seq // 2)
        for ids in batches:
            # As rmsweb's trainer: the LM head and softmax only on target positions.
            hidden = model(ids[:, :-1])
            mask = torch.zeros(ids.shape[0], ids.shape[1] - 1, dtype=torch.bool)
            mask[:, a.seq // 2 - 1 :] = True
            logits = hidden[mask] @ model.emb.weight.t()
            logp = logits.log_softmax(-1).gather(-1, ids[:, 1:][mask][:, None]).squeeze(-1)
            loss = -logp.sum() / n_targets
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        dt = time.perf_counter() - t0
        if step > 0:  # the first step warms up
            tokens += a.grad_accum * a.micro_batch * a.seq
            elapsed += dt
        print(f"step {step} loss {loss.item() * a.grad_accum:.4f} {dt:.2f}s")
    print(f"torch {torch.__version__} threads {torch.get_num_threads()}: {tokens / elapsed:.0f} tokens/s")


if __name__ == "__main__":
    main()
