"""es_grpo.rollout in chunks of at most sampling.batch_size rows: run()'s `generate` hook on the HF
path.

es_grpo.rollout decodes a call's rows together, from one generator over the call's rows. Here the
rows of a call are cut where the whole batch's chunks of batch_size rows begin, and chunk c (its
first row c in the whole batch) is decoded with its own generator, seeded by sampling.seed + c, over
its rows: what es_grpo.rollout gives that chunk alone. A row gets the same noise whichever process
decodes it and however the batch is shared out (tests/test_rollout.py:
test_a_rank_share_of_rows_samples_as_in_the_whole_batch); a batch of one chunk decodes as
es_grpo.rollout does (the same test), and so does evaluation, whose chunks es_grpo seeds so.
"""
from __future__ import annotations

import dataclasses

import torch

from es_grpo import Rollout, Sampling, rollout


def chunked_rollout(model, tokenizer, prompts: list[str], sampling: Sampling = Sampling(),
                    first_row: int = 0, total_rows: int | None = None, decode=rollout) -> Rollout:
    """es_grpo.rollout's contract, decoding at most sampling.batch_size rows at once (each chunk by
    decode, es_grpo.rollout's contract too: scale/decode.py's fast_rollout)."""
    end, size = first_row + len(prompts), sampling.batch_size
    total = total_rows or end
    cuts = [first_row, *range(first_row - first_row % size + size, end, size), end]
    parts = []
    for a, b in zip(cuts, cuts[1:]):
        chunk = a - a % size
        parts.append(decode(model, tokenizer, prompts[a - first_row:b - first_row],
                             dataclasses.replace(sampling, seed=sampling.seed + chunk),
                             first_row=a - chunk, total_rows=min(size, total - chunk)))
    return parts[0] if len(parts) == 1 else concat_rollouts(parts, tokenizer.pad_token_id)


def concat_rollouts(parts: list[Rollout], pad_id: int) -> Rollout:
    def cat(name, value, left):  # each part's (b, width) padded to the widest, the rows stacked
        tensors = [getattr(p, name) for p in parts]
        width = max(t.shape[1] for t in tensors)
        gaps = [(width - t.shape[1], 0) if left else (0, width - t.shape[1]) for t in tensors]
        return torch.cat([torch.nn.functional.pad(t, gap, value=value)
                          for t, gap in zip(tensors, gaps)], 0)
    return Rollout(sum((p.texts for p in parts), []), cat("prompt_ids", pad_id, True),
                   cat("prompt_mask", 0, True),
                   cat("completion_ids", pad_id, False), cat("completion_mask", 0, False),
                   cat("logprobs", 0.0, False), cat("entropy", 0.0, False))
