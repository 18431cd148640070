"""scale/population.py: the ES population decoded in one batch, against es_grpo.py's members one at
a time."""
import dataclasses
import json

import pytest
import torch

import es_grpo
from conftest import es_step_recording_rewards
from es_grpo import ESState
from scale.decode import FastRollout
from scale.population import members_together, population_forward


def test_population_batched_es_scores_and_updates_as_member_by_member(tiny):
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 16, seed=8)
    args = es_grpo.Args(es_population=6, es_prompts=16, es_sigma=2e-2)
    # es_grpo.py's own path
    one_by_one = es_step_recording_rewards(model, tokenizer, problems, args)
    batched = es_step_recording_rewards(model, tokenizer, problems,
                                        dataclasses.replace(args, rollout_batch=32),
                                        batched="on")  # 2 members a batch
    same_text = sum(a == b for a, b in zip(one_by_one[3], batched[3])) / len(one_by_one[3])
    assert len(batched[3]) == 6 * 16 and same_text >= 0.99
    assert torch.equal(one_by_one[1], batched[1])  # the same member rewards...
    # ...hence the same update
    assert all(torch.equal(a, b) for a, b in zip(one_by_one[2], batched[2]))
    assert one_by_one[0]["disagreement"] == batched[0]["disagreement"]
    assert one_by_one[0]["tokens"] == batched[0]["tokens"]


def test_population_batching_falls_back_for_layers_it_cannot_batch(fresh_tiny):
    model, tokenizer = fresh_tiny
    # a norm with a bias: no batched form here
    model.model.norm = torch.nn.LayerNorm(model.config.hidden_size)
    problems = es_grpo.generate_problems("countdown", 4, seed=8)
    args = es_grpo.Args(es_population=3, es_prompts=4)
    with pytest.raises(NotImplementedError):
        params = list(model.parameters())
        with population_forward(model, ESState(params, es_grpo.master_weights(params)), [1, 2, 3],
                                1e-2, {}):
            pass
    assert all("forward" not in vars(layer) for layer in model.modules())  # nothing left patched
    fallback = es_step_recording_rewards(model, tokenizer, problems, args, batched="on")
    expected = es_step_recording_rewards(model, tokenizer, problems, args)
    assert torch.equal(fallback[1], expected[1])


def test_auto_batches_the_population_only_where_its_members_decode_as_evaluation_does(tiny):
    """Batched, members decode the model as it is; with --rollout-dtype's copy in another dtype,
    evaluation decodes the copy, so auto scores the members one at a time, through the copy too."""
    model, tokenizer = tiny
    params = list(model.parameters())
    state = ESState(params, es_grpo.master_weights(params))
    together = {dtype: members_together(
        es_grpo.Context(es_grpo.Args(rollout_batch=32), model, tokenizer, FastRollout(dtype)),
        state, 4, 4, "auto") for dtype in ("model", "float32", "bfloat16")}
    assert together == {"model": 8, "float32": 8, "bfloat16": 0}


@pytest.mark.parametrize("algo", ["grpo", "es"])
def test_python_es_grpo_and_scale_train_on_one_process_end_alike(algo, tmp_path, monkeypatch):
    """The same flags through the reference (members one at a time) and through `python -m
    scale.train` on one process (chunks, the population in one batch, GRPO's shared prompts, its run
    folder, its bounded verifier): every update's rewards are equal, the weights within float
    rounding as AdamW enlarges it (GRPO, measured: 2.1e-6 at most, where a gradient sits near 0) or
    identical (ES, measured), and both moved the weights; only scale.train's ES decoded its
    population in one batch, and its config.json says so."""
    from conftest import SMALL_RUN, run_es_grpo, run_scale
    from safetensors.torch import load_file
    from scale.es import PopulationScorer
    weights, batched, batch = {}, [], PopulationScorer.decoded_together
    monkeypatch.setattr(PopulationScorer, "decoded_together",
                        lambda *a: (batched.append(1), batch(*a))[1])
    for name, runner in (("reference", run_es_grpo), ("scale", run_scale)):
        result = runner(*SMALL_RUN, "--algo", algo, "--out", str(tmp_path / name))
        assert result.returncode == 0, result.stderr[-2000:]
        weights[name] = load_file(tmp_path / name / f"stage1-{algo}" / "model.safetensors")
        assert len(batched) == (name == "scale" and algo == "es") * 2  # 2 updates, one batch each
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config.get("es_paths") == (["batched"] if name == "scale" and algo == "es" else None)
    base = load_file(es_grpo.TINY_MODEL / "model.safetensors")
    a, b = weights["reference"], weights["scale"]
    difference = max(float((a[k] - b[k]).abs().max()) for k in a)
    apart = sum(int(((a[k] - b[k]).abs() > 1e-7).sum()) for k
                in a) / sum(v.numel() for v in a.values())
    print(f"{algo}: the reference and scale.train's weights differ by {difference:.1e} at most, "
          f"{apart:.1e} of them by over 1e-7")
    assert difference < 1e-5 and apart < 1e-3  # AdamW enlarges rounding where a gradient is near 0
    rewards = [[line["reward"] for line in map(json.loads,
                                               (tmp_path / name / "metrics.jsonl").open())]
               for name in weights]
    assert rewards[0] == rewards[1]
    assert any(not torch.equal(a[k], base[k]) for k in a)
