import copy
import dataclasses

import pytest
import torch
from safetensors.torch import load_file

import es_grpo
from conftest import SMALL_RUN, es_step_recording_rewards, run_es_grpo, summary_of
from es_grpo import Context, ESState, es_update, js_succ, noise, set_weights, zscore


def snapshot(model):
    return [p.detach().clone() for p in model.parameters()]


def test_perturb_then_restore_gives_identical_weights(fresh_tiny):
    model, _ = fresh_tiny
    params = list(model.parameters())
    before = snapshot(model)
    master = [p.detach().float().clone() for p in params]
    set_weights(params, master, seed=123, sigma=0.05)
    assert any(not torch.equal(a, b) for a, b in zip(before, params))
    set_weights(params, master)
    assert all(torch.equal(a, b) for a, b in zip(before, params))


def test_noise_is_regenerable_and_independent_per_tensor():
    like = torch.zeros(64, 64)
    assert torch.equal(noise(7, 3, like), noise(7, 3, like))
    assert not torch.equal(noise(7, 3, like), noise(7, 4, like))  # same shape, other tensor
    assert not torch.equal(noise(7, 3, like), noise(8, 3, like))  # other member


def test_es_update_equals_direct_computation(fresh_tiny):
    model, _ = fresh_tiny
    params = list(model.parameters())
    theta = [p.detach().double().clone() for p in params]
    master = [p.detach().float().clone() for p in params]
    seeds, rewards, sigma, alpha = [11, 22, 33, 44], torch.tensor([0.1, 0.5, 0.2, 0.9]), 0.01, 0.003
    eps = []  # read each member's noise back from its perturbed weights
    for seed in seeds:
        set_weights(params, master, seed, sigma)
        eps.append([(p.detach().double() - t) / sigma for p, t in zip(params, theta)])
    set_weights(params, master)
    z = (rewards - rewards.mean()) / rewards.std()
    es_update(params, master, seeds, z, alpha)
    for i, (param, base) in enumerate(zip(params, theta)):
        expected = base + alpha / len(seeds) * sum(float(z[n]) * eps[n][i] for n
                                                   in range(len(seeds)))
        torch.testing.assert_close(param.detach().double(), expected, atol=2e-6, rtol=0)
        assert torch.equal(master[i], param.detach())  # weights follow the fp32 master


def test_equal_rewards_give_zero_update_and_no_nan(fresh_tiny):
    model, _ = fresh_tiny
    params = list(model.parameters())
    before = snapshot(model)
    master = [p.detach().float().clone() for p in params]
    z = zscore(torch.full((8,), 0.1))
    assert torch.equal(z, torch.zeros(8))
    es_update(params, master, list(range(8)), z, alpha=1.0)
    assert all(torch.equal(a, b) for a, b in zip(before, params))


def test_js_succ_on_hand_built_success_rates():
    assert js_succ(torch.full((4, 3), 0.3)) == pytest.approx(0.0, abs=1e-6)
    split = torch.tensor([[1.0], [0.0]])  # two members, one always right, one always wrong
    assert js_succ(split) == pytest.approx(torch.log(torch.tensor(2.0)).item(), abs=1e-6)
    assert 0 < js_succ(torch.tensor([[0.2], [0.6]])) < js_succ(split)


def test_es_step_scores_population_and_moves_weights(fresh_tiny):
    """One iteration: N x P sequences scored, weights moved, model left equal to the fp32 master."""
    model, tokenizer = fresh_tiny
    params = list(model.parameters())
    master = [p.detach().float().clone() for p in params]
    args = es_grpo.Args(es_population=4, es_prompts=8, es_temperature=0.0)
    problems = es_grpo.generate_problems("countdown", 8, seed=5)
    before = snapshot(model)
    stats = es_grpo.es_step(Context(args, model, tokenizer), ESState(params, master), problems,
                            seed=1)
    assert stats["sequences"] == 32 and stats["tokens"] > 0 and 0 <= stats["disagreement"] <= 0.7
    assert any(not torch.equal(a, b) for a, b in zip(before, params))
    assert all(torch.equal(m, p.detach()) for m, p in zip(master, params))


def test_a_negative_seed_mirrors_the_noise():
    """The antithetic pair (s, -s): eps_-s = -eps_s exactly, for every tensor; noise alone (exercise
    4)."""
    for index, like in enumerate((torch.zeros(5), torch.zeros(3, 4))):
        eps = noise(7, index, like)
        assert torch.equal(noise(-7, index, like), -eps) and eps.abs().sum() > 0


def test_antithetic_pairs_update_by_reward_differences():
    """Hand-built: one tensor, one pair (s, -s). The mirrored estimator: sum_n z_n eps_n = (z_s -
    z_-s) eps_s; equal rewards within the pair cancel (up to float rounding)."""
    like = torch.zeros(5)
    eps = noise(7, 0, like)
    params, master = [torch.zeros(5)], [torch.zeros(5)]
    es_update(params, master, [7, -7], torch.tensor([1.0, -1.0]), alpha=0.5)
    torch.testing.assert_close(master[0], 0.5 / 2 * (1.0 - -1.0) * eps)
    params, master = [torch.zeros(5)], [torch.zeros(5)]
    es_update(params, master, [7, -7], torch.tensor([0.8, 0.8]), alpha=0.5)
    torch.testing.assert_close(master[0], torch.zeros(5), atol=1e-7, rtol=0)


def test_antithetic_and_null_es_steps(fresh_tiny):
    """Antithetic: the population is N/2 mirrored pairs (odd N is refused). Null control: the same
    member rewards, credited to other members, so the same reward statistics and another update."""
    model, tokenizer = fresh_tiny
    problems = es_grpo.generate_problems("countdown", 8, seed=5)
    args = es_grpo.Args(es_population=4, es_prompts=8, es_temperature=0.0, es_sigma=0.05)
    params, results = list(model.parameters()), {}
    initial = es_grpo.master_weights(params)
    for name, changes in (("plain", {}), ("null", {"es_null": True}),
                          ("mirrored", {"es_antithetic": True})):
        master = [m.clone() for m in initial]
        run = Context(dataclasses.replace(args, **changes), model, tokenizer)
        stats = es_grpo.es_step(run, ESState(params, master), problems, seed=1)
        results[name] = (stats, master)
        es_grpo.set_weights(params, initial)
    (plain, plain_master), (null, null_master) = results["plain"], results["null"]
    assert plain["reward_std"] > 0  # the members differ, so an update has a direction to lose
    assert (null["reward"],
            null["reward_std"]) == pytest.approx((plain["reward"], plain["reward_std"]), rel=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(plain_master, null_master))
    assert results["mirrored"][0]["sequences"] == 32
    with pytest.raises(SystemExit):
        es_grpo.parse_args(["--es-antithetic", "--es-population", "5"])


def test_an_es_step_moves_the_weights_toward_the_better_member(fresh_tiny, monkeypatch):
    """A problem built by hand: a member's reward is how far its final norm's weights lie along a
    fixed direction d, so the better members are those whose eps points along d. The update must
    then raise the reward (u . d > 0) and point along d: in those 128 coordinates its cosine with d
    is about sqrt(N / (N + 128)) = 0.45 for N = 32, where a direction that ignored the rewards would
    be about 0.09."""
    model, tokenizer = fresh_tiny
    params = list(model.parameters())
    index = next(i for i, p in enumerate(params) if p is model.model.norm.weight)
    master = es_grpo.master_weights(params)
    before = master[index].clone()
    d = torch.randn(before.shape, generator=torch.Generator().manual_seed(0))

    def grade(problem, text):  # every row of the member now in the model: the run's grade hook
        return float((params[index].detach().float() - before) @ d), ""
    args = es_grpo.Args(es_population=32, es_prompts=1, max_new_tokens=1, es_alpha=1e-2)
    es_grpo.es_step(Context(args, model, tokenizer, grade=grade), ESState(params, master),
                    es_grpo.generate_problems("countdown", 1, seed=1), seed=3)
    step = master[index] - before
    cosine = float(step @ d / (step.norm() * d.norm()))
    assert float(step @ d) > 0 and cosine > 0.25, cosine


def test_sampled_es_gives_every_member_the_same_sampling_noise(fresh_tiny):
    """--es-temperature > 0 (departure 2): members differ only by their weights. With a sigma too
    small to move any fp32 weight, every member samples the same completions, so rewards agree and
    nothing moves."""
    model, tokenizer = fresh_tiny
    problems = es_grpo.generate_problems("countdown", 8, seed=6)
    args = es_grpo.Args(es_population=6, es_prompts=8, es_temperature=1.0, es_sigma=1e-20,
                        max_new_tokens=6)
    stats, rewards, _, texts = es_step_recording_rewards(model, tokenizer, problems, args)
    assert len(set(texts)) > 1  # sampled, not greedy: the prompts' completions vary
    # a prompt's completion is every member's
    assert all(texts[i::8] == texts[i::8][:1] * 6 for i in range(8))
    assert stats["reward_std"] == 0.0 and torch.equal(rewards, rewards[:1].expand(6))
    moved, _, _, _ = es_step_recording_rewards(model, tokenizer, problems,
                                               dataclasses.replace(args, es_sigma=3e-2))
    # the control: perturbations that move weights do change the samples
    assert moved["reward_std"] > 0.0


def test_es_without_zscore_steps_along_centred_raw_rewards(fresh_tiny, monkeypatch):
    """--no-es-zscore: theta <- theta + alpha / N * sum_n (r_n - mean r) eps_n, on the raw
    rewards."""
    model, tokenizer = fresh_tiny
    problems = es_grpo.generate_problems("countdown", 8, seed=7)
    args = es_grpo.Args(es_population=4, es_prompts=8, es_zscore=False, es_alpha=0.5, es_sigma=3e-2,
                        max_new_tokens=6)
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    before, scored, score = [m.clone() for m in master], [], es_grpo.score
    monkeypatch.setattr(es_grpo, "zscore", lambda r: pytest.fail("--no-es-zscore must not z-score"))
    monkeypatch.setattr(es_grpo, "score", lambda *a: scored.append(score(*a)) or scored[-1])
    es_grpo.es_step(es_grpo.Context(args, model, tokenizer), es_grpo.ESState(params, master),
                    problems, seed=1)
    rewards = torch.stack([member.mean() for member in scored]).float()  # (N,) one member at a time
    assert len(scored) == 4 and rewards.max() > rewards.min(), \
        "no reward spread: pick other problems"
    seeds = es_grpo.random.Random(1).sample(range(2**31 - 1), 4)  # es_step's draw for seed 1
    for index in (0, len(before) - 1):
        step = sum(float(w) * es_grpo.noise(s, index, before[index])
                   for s, w in zip(seeds, rewards - rewards.mean()))
        torch.testing.assert_close(master[index], before[index] + 0.5 / 4 * step, atol=1e-6, rtol=0)


def test_bfloat16_weights_train_from_an_fp32_master(tmp_path, monkeypatch):
    """bfloat16 weights, an fp32 master: the update survives rounding. The members' rewards are made
    to differ (each scoring call alternates 0 and 1), so that the test does not depend on a lucky
    spread of rewards."""
    calls = iter(range(10**6))
    monkeypatch.setattr(es_grpo, "score", lambda run, problems, texts: torch.full(
        (len(problems),), float(next(calls) % 2)))
    out = tmp_path / "run"
    result = run_es_grpo(*SMALL_RUN, "--algo", "es", "--steps", "2", "--dtype", "bfloat16",
                         "--es-alpha", "0.05", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    trained = load_file(out / "stage1-es" / "model.safetensors")
    base = load_file(es_grpo.TINY_MODEL / "model.safetensors")
    assert {t.dtype for t in trained.values()} == {torch.bfloat16}
    # the update survived rounding
    assert any(not torch.equal(trained[k], base[k].bfloat16()) for k in trained)
    stages = summary_of(out)
    assert all(0.0 <= s["pass@1"] <= 1.0 and s["entropy"] == s["entropy"] for s in stages)


def test_an_update_from_a_bfloat16_population_is_the_es_update_of_its_definition(tiny):
    """Members decoded with bfloat16 weights (scale.train's --dtype bfloat16, the fast HF path),
    scored, and the fp32 master moved by alpha/N sum_n z_n eps_n, eps regenerated from the seeds in
    fp32: computed here from the rewards alone, it is the master the step left (within fp32
    rounding), and the model holds it in bfloat16."""
    from scale.decode import FastRollout
    model, tokenizer = tiny
    model = copy.deepcopy(model).to(torch.bfloat16)
    args = es_grpo.parse_args(["--es-population", "6", "--es-sigma", "0.05", "--es-alpha", "0.01"])
    params, problems = list(model.parameters()), es_grpo.generate_problems("countdown", 16, seed=8)
    master = es_grpo.master_weights(params)
    before, rewards = [m.clone() for m in master], []
    plain = es_grpo.zscore
    try:
        es_grpo.zscore = lambda r: (rewards.append(r.clone()), plain(r))[1]
        es_grpo.es_step(Context(args, model, tokenizer, FastRollout()), ESState(params, master),
                        problems, seed=4)
    finally:
        es_grpo.zscore = plain
    assert rewards[0].max() > rewards[0].min()  # a spread to learn from
    z, seeds = plain(rewards[0]), es_grpo.member_seeds(args, 4)
    for index, (start, after, param) in enumerate(zip(before, master, params)):
        step = sum(float(w) * noise(s, index, start) for s, w in zip(seeds, z))
        torch.testing.assert_close(after, start + args.es_alpha / len(seeds) * step, atol=1e-6,
                                   rtol=1e-6)
        assert param.dtype == torch.bfloat16 and torch.equal(param, after.to(torch.bfloat16))
