"""eval.py's commands of one analysis each (evaluate, drift, sparsity, forgetting, sweep), in this
process on the shipped model."""
import json

import pytest

import eval as cli
from conftest import in_process


def run_eval(*argv):
    return in_process(cli.main, *argv)


SMALL = ["--eval-problems", "4", "--heldout-problems", "3", "--eval-samples", "16"]


def test_evaluate_command_writes_a_monotone_pass_at_k_curve(tmp_path):
    result = run_eval("tiny", *SMALL, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((tmp_path / "pass_at_k.json").read_text())["models"]["tiny"]
    curve = [data[f"pass@{k}"] for k in (1, 2, 4, 8, 16)]
    assert all(a <= b for a, b in zip(curve, curve[1:])) and 0 <= data["greedy"] <= 1
    assert {"heldout_add", "heldout_sort"} <= data.keys()
    assert ((tmp_path / "pass_at_k.png").stat().st_size > 0
            and "| tiny |" in (tmp_path / "pass_at_k.md").read_text())


def test_weight_and_run_commands_end_to_end(tmp_path, finished_run):
    import es_grpo
    run, result = finished_run
    assert result.returncode == 0, result.stderr[-2000:]
    # a "trained" model that surely moved: one ES perturbation
    model, tokenizer = es_grpo.load_model("")
    params = list(model.parameters())
    es_grpo.set_weights(params, [p.detach().float().clone() for p in params], seed=1, sigma=2e-3)
    trained = str(tmp_path / "moved")
    model.save_pretrained(trained)
    tokenizer.save_pretrained(trained)
    for argv, stem in ((["drift", "tiny", trained, str(run / "stage1-grpo")], "drift"),
                       (["sparsity", "tiny", trained, "--taus", "0,1e-3,1"], "sparsity"),
                       # diversity, curves: reproduce's test
                       (["forgetting", "tiny", trained], "forgetting"),
                       (["sweep", "--populations", "2,4", "--sequences", "16", "--prompts", "2"],
                        "sweep")):
        result = run_eval(*argv, *SMALL, "--out", str(tmp_path / stem))
        assert result.returncode == 0, (argv, result.stderr[-2000:])
        assert ((tmp_path / stem / f"{stem}.png").exists()
                and (tmp_path / stem / f"{stem}.json").exists())
    sparsity = json.loads((tmp_path / "sparsity" / "sparsity.json").read_text())["rows"]
    assert sparsity["tau=0"]["sparsity"] < 0.01 and sparsity["tau=0.001"]["sparsity"] > 0.3
    assert sparsity["tau=1"]["sparsity"] == 1.0 and sparsity["random, tau=1"]["sparsity"] == 1.0
    assert abs(sparsity["random, tau=0.001"]["sparsity"] - sparsity["tau=0.001"]["sparsity"]) < 0.01
    sweep = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["rows"]
    assert [(r["population"], r["updates"], r["sequences"])
            for r in sweep.values()] == [(2, 4, 16), (4, 2, 16)]
    # alpha held to the same random-walk step: alpha_N proportional to N / sqrt(N - 1), 2e-3 at
    # N = 32
    assert sweep["N=2"]["alpha"] == pytest.approx(2e-3 * 2 / (32 / 31 ** 0.5), rel=1e-5)
    assert sweep["N=4"]["alpha"] / sweep["N=2"]["alpha"] == pytest.approx(
        (4 / 3 ** 0.5) / 2, rel=1e-5)
    assert sparsity["tau=0"]["pass@1_kept"] == pytest.approx(1.0)
