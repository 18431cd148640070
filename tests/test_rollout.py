"""Decoding: left padding, the KV cache, seeded sampling shared out by rows, nucleus sampling,
shared prompts."""
import dataclasses

import numpy as np
import pytest
import torch

import es_grpo
from es_grpo import Sampling, rollout, token_logprobs


def test_rollout_logprobs_match_a_full_forward_pass(tiny):
    """Left padding, positions and the KV cache in rollout agree with one forward pass."""
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 3,
                                         seed=1) + es_grpo.generate_problems("sort", 3, seed=1)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems]
    assert len({len(p) for p in prompts}) > 1  # prompts of different lengths: padding is exercised
    roll = rollout(model, tokenizer, prompts, Sampling(temperature=1.0, max_new_tokens=12, seed=3))
    with torch.no_grad():
        logp, entropy = token_logprobs(model, roll)
    mask = roll.completion_mask.bool()
    torch.testing.assert_close(logp[mask], roll.logprobs[mask], atol=1e-4, rtol=0)
    torch.testing.assert_close(entropy[mask], roll.entropy[mask], atol=1e-4, rtol=0)


def test_rollout_is_seeded_and_greedy_is_batch_independent(tiny):
    model, tokenizer = tiny
    prompts = [es_grpo.prompt_text(p,
                                   tokenizer) for p
                                   in es_grpo.generate_problems("countdown", 6, seed=2)]
    a = rollout(model, tokenizer, prompts, Sampling(temperature=1.0, seed=9))
    assert a.texts == rollout(model, tokenizer, prompts, Sampling(temperature=1.0, seed=9)).texts
    greedy = rollout(model, tokenizer, prompts).texts
    assert greedy[:2] == rollout(model, tokenizer, prompts[:2]).texts
    assert greedy == rollout(model, tokenizer, prompts, Sampling(batch_size=4)).texts


def test_a_rank_share_of_rows_samples_as_in_the_whole_batch(tiny):
    """A share of the rows gets the noise of its rows in the whole batch: in es_grpo.rollout (one
    generator over the call's rows), and in scale's chunks of batch_size rows (one per chunk), which
    decode a batch of one chunk as es_grpo.rollout does."""
    from scale.chunks import chunked_rollout
    model, tokenizer = tiny
    prompts = [es_grpo.prompt_text(p,
                                   tokenizer) for p
                                   in es_grpo.generate_problems("countdown", 10, seed=5)]
    for decode, size in ((rollout, 4), (chunked_rollout, 4), (chunked_rollout, 16)):
        sampling = Sampling(temperature=1.0, seed=4, batch_size=size)
        whole = decode(model, tokenizer, prompts, sampling)
        # shares inside one chunk and across chunk boundaries
        for first, last in ((0, 3), (3, 10), (5, 6)):
            share = decode(model, tokenizer, prompts[first:last], sampling, first_row=first,
                           total_rows=len(prompts))
            assert share.texts == whole.texts[first:last]
    # one chunk: the same
    assert chunked_rollout(model, tokenizer, prompts, sampling).texts == whole.texts
    assert chunked_rollout(model, tokenizer, prompts,
                           Sampling(1.0, seed=4, batch_size=4)).texts != whole.texts


@pytest.mark.parametrize("max_new_tokens", [1, 12])
def test_groups_sharing_a_prompt_give_the_same_log_probs_from_one_prompt_pass(tiny, max_new_tokens):
    from scale.grpo import group_logprobs
    model, tokenizer = tiny
    problems = [p for p in es_grpo.generate_problems("countdown", 3, seed=6) for _ in range(4)]
    roll = rollout(model, tokenizer, [es_grpo.prompt_text(p, tokenizer) for p in problems],
                   Sampling(temperature=1.0, max_new_tokens=max_new_tokens, seed=2))
    with torch.no_grad():
        (plain, plain_entropy), (shared,
                                 shared_entropy) = (group_logprobs(model, roll, 1.0, g) for g
                                                    in (1, 4))
    mask = roll.completion_mask.bool()
    apart = float((plain - shared)[mask].abs().max())
    print(f"shared prompt pass, {max_new_tokens} tokens: log-probs differ by {apart:.1e}")
    assert (torch.allclose(plain[mask], shared[mask], atol=1e-4)
            and torch.allclose(plain_entropy[mask], shared_entropy[mask], atol=1e-4))


def test_eval_top_p_keeps_only_the_nucleus(tiny):
    """A nucleus too small to hold two tokens is greedy decoding, whatever the temperature."""
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 4, seed=4)
    args = es_grpo.Args(eval_samples=16, eval_temperature=1.0, max_new_tokens=6)

    def completions(**changes):  # what evaluate decoded with these flags
        texts = []
        def generate(*inputs, **options):
            texts.extend(es_grpo.rollout(*inputs, **options).texts)
            return es_grpo.rollout(*inputs, **options)
        es_grpo.evaluate(es_grpo.Context(dataclasses.replace(args, **changes), model, tokenizer,
                                         generate), problems)
        return texts
    greedy = completions(eval_temperature=0.0)
    assert completions(eval_top_p=1e-6) == greedy
    # the control: the full distribution at this temperature is not greedy
    assert completions() != greedy


def test_evaluate_keeps_each_problems_entropy_sum_and_tokens_and_they_add_up(tiny):
    """evaluate's per-problem entropy sums and token counts (what an entropy interval over problems
    reads): their totals give its token entropy and mean length, each problem's own rollout gives
    its entry, and the problems differ (their spread is what the interval measures)."""
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 5, seed=7)
    args = es_grpo.Args(eval_samples=16, eval_temperature=1.0, max_new_tokens=8, rollout_batch=24)
    result = es_grpo.evaluate(es_grpo.Context(args, model, tokenizer), problems)
    sums, lengths = np.array(result["entropy_sums"]), np.array(result["lengths"])
    assert sums.shape == lengths.shape == (5,) and len(set(sums.round(6))) == 5
    assert sums.sum() / lengths.sum() == pytest.approx(result["entropy"], rel=1e-12)
    assert lengths.sum() / (5 * 16) == pytest.approx(result["length"], rel=1e-12)
    rows = [es_grpo.prompt_text(p, tokenizer) for p in problems for _ in range(16)]
    # the second chunk of 24 rows, seeded by its first row: problem 2 is its rows 8-23 (32-47 of
    # all)
    chunk = es_grpo.rollout(model, tokenizer, rows[24:48],
                            dataclasses.replace(args.sampling("eval", 0), seed=24))
    assert float(chunk.entropy[8:].sum()) == pytest.approx(sums[2], rel=1e-5)
    assert int(chunk.completion_mask[8:].sum()) == lengths[2]
