"""scale/es.py, members one at a time: each member's eps drawn once (the update from two running
sums, or from the eps kept), drawn on every core, and the shared noise table (a departure), against
es_grpo.py's two draws."""
import copy
import json
import math

import pytest
import torch

import es_grpo
from es_grpo import Context, ESState
from scale.es import PER_TENSOR, NoiseTable, PopulationScorer, Update, draw_all


def one_update(model, tokenizer, args, problems, **hooks):
    """One ES update of a copy of model (member by member); its master after, and its stats."""
    model = copy.deepcopy(model)
    params = list(model.parameters())
    state = ESState(params, es_grpo.master_weights(params))
    stats = es_grpo.es_step(Context(args, model, tokenizer, **hooks), state, problems, seed=3)
    return state.master, stats


class Counted:
    """A source that counts its draws: (seed, tensor index) -> times drawn."""

    def __init__(self):
        self.draws = {}

    def __call__(self, seed, index, like, out=None):
        self.draws[seed, index] = self.draws.get((seed, index), 0) + 1
        return PER_TENSOR(seed, index, like, out)

    def prepare(self, params):
        pass


@pytest.mark.parametrize("flags, reuse, path", [
    ({}, True, "summed"), ({"es_zscore": False}, True, "summed"),
    ({"es_antithetic": True}, True, "summed"), ({"es_null": True}, True, "kept"),
    ({}, False, "redrawn")])
def test_drawn_once_updates_as_es_grpo_does_to_float_rounding(tiny, flags, reuse, path):
    """The member rewards are the same, bit for bit (the members are the same weights), and the
    master after the update equal to es_grpo.es_update's: within float32 rounding from the sums
    (z-scored or raw rewards, antithetic pairs: one draw a pair), bit for bit from eps kept
    (--es-null's shuffled rewards are not affine in them) or drawn again. Each eps is drawn once,
    except where the path is redrawn's; the scorer names its path."""
    problems = es_grpo.generate_problems("countdown", 8, seed=7)
    args = es_grpo.Args(es_population=8, es_prompts=8, max_new_tokens=8, es_sigma=3e-2, **flags)
    source = Counted()
    scorer, update = PopulationScorer(source, "off", reuse), Update(source)
    reference, ours = (one_update(*tiny, args, problems, **hooks) for hooks in
                       ({}, {"score_members": scorer, "es_update": update}))
    assert scorer.path == path
    pairs = 1 + args.es_antithetic
    assert max(source.draws.values()) == (2 if path == "redrawn" else 1)
    assert len(source.draws) == args.es_population // pairs * len(list(tiny[0].parameters()))
    assert reference[1]["member_rewards"] == ours[1]["member_rewards"]
    assert max(set(reference[1]["member_rewards"])) > min(reference[1]["member_rewards"])
    before = es_grpo.master_weights(list(tiny[0].parameters()))
    moved = max(float((a - b).abs().max()) for a, b in zip(reference[0], before))
    exact = path != "summed"
    tolerance = dict(rtol=0, atol=0) if exact else dict(rtol=1e-6, atol=1e-7)
    pairs = zip(reference[0], ours[0])
    assert moved > 0 and all(torch.allclose(a, b, **tolerance) for a, b in pairs)
    # the norm it reports (a tracker's es/update_norm) is the master's move
    travelled = sum(float((a.double() - b.double()).square().sum())
                    for a, b in zip(ours[0], before)) ** 0.5
    assert update.step_norm == pytest.approx(travelled, rel=1e-3)


def test_eps_drawn_on_threads_are_es_grpos_eps():
    """On threads, new or into the same buffers member after member (as the scorer draws them),
    from es_grpo.noise and from a table: the eps each source gives alone."""
    params = [torch.zeros(300, 7), torch.zeros(5), torch.zeros(2, 3, 4)]
    table = NoiseTable(seed=3, values=4096)
    table.prepare(params)
    buffers = [torch.full(p.shape, float("nan")) for p in params]
    for source in (es_grpo.noise, table):
        for seed in (11, -11, 12):
            for into in (None, buffers):
                drawn = draw_all(source, seed, params, into=into)
                assert all(torch.equal(e, source(seed, i, p))
                           for i, (e, p) in enumerate(zip(drawn, params)))
                assert into is None or all(e is b for e, b in zip(drawn, buffers))


def test_the_noise_table_is_standard_normal_and_members_are_uncorrelated():
    """Over a model of 3 tensors (about 400k values): each member's eps has mean 0 and variance 1
    within 5 standard errors, two members' eps are uncorrelated within 5 / sqrt(D), a tensor's eps
    is not another's, and -seed is the mirror, exactly."""
    params = [torch.zeros(512, 512), torch.zeros(100_000), torch.zeros(64)]
    table = NoiseTable(seed=1, values=2**20)
    table.prepare(params)
    members = {seed: torch.cat([e.flatten() for e in draw_all(table, seed, params)])
               for seed in (5, 6, -5)}
    size = members[5].numel()
    for eps in members.values():
        assert abs(float(eps.mean())) < 5 / math.sqrt(size)
        assert abs(float(eps.var()) - 1) < 5 * math.sqrt(2 / size)
    correlation = float(torch.corrcoef(torch.stack([members[5], members[6]]))[0, 1])
    assert abs(correlation) < 5 / math.sqrt(size), correlation
    assert torch.equal(members[-5], -members[5])
    first, second = table(5, 0, params[2]), table(5, 2, params[2])
    assert not torch.equal(first, second)
    with pytest.raises(RuntimeError):
        NoiseTable()(5, 0, params[2])


def test_es_with_the_table_moves_toward_the_better_members(tiny):
    """The table's update is the same estimator: on the tiny model, one update with a reward that
    favours eps along a fixed direction moves the master along it (as tests/test_es.py's check)."""
    model, tokenizer = copy.deepcopy(tiny[0]), tiny[1]
    params = list(model.parameters())
    index = next(i for i, p in enumerate(params) if p is model.model.norm.weight)
    master = es_grpo.master_weights(params)
    before = master[index].clone()
    direction = torch.randn(before.shape, generator=torch.Generator().manual_seed(0))

    def grade(problem, text):
        return float((params[index].detach().float() - before) @ direction), ""
    table = NoiseTable(seed=0)
    args = es_grpo.Args(es_population=32, es_prompts=1, max_new_tokens=1, es_alpha=1e-2)
    run = Context(args, model, tokenizer, grade=grade, score_members=PopulationScorer(table, "off"),
                  es_update=Update(table))
    es_grpo.es_step(run, ESState(params, master), es_grpo.generate_problems("countdown", 1, seed=1),
                    seed=3)
    step = master[index] - before
    assert float(step @ direction / (step.norm() * direction.norm())) > 0.25


def test_centred_ranks_keep_each_eps_drawn_once_and_a_tiny_run_learns(tiny, tmp_path):
    """--es-shaping rank (OpenAI ES's centred ranks): ties share a rank and equal rewards give
    zeros; its weights are not affine in the rewards, so members one at a time keep their eps and
    the update draws none again (the master equal to es_grpo.es_update's with those weights, bit
    for bit); and a tiny scale.train run with it scores more reward than its control (--es-null)
    on the same prompts, update by update, once it has moved (updates 11-20)."""
    from conftest import run_scale
    from scale.config import Args, centered_ranks
    ranks = centered_ranks(torch.tensor([0.5, 0.0, 0.5, 1.0, 0.25]))
    assert ranks.tolist() == [0.125, -0.5, 0.125, 0.5, -0.25]
    assert not centered_ranks(torch.ones(4)).any()
    problems = es_grpo.generate_problems("countdown", 8, seed=7)
    args = Args(es_population=8, es_prompts=8, max_new_tokens=8, es_sigma=3e-2,
                es_shaping="rank")
    source = Counted()
    scorer, update = PopulationScorer(source, "off"), Update(source)
    ours = one_update(*tiny, args, problems, score_members=scorer, es_update=update)
    reference = one_update(*tiny, args, problems)  # es_grpo.py's scorer and update, args.fitness
    assert scorer.path == "kept" and set(source.draws.values()) == {1}
    assert all(torch.equal(a, b) for a, b in zip(reference[0], ours[0]))
    rewards = {}  # each update's mean member reward: both runs draw the same prompts (one seed)
    for name, flags in (("rank", []), ("null", ["--es-null"])):
        out = tmp_path / name
        result = run_scale("--algo", "es", "--steps", "20", "--es-shaping", "rank",
                           "--es-alpha", "4e-2", "--es-population", "16", "--es-prompts", "32",
                           "--eval-problems", "8", "--eval-samples", "16",
                           "--heldout-problems", "4", "--es-batched", "off", *flags,
                           "--out", str(out))
        assert result.returncode == 0, result.stderr[-2000:]
        assert json.loads((out / "config.json").read_text())["es_paths"] == ["kept"]
        rewards[name] = [json.loads(line)["reward"] for line in (out / "metrics.jsonl").open()]
    ahead = [r - n for r, n in zip(rewards["rank"][10:], rewards["null"][10:])]  # the last 10
    print(f"updates 11-20: rank ahead of its control by {sum(ahead) / 10:+.3f} reward on average, "
          f"in {sum(d > 0 for d in ahead)} of 10")
    assert sum(ahead) > 0 and sum(d > 0 for d in ahead) >= 7
