import math

import pytest
import torch

import es_grpo
from es_grpo import group_advantages, grpo_loss, rollout, token_logprobs


def test_group_advantages_with_and_without_std():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.1, 0.1, 0.1, 0.1])
    mean_only = group_advantages(rewards, 4, scale_std=False)
    torch.testing.assert_close(mean_only, torch.tensor([0.75, -0.25, -0.25, -0.25, 0.0, 0.0, 0.0, 0.0]))
    scaled = group_advantages(rewards, 4, scale_std=True)
    torch.testing.assert_close(scaled[:4], mean_only[:4] / 0.5)  # sample std of (1,0,0,0) is 0.5
    assert torch.equal(scaled[4:], torch.zeros(4))  # zero-std group: zero advantage, no NaN


def test_grpo_loss_equals_hand_computation():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]])
    old = torch.tensor([[-1.2, -2.0], [-0.1, 0.0]])
    ref = torch.tensor([[-1.0, -1.5], [-0.5, 0.0]])
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    clip, beta = 0.2, 0.1
    terms = []
    for b, t in [(0, 0), (0, 1), (1, 0)]:
        ratio = math.exp(float(logp[b, t] - old[b, t]))
        clipped = min(max(ratio, 1 - clip), 1 + clip)
        surrogate = min(ratio * float(adv[b]), clipped * float(adv[b]))
        d = float(ref[b, t] - logp[b, t])
        terms.append(-surrogate + beta * (math.exp(d) - d - 1))
    loss, stats = grpo_loss(logp, old, ref, adv, mask, clip, beta)
    assert float(loss) == pytest.approx(sum(terms) / 3, rel=1e-6)
    assert stats["clip_frac"] == pytest.approx(2 / 3)  # ratios e^0.2 and e^-0.4 are outside [0.8, 1.2]


def test_kl_is_zero_when_policy_equals_reference():
    logp = torch.randn(3, 5)
    _, stats = grpo_loss(logp, logp, logp, torch.randn(3), torch.ones(3, 5), 0.2, 1.0)
    assert stats["kl"] == 0.0


def test_rollout_logprobs_match_a_full_forward_pass(tiny):
    """Left padding, positions and the KV cache in rollout agree with one forward pass."""
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 3, seed=1) + es_grpo.generate_problems("sort", 3, seed=1)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems]
    assert len({len(p) for p in prompts}) > 1  # prompts of different lengths: padding is exercised
    roll = rollout(model, tokenizer, prompts, temperature=1.0, max_new_tokens=12, seed=3)
    with torch.no_grad():
        logp, entropy = token_logprobs(model, roll)
    mask = roll.completion_mask.bool()
    torch.testing.assert_close(logp[mask], roll.logprobs[mask], atol=1e-4, rtol=0)
    torch.testing.assert_close(entropy[mask], roll.entropy[mask], atol=1e-4, rtol=0)


def test_rollout_is_seeded_and_greedy_is_batch_independent(tiny):
    model, tokenizer = tiny
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in es_grpo.generate_problems("countdown", 6, seed=2)]
    a = rollout(model, tokenizer, prompts, temperature=1.0, seed=9)
    assert a.texts == rollout(model, tokenizer, prompts, temperature=1.0, seed=9).texts
    greedy = rollout(model, tokenizer, prompts).texts
    assert greedy[:2] == rollout(model, tokenizer, prompts[:2]).texts
    assert greedy == rollout(model, tokenizer, prompts, batch_size=4).texts


def test_grpo_step_moves_weights_and_reports(fresh_tiny):
    model, tokenizer = fresh_tiny
    import copy
    reference = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    args = es_grpo.Args(grpo_prompts=4, grpo_group=4)
    problems = es_grpo.generate_problems("countdown", 4, seed=3)
    stats = es_grpo.grpo_step(model, reference, optimizer, tokenizer, problems, args, seed=0)
    assert stats["sequences"] == 16 and 0 <= stats["zero_std_frac"] <= 1 and stats["kl"] == pytest.approx(0, abs=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters()))


def test_a_rank_share_of_rows_samples_as_in_the_whole_batch(tiny):
    model, tokenizer = tiny
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in es_grpo.generate_problems("countdown", 10, seed=5)]
    whole = rollout(model, tokenizer, prompts, temperature=1.0, seed=4, batch_size=4)
    for first, last in ((0, 3), (3, 10), (5, 6)):  # shares inside one chunk and across chunk boundaries
        share = rollout(model, tokenizer, prompts[first:last], temperature=1.0, seed=4, batch_size=4, first_row=first,
                        total_rows=len(prompts))
        assert share.texts == whole.texts[first:last]


def test_microbatched_grpo_step_accumulates_the_same_gradient(tiny):
    import copy
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 4, seed=3)
    results = []
    for microbatch in (0, 8):
        policy = copy.deepcopy(model)
        optimizer = torch.optim.SGD(policy.parameters(), lr=1.0)  # the step is the gradient itself
        args = es_grpo.Args(grpo_prompts=4, grpo_group=4, grpo_microbatch=microbatch)
        stats = es_grpo.grpo_step(policy, copy.deepcopy(model), optimizer, tokenizer, problems, args, seed=0)
        results.append((stats, [p.detach() - q.detach() for p, q in zip(policy.parameters(), model.parameters())]))
    (whole, step), (pieces, step_in_pieces) = results
    assert max(float((a - b).abs().max()) for a, b in zip(step, step_in_pieces)) < 1e-6
    assert max(float(a.abs().max()) for a in step) > 1e-3
    for key in ("loss", "kl", "clip_frac", "entropy"):
        assert pieces[key] == pytest.approx(whole[key], rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("max_new_tokens", [1, 12])
def test_groups_sharing_a_prompt_give_the_same_log_probs_from_one_prompt_pass(tiny, max_new_tokens):
    model, tokenizer = tiny
    problems = [p for p in es_grpo.generate_problems("countdown", 3, seed=6) for _ in range(4)]
    roll = rollout(model, tokenizer, [es_grpo.prompt_text(p, tokenizer) for p in problems], temperature=1.0,
                   max_new_tokens=max_new_tokens, seed=2)
    with torch.no_grad():
        (plain, plain_entropy), (shared, shared_entropy) = (es_grpo.token_logprobs(model, roll, 1.0, g) for g in (1, 4))
    mask = roll.completion_mask.bool()
    apart = float((plain - shared)[mask].abs().max())
    print(f"shared prompt pass, {max_new_tokens} tokens: log-probs differ by {apart:.1e}")
    assert torch.allclose(plain[mask], shared[mask], atol=1e-4) and torch.allclose(plain_entropy[mask],
                                                                                   shared_entropy[mask], atol=1e-4)


def test_a_grpo_step_raises_the_log_probability_of_better_completions_and_lowers_the_worse(tiny, monkeypatch):
    """The policy gradient's sign, on the step's own samples: after one small plain gradient step, the
    completions with a positive advantage are on average more likely (log-probability summed over their
    tokens) and those with a negative one less, and sum_i A_i * gain_i > 0 (its first-order guarantee).
    With the rewards negated, the same samples move the other way."""
    import copy
    problems = es_grpo.generate_problems("countdown", 4, seed=5)
    args = es_grpo.Args(grpo_prompts=4, grpo_group=8, grpo_beta=0.0, max_new_tokens=8)
    group, score = [p for p in problems for _ in range(8)], es_grpo.score
    for sign in (1, -1):
        model = copy.deepcopy(tiny[0])
        reference, recorded = copy.deepcopy(model), []
        monkeypatch.setattr(es_grpo, "score", lambda p, t, sign=sign: sign * score(p, t))

        def recording(*a, **k):  # es_grpo.rollout, keeping what the step trains on
            recorded.append(es_grpo.rollout(*a, **k))
            return recorded[-1]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)  # the gradient's direction alone
        es_grpo.grpo_step(model, reference, optimizer, tiny[1], problems, args, seed=1, generate=recording)
        roll = recorded[0]
        advantages = es_grpo.group_advantages(sign * score(group, roll.texts), 8)  # (B,)
        with torch.no_grad():
            before, after = (es_grpo.token_logprobs(net, roll, 1.0, 8)[0] for net in (reference, model))  # (B, T)
        gain = ((after - before) * roll.completion_mask).sum(1)  # (B,)
        assert (advantages > 0).sum() >= 3 and (advantages < 0).sum() >= 3, "no reward spread: other problems"
        assert gain[advantages > 0].mean() > 0 > gain[advantages < 0].mean() and float(advantages @ gain) > 0
