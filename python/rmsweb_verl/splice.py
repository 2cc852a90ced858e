"""Token-level splicing of a rollout (no verl import): the rollout's own tokens with
its action replaced by the ground truth, and the mask of the new action's tokens.

The response is decoded (trailing end-of-sequence and padding tokens held back),
:func:`rmsweb_verl.splice_action` puts the ground-truth action in place of the
response's action, and the result is encoded again; a token belongs to the action
when its character span overlaps the action's. The end-of-sequence token, when the
rollout had one, is put back (it gets no loss).
"""

from __future__ import annotations

from typing import Any, Sequence

from . import parse_actions, splice_action


def _tail_specials(tokenizer, ids: list[int]) -> tuple[list[int], list[int]]:
    """Splits trailing EOS/pad tokens off ``ids``; returns (body, eos kept)."""
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id
    stop = {t for t in (eos, pad) if t is not None}
    body = list(ids)
    tail: list[int] = []
    while body and body[-1] in stop:
        t = body.pop()
        if t == eos and not tail:
            tail = [t]
    return body, tail


def _span_mask(offsets: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    return [1 if a < end and b > start and b > a else 0 for a, b in offsets]


def encode_with_offsets(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids of ``text`` (no special tokens added) and each token's character span."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def splice_rollout(tokenizer, response_ids: Sequence[int], ground_truth: Any) -> tuple[list[int], list[int]]:
    """The salvage sequence's response ids and its action mask (1 on the new action's
    tokens), for a rollout whose response tokens are ``response_ids``."""
    body, tail = _tail_specials(tokenizer, [int(t) for t in response_ids])
    text = tokenizer.decode(body, skip_special_tokens=False)
    spliced = splice_action(text, ground_truth)
    ids, offsets = encode_with_offsets(tokenizer, spliced["text"])
    start, end = spliced["action_span"]
    return ids + tail, _span_mask(offsets, start, end) + [0] * len(tail)


def action_token_mask(tokenizer, response_ids: Sequence[int]) -> list[int] | None:
    """The mask of the tokens that hold the response's own action list, or None when
    the response has no readable action (the log-prob probe of wrong actions)."""
    body, tail = _tail_specials(tokenizer, [int(t) for t in response_ids])
    text = tokenizer.decode(body, skip_special_tokens=False)
    found = parse_actions(text)
    if found is None:
        return None
    _, (start, end) = found
    ids, offsets = encode_with_offsets(tokenizer, text)
    if ids != body:
        # The text does not re-encode to the same tokens: map by decoding prefixes.
        offsets = []
        pos = 0
        for i in range(len(body)):
            nxt = len(tokenizer.decode(body[: i + 1], skip_special_tokens=False))
            offsets.append((pos, nxt))
            pos = nxt
    return _span_mask(offsets, start, end) + [0] * (len(response_ids) - len(body))
