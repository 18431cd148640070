"""scale/decode.py: the fast HF rollout decodes what es_grpo.rollout decodes (the tiny model; the
real model's tier measures the share of rows on SmolLM2), however the prompts are laid out, and in
bfloat16 from a copy that follows the model's weights."""
import copy

import pytest
import torch

import es_grpo
from es_grpo import Sampling, rollout
from scale.decode import (KEEP_SHARE, FastRollout, PromptLayout, ReservedDecoder, attention,
                          decode_attention)


def prompts_of(tokenizer, task: str, count: int, copies: int = 1, seed: int = 1) -> list[str]:
    problems = es_grpo.generate_problems(task, count, seed=seed)
    return [es_grpo.prompt_text(p, tokenizer) for p in problems for _ in range(copies)]


@pytest.mark.parametrize("temperature, copies", [(0.0, 1), (1.0, 1), (1.0, 8)])
def test_fast_rollout_decodes_as_es_grpo_rollout(tiny, temperature, copies):
    """Greedy and sampled, distinct prompts and groups of identical ones (shared once): the same
    tokens, and log-probs and entropy within float rounding, as es_grpo.rollout on the same rows."""
    model, tokenizer = tiny
    prompts = prompts_of(tokenizer, "countdown", 48 // copies,
                         copies) + prompts_of(tokenizer, "sort", 8)
    sampling = Sampling(temperature=temperature, max_new_tokens=12, seed=5, batch_size=4096)
    ours, theirs = FastRollout()(model, tokenizer, prompts,
                                 sampling), rollout(model, tokenizer, prompts, sampling)
    assert ours.texts == theirs.texts and torch.equal(ours.completion_mask, theirs.completion_mask)
    mask = theirs.completion_mask.bool()
    for name in ("logprobs", "entropy"):
        torch.testing.assert_close(getattr(ours, name)[mask], getattr(theirs, name)[mask],
                                   atol=1e-4, rtol=0)


def test_ended_rows_leave_the_batch_and_the_others_decode_as_before(tiny, stepped_rows):
    """Rows end at different steps: each step the model runs at least the rows still decoding and at
    most 1 / KEEP_SHARE as many (the cache drops ended rows in batches), and what comes out is
    es_grpo.rollout's."""
    model, tokenizer = tiny
    prompts = prompts_of(tokenizer, "countdown", 40)
    sampling = Sampling(temperature=1.0, max_new_tokens=24, seed=3, batch_size=4096)
    rows_run = stepped_rows  # each new token's step (scale/decode_step.py)
    ours = FastRollout()(model, tokenizer, prompts, sampling)
    theirs = rollout(model, tokenizer, prompts, sampling)
    assert ours.texts == theirs.texts and torch.equal(ours.completion_mask, theirs.completion_mask)
    torch.testing.assert_close(ours.logprobs, theirs.logprobs, atol=1e-4, rtol=0)
    lengths, steps = theirs.completion_mask.sum(1), theirs.completion_ids.shape[1]
    # rows yet to end at each later step
    decoding = [int((lengths > step).sum()) for step in range(1, steps)]
    ran = [shape[0] for shape in rows_run]
    assert len(rows_run) == steps - 1 and all(shape[1] == 1 for shape in rows_run)
    assert all(live <= run <= live / KEEP_SHARE
               for live, run in zip(decoding, ran)), (decoding, ran)
    assert decoding[-1] < len(prompts) and ran[-1] < len(prompts)  # rows did end, and left


def test_a_rank_share_of_fast_rows_samples_as_in_the_whole_batch(tiny):
    model, tokenizer = tiny
    prompts = prompts_of(tokenizer, "countdown", 10)
    fast, sampling = FastRollout(), Sampling(temperature=1.0, seed=4, batch_size=4)
    whole = fast(model, tokenizer, prompts, sampling)
    for first, last in ((0, 3), (3, 10), (5, 6)):
        share = fast(model, tokenizer, prompts[first:last], sampling, first_row=first,
                     total_rows=len(prompts))
        assert share.texts == whole.texts[first:last]


def test_the_layout_runs_the_shared_prefix_once_and_each_distinct_prompt_once():
    """Rows 0 and 2 are one prompt; every prompt begins with 7 8: the prefix is 7 8, the rest is
    left-padded, and each row points at its prompt. Without sharing, every row is its own and
    nothing is a prefix."""
    ids = torch.tensor([[0, 7, 8, 1, 2], [7, 8, 3, 4, 5], [0, 7, 8, 1, 2], [0, 0, 7, 8, 6]])
    mask = (ids != 0).long()
    layout = PromptLayout.of(ids, mask, 0, share=True)
    assert layout.prefix.tolist() == [[7, 8]] and layout.rows.tolist() == [0, 1, 0, 2]
    assert layout.rest.tolist() == [[0, 1, 2], [3, 4, 5], [0, 0, 6]]
    assert layout.rest_mask.tolist() == [[0, 1, 1], [1, 1, 1], [0, 0, 1]]
    alone = PromptLayout.of(ids, mask, 0, share=False)
    assert (alone.prefix.shape == (1, 0) and alone.rows.tolist() == [0, 1, 2, 3]
            and alone.rest.shape == (4, 5))
    # one prompt: all but its last token shared
    same = PromptLayout.of(ids[[0, 0]], mask[[0, 0]], 0, share=True)
    assert (same.prefix.tolist() == [[7, 8, 1]] and same.rest.tolist() == [[2]]
            and same.rows.tolist() == [0, 0])


def test_the_first_tokens_logits_match_a_full_forward_pass_with_and_without_sharing(tiny):
    model, tokenizer = tiny
    prompts = prompts_of(tokenizer, "countdown", 3, copies=2) + prompts_of(tokenizer, "add", 2)
    encoded = tokenizer(prompts, padding=True, return_tensors="pt", add_special_tokens=False)
    ids, mask = encoded["input_ids"], encoded["attention_mask"]
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask,
                     # (B, V)
                     position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits[:, -1].float()
        for share in (True, False):
            decoder = ReservedDecoder(model, 4, share)
            with attention(model, "es_grpo_decode"):
                first = decoder(ids, mask, None).logits[:, -1].float()
            torch.testing.assert_close(first, full, atol=1e-4, rtol=0)


def test_decode_attention_is_attention_over_the_unmasked_keys():
    """One query token against grouped keys: softmax(q k^T * scale) v over the keys the mask
    keeps."""
    torch.manual_seed(0)
    query, key, value = torch.randn(2, 6, 1, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    mask = torch.tensor([True, True, False, True, True]).expand(2, 1, 1, 5)
    out, _ = decode_attention(None, query, key, value, mask, scaling=8 ** -0.5)  # (B, 1, H, D)
    # each kv head, 2 queries
    repeated_key, repeated_value = (t.repeat_interleave(2, 1) for t in (key, value))
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, repeated_key, repeated_value, attn_mask=mask, scale=8 ** -0.5)
    torch.testing.assert_close(out.transpose(1, 2), expected, atol=1e-5, rtol=0)


def test_a_bfloat16_copy_follows_the_models_weights(fresh_tiny):
    """FastRollout("bfloat16") decodes a bfloat16 copy of a float32 model; after the weights change
    in place (as an ES member or a GRPO step changes them), it decodes the changed model; the model
    stays float32."""
    model, tokenizer = fresh_tiny
    prompts = prompts_of(tokenizer, "countdown", 16)
    fast, greedy = FastRollout("bfloat16"), Sampling(max_new_tokens=12)
    halved = lambda: FastRollout()(copy.deepcopy(model).to(torch.bfloat16), tokenizer, prompts,
                                   greedy).texts
    before = fast(model, tokenizer, prompts, greedy).texts
    assert before == halved()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    after = fast(model, tokenizer, prompts, greedy).texts
    assert after != before and after == halved()
    assert all(p.dtype == torch.float32 for p in model.parameters())
