"""GRPO's step at scale: es_grpo.run's `grpo_step` hook.

es_grpo.grpo_step samples every group on one process and takes its loss over all rows in one forward
pass. This step is the same update (the same rewards, advantages, grpo_loss and AdamW steps) with
three layers, each shown to change no result beyond float rounding:
- processes: each samples a contiguous share of the groups, with the noise those rows get in the
  whole batch; the loss divides by the tokens of every process, and the gradients are averaged by
  the `ranks` hook (scale/distributed.py: DDP or FSDP). tests/test_scale.py:
  test_grpo_on_two_ranks_*.
- micro-batches (--grpo-microbatch): the loss's fixed terms and its gradient are computed that many
  rows (whole groups) at a time and the gradients summed. tests/test_grpo.py:
  test_microbatched_grpo_step_accumulates_the_same_gradient.
- shared prompts: a group's prompt runs once and its keys and values are repeated for the group's
  completions: fewer FLOPs. tests/test_rollout.py:
  test_groups_sharing_a_prompt_give_the_same_log_probs_from_one_prompt_pass.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch.distributed.fsdp import FSDPModule
from torch.nn.parallel import DistributedDataParallel
from transformers import DynamicCache

from es_grpo import (Context, GRPOState, Rollout, cache_argument, group_advantages, grpo_loss,
                     prompt_text, score, token_logprobs)


@dataclass
class GRPOBatch:  # this process's scored groups, and what the loss holds fixed in them
    roll: Rollout
    advantages: torch.Tensor  # (B,)
    old_logp: torch.Tensor | None  # (B, T) of the sampling policy; None with one epoch: ratio 1
    ref_logp: torch.Tensor | None  # (B, T) of the reference; None without a KL term
    pieces: list[slice]  # micro-batches of whole groups
    tokens: torch.Tensor  # () completion tokens of the step per process, the loss's divisor


def grpo_step(run: Context, state: GRPOState, problems: list[dict], seed: int) -> dict:
    """es_grpo.grpo_step's contract, over processes, micro-batches and shared prompts."""
    args, G, tokenizer = run.args, run.args.grpo_group, run.tokenizer
    ranks = run.ranks
    mine = range(len(problems) * ranks.rank // ranks.world_size,
                 len(problems) * (ranks.rank + 1) // ranks.world_size)  # this process's groups
    group = [p for p in problems[mine.start:mine.stop] for _ in range(G)]
    first, total = mine.start * G, len(problems) * G
    with torch.no_grad():
        roll = run.generate(run.model, tokenizer, [prompt_text(p, tokenizer) for p in group],
                            args.sampling("grpo", seed), first_row=first, total_rows=total)
        rewards = score(run, group, roll.texts)  # (B,)
        advantages = group_advantages(rewards, G, args.grpo_scale_std)  # (B,)
        with precision(run):
            batch = fixed_terms(run, state, roll, advantages.to(roll.completion_ids.device))
    trainer = state.trainer or run.model
    trainer.train()
    for _ in range(args.grpo_epochs):
        state.optimizer.zero_grad(set_to_none=True)
        with precision(run):
            sums = grpo_backward(run, trainer, batch)
        state.optimizer.step()
    trainer.eval()
    after_optimizer_step(run.model, trainer)
    return grpo_statistics(run, rewards, sums, first, total, roll.tokens)


def precision(run: Context):
    """--grpo-autocast: matmuls in bfloat16 on float32 weights (torch.autocast; log-softmax and the
    loss stay float32, as autocast keeps them). Faster on a CPU with bfloat16 instructions
    (report/NOTES.md, "Real-size speed"); the gradient is bfloat16's rounding away from float32's
    (tests/test_grpo.py measures how far)."""
    if not getattr(run.args, "grpo_autocast", False):
        return contextlib.nullcontext()
    return torch.autocast(next(run.model.parameters()).device.type, dtype=torch.bfloat16)


def fixed_terms(run: Context, state: GRPOState, roll: Rollout, advantages) -> GRPOBatch:
    args, G, rows = run.args, run.args.grpo_group, len(roll.texts)
    size = max(1, args.grpo_microbatch // G) * G if args.grpo_microbatch else rows
    pieces = [slice(start, start + size) for start in range(0, rows, size)]
    def logprobs(net):  # (B, T)
        return torch.cat([group_logprobs(net, roll.rows(s), args.grpo_temperature,
                                         G)[0] for s in pieces])
    old_logp = logprobs(run.model) if args.grpo_epochs > 1 else None
    ref_logp = logprobs(state.reference) if args.grpo_beta else None
    tokens = run.ranks.sum(roll.completion_mask.sum()).clamp(min=1) / run.ranks.world_size  # ()
    return GRPOBatch(roll, advantages, old_logp, ref_logp, pieces, tokens)


def grpo_backward(run: Context, trainer, batch: GRPOBatch) -> dict:
    """Gradients of grpo_loss into trainer, micro-batch by micro-batch; the statistics' sums."""
    args, roll = run.args, batch.roll
    sums = dict.fromkeys(("loss", "kl", "clip_frac", "entropy_sum"), 0.0)
    for s in batch.pieces:
        with accumulating(trainer, last=s == batch.pieces[-1]):
            logp, entropy = group_logprobs(trainer, roll.rows(s), args.grpo_temperature,
                                           args.grpo_group)
            old = logp.detach() if batch.old_logp is None else batch.old_logp[s]  # (b, T)
            ref = logp.detach() if batch.ref_logp is None else batch.ref_logp[s]  # (b, T)
            loss, parts = grpo_loss(logp, old, ref, batch.advantages[s], roll.completion_mask[s],
                                    args.grpo_clip, args.grpo_beta, batch.tokens)
            loss.backward()
        parts.update(loss=loss.item(),
                     entropy_sum=float((entropy.detach() * roll.completion_mask[s]).sum()))
        sums = {name: sums[name] + parts[name] for name in sums}
    return sums


def grpo_statistics(run: Context, rewards, sums: dict, first: int, total: int, tokens: int):
    """es_grpo.grpo_step's metrics over every process; rewards (B,) are this process's rows first..
    of total."""
    everyone = torch.zeros(total)  # (all rows,) the other processes' rows summed in
    everyone[first:first + len(rewards)] = rewards
    totals = run.ranks.sum({"rewards": everyone, **sums, "tokens": tokens})
    grouped = totals["rewards"].view(-1, run.args.grpo_group)  # (all prompts, G)
    mean = {key: float(totals[key] / run.ranks.world_size) for key in ("loss", "kl", "clip_frac")}
    zero_std = float((grouped.amax(1) == grouped.amin(1)).float().mean())  # groups without signal
    return {"reward": float(totals["rewards"].mean()), "reward_std": float(totals["rewards"].std()),
            "loss": mean["loss"], "entropy": totals["entropy_sum"] / max(totals["tokens"], 1),
            "kl": mean["kl"], "clip_frac": mean["clip_frac"], "zero_std_frac": zero_std,
            "sequences": total, "tokens": int(totals["tokens"])}


def accumulating(trainer, last: bool):
    """DDP averages gradients after the last micro-batch only; FSDP reduces every piece's gradients
    to shards at once (holding them whole would undo the sharding)."""
    if isinstance(trainer, DistributedDataParallel) and not last:
        return trainer.no_sync()
    return contextlib.nullcontext()


@torch.no_grad()
def after_optimizer_step(model, trainer):
    """After an FSDP step every rank copies the trained shards, made whole, into the model rollouts
    use."""
    if isinstance(trainer, FSDPModule):
        for whole, part in zip(model.parameters(), trainer.parameters()):
            whole.copy_(part.full_tensor())


def group_logprobs(model, roll: Rollout, temperature: float, group: int):
    """es_grpo.token_logprobs, rows in runs of `group` sharing a prompt (shared_prompt_logits)."""
    return token_logprobs(model, roll, temperature,
                          shared_prompt_logits(model, roll, group) if group > 1 else None)


def shared_prompt_logits(model, roll: Rollout, group: int) -> torch.Tensor:
    """Logits (B, T, V) predicting each completion token; each group's prompt runs once."""
    mask = torch.cat([roll.prompt_mask, roll.completion_mask], 1)  # (B, P+T)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, P+T)
    start = roll.prompt_ids.shape[1]
    unwrapped = getattr(model, "module", model)  # a wrapped trainer keeps its model here
    cache = {cache_argument(unwrapped): DynamicCache(config=unwrapped.config)}
    prompt = model(input_ids=roll.prompt_ids[::group], attention_mask=roll.prompt_mask[::group],
                   position_ids=positions[::group, :start], use_cache=True, **cache)
    next(iter(cache.values())).batch_repeat_interleave(group)  # differentiable: reaches the prompt
    logits = [prompt.logits[:, -1:].repeat_interleave(group, 0)]  # (B, 1, V) the first token's
    if roll.completion_ids.shape[1] > 1:
        logits.append(model(input_ids=roll.completion_ids[:, :-1], attention_mask=mask[:, :-1],
                            # (B, T-1, V)
                            position_ids=positions[:, start:-1], use_cache=True, **cache).logits)
    return torch.cat(logits, 1).float()  # (B, T, V)
