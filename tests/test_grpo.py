import copy
import math

import pytest
import torch

import es_grpo
from es_grpo import Context, GRPOState, group_advantages, grpo_loss


def test_group_advantages_with_and_without_std():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.1, 0.1, 0.1, 0.1])
    mean_only = group_advantages(rewards, 4, scale_std=False)
    torch.testing.assert_close(mean_only,
                               torch.tensor([0.75, -0.25, -0.25, -0.25, 0.0, 0.0, 0.0, 0.0]))
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
    # ratios e^0.2 and e^-0.4 are outside [0.8, 1.2]
    assert stats["clip_frac"] == pytest.approx(2 / 3)


def test_kl_is_zero_when_policy_equals_reference():
    logp = torch.randn(3, 5)
    _, stats = grpo_loss(logp, logp, logp, torch.randn(3), torch.ones(3, 5), 0.2, 1.0)
    assert stats["kl"] == 0.0


def test_grpo_step_moves_weights_and_reports(fresh_tiny):
    model, tokenizer = fresh_tiny
    import copy
    reference = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    args = es_grpo.Args(grpo_prompts=4, grpo_group=4)
    problems = es_grpo.generate_problems("countdown", 4, seed=3)
    stats = es_grpo.grpo_step(Context(args, model, tokenizer), GRPOState(optimizer, reference),
                              problems, seed=0)
    assert (stats["sequences"] == 16 and 0 <= stats["zero_std_frac"] <= 1
            and stats["kl"] == pytest.approx(0, abs=1e-6))
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters()))


def test_microbatched_grpo_step_accumulates_the_same_gradient(tiny):
    """scale/grpo.py's step, whole and in micro-batches of 8 rows (each group's prompt run once),
    takes es_grpo.grpo_step's step (one forward pass of every row) up to float rounding, with its
    statistics."""
    import copy
    from scale.config import Args
    from scale.grpo import grpo_step
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 4, seed=3)
    results = []
    for step_of, microbatch in ((es_grpo.grpo_step, 0), (grpo_step, 0), (grpo_step, 8)):
        policy = copy.deepcopy(model)
        optimizer = torch.optim.SGD(policy.parameters(), lr=1.0)  # the step is the gradient itself
        args = Args(grpo_prompts=4, grpo_group=4, grpo_microbatch=microbatch)
        run = Context(args, policy, tokenizer)
        stats = step_of(run, GRPOState(optimizer, copy.deepcopy(model)), problems, seed=0)
        results.append((stats,
                        [p.detach() - q.detach()
                         for p, q in zip(policy.parameters(), model.parameters())]))
    (whole, step), *layered = results
    assert max(float(a.abs().max()) for a in step) > 1e-3
    for stats, layered_step in layered:
        assert max(float((a - b).abs().max()) for a, b in zip(step, layered_step)) < 1e-6
        assert stats.keys() == whole.keys() and stats["reward"] == whole["reward"]
        for key in ("loss", "kl", "clip_frac", "entropy"):
            assert stats[key] == pytest.approx(whole[key], rel=1e-5, abs=1e-7)


def test_a_grpo_step_raises_the_log_probability_of_better_completions_and_lowers_the_worse(
        tiny, monkeypatch):
    """The policy gradient's sign, on the step's own samples: after one small plain gradient step,
    the completions with a positive advantage are on average more likely (log-probability summed
    over their tokens) and those with a negative one less, and sum_i A_i * gain_i > 0 (its
    first-order guarantee). With the rewards negated, the same samples move the other way."""
    import copy
    problems = es_grpo.generate_problems("countdown", 4, seed=5)
    args = es_grpo.Args(grpo_prompts=4, grpo_group=8, grpo_beta=0.0, max_new_tokens=8)
    group, score = [p for p in problems for _ in range(8)], es_grpo.score
    for sign in (1, -1):
        model = copy.deepcopy(tiny[0])
        reference, recorded = copy.deepcopy(model), []
        monkeypatch.setattr(es_grpo, "score", lambda *a, sign=sign: sign * score(*a))

        def recording(*a, **k):  # es_grpo.rollout, keeping what the step trains on
            recorded.append(es_grpo.rollout(*a, **k))
            return recorded[-1]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)  # the gradient's direction alone
        run = Context(args, model, tiny[1], generate=recording)
        es_grpo.grpo_step(run, GRPOState(optimizer, reference), problems, seed=1)
        roll = recorded[0]
        advantages = es_grpo.group_advantages(sign * score(run, group, roll.texts), 8)  # (B,)
        with torch.no_grad():
            before, after = (es_grpo.token_logprobs(net, roll, 1.0)[0]  # (B, T)
                             for net in (reference, model))
        gain = ((after - before) * roll.completion_mask).sum(1)  # (B,)
        assert (advantages > 0).sum() >= 3 and (advantages < 0).sum() >= 3, \
            "no reward spread: other problems"
        assert (gain[advantages > 0].mean() > 0 > gain[advantages < 0].mean()
                and float(advantages @ gain) > 0)


def test_more_than_one_grpo_epoch_reuses_the_sampling_policy_and_clips(fresh_tiny):
    """With scale.train's --grpo-epochs 2 the second pass compares against the policy that sampled
    (ratio != 1, clipping can engage); with one epoch (es_grpo.py's step) the ratio is 1 by
    construction."""
    from scale.config import Args
    from scale.grpo import grpo_step
    model, tokenizer = fresh_tiny
    problems = es_grpo.generate_problems("countdown", 4, seed=3)
    clipped = {}
    for epochs in (1, 2):
        trained = copy.deepcopy(model)
        optimizer = torch.optim.AdamW(trained.parameters(), lr=1e-2)
        args = Args(grpo_prompts=4, grpo_group=4, grpo_epochs=epochs, grpo_beta=0.0)
        run = es_grpo.Context(args, trained, tokenizer)
        step = grpo_step(run, es_grpo.GRPOState(optimizer, None), problems, seed=0)
        clipped[epochs] = step["clip_frac"]
    assert clipped[1] == 0.0 and clipped[2] > 0.0


def test_an_autocast_grpo_step_takes_float32_s_gradient_up_to_bfloat16_rounding(tiny):
    """--grpo-autocast: the same rows and rewards, and a gradient pointing where float32's does
    (cosine > 0.99; its size within 5%) but not equal to it (the passes did run in bfloat16), the
    weights left float32."""
    import copy
    from scale.config import Args
    from scale.grpo import grpo_step
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 4, seed=3)
    steps, rewards = [], []
    for autocast in (False, True):
        policy = copy.deepcopy(model)
        optimizer = torch.optim.SGD(policy.parameters(), lr=1.0)  # the step is the gradient itself
        run = Context(Args(grpo_prompts=4, grpo_group=4, grpo_autocast=autocast), policy, tokenizer)
        rewards.append(grpo_step(run, GRPOState(optimizer, copy.deepcopy(model)), problems,
                                 seed=0)["reward"])
        steps.append(torch.cat([(p.detach() - q.detach()).flatten()
                                for p, q in zip(policy.parameters(), model.parameters())]))
        assert all(p.dtype == torch.float32 for p in policy.parameters())
    cosine = float(torch.nn.functional.cosine_similarity(steps[0], steps[1], dim=0))
    size = float(steps[1].norm() / steps[0].norm())
    print(f"autocast against float32: gradient cosine {cosine:.4f}, size ratio {size:.4f}")
    assert rewards[0] == rewards[1] and cosine > 0.99 and abs(size - 1) < 0.05
    assert not torch.equal(steps[0], steps[1])  # autocast did run: bfloat16's rounding shows
