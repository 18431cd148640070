"""eval.py: the analyses on hand-built inputs, and each command (in this process) on the shipped model."""
import json

import numpy as np
import pytest
import torch

import eval as analyses
from conftest import in_process, run_es_grpo
from es_grpo import js_succ


def test_js_pol_estimator_matches_exact_value_and_bounds_js_succ():
    """Members are categorical policies over 5 answers, answers 0-1 correct. The sample estimate of JS_pol
    matches the exact mean KL to the mixture, and JS_succ (on exact success rates) is below it."""
    rng = np.random.default_rng(0)
    policies = rng.dirichlet(np.ones(5) * 0.7, size=4)  # (N, Y)
    mixture = policies.mean(0)
    exact = float(np.mean([(p * np.log(p / mixture)).sum() for p in policies]))
    samples = 20_000
    drawn = np.stack([rng.choice(5, size=samples, p=p) for p in policies])  # (N, S) answers drawn from member i
    logp = torch.tensor(np.log(policies)[:, drawn].transpose(1, 0, 2))  # (N_i, N_j, S): log pi_j(y ~ pi_i)
    assert analyses.js_pol(logp) == pytest.approx(exact, abs=0.02)
    success = torch.tensor(policies[:, :2].sum(1)).unsqueeze(1)  # (N, 1)
    assert 0 <= js_succ(success) <= exact


def test_sparsify_zeroes_exactly_the_small_updates():
    base = {"a": torch.zeros(10), "b": torch.ones(2, 5)}
    delta = {"a": torch.tensor([0.1, -0.1, 0.5, -0.5, 1e-3, -1e-3, 0.0, 2.0, -2.0, 0.2]), "b": torch.full((2, 5), 0.3)}
    trained = {k: base[k] + delta[k] for k in base}
    kept, sparsity = analyses.sparsify(base, trained, tau=0.2)
    # |delta| <= 0.2: 0.1, -0.1, 1e-3, -1e-3, 0.0 and 0.2 (up to rounding of 0 + 0.2) -> 6 of 20 coordinates
    assert sparsity == pytest.approx(6 / 20)
    assert torch.equal(kept["a"], torch.tensor([0, 0, 0.5, -0.5, 0, 0, 0, 2.0, -2.0, 0]))
    assert torch.equal(kept["b"], trained["b"])
    assert analyses.sparsify(base, trained, tau=-1)[1] == 0.0


def test_drift_per_module_kind_on_a_known_delta():
    base = {"model.embed_tokens.weight": torch.full((4,), 2.0), "model.layers.0.self_attn.q_proj.weight": torch.ones(4),
            "model.layers.0.mlp.up_proj.weight": torch.ones(4), "model.norm.weight": torch.ones(4)}
    trained = dict(base)
    trained["model.layers.0.self_attn.q_proj.weight"] = torch.ones(4) * 1.5  # ||delta|| = 1, ||base|| = 2
    trained["model.embed_tokens.weight"] = torch.tensor([2.0, 2.0, 2.0, 6.0])  # ||delta|| = 4, ||base|| = 4
    result = analyses.drift(base, trained)
    assert result["attention"] == pytest.approx(0.5) and result["embeddings"] == pytest.approx(1.0)
    assert result["mlp"] == 0.0 and result["norms"] == 0.0
    assert result["total"] == pytest.approx((1 + 16) ** 0.5 / (16 + 4 + 4 + 4) ** 0.5)


def run_eval(*argv):
    return in_process(analyses.main, *argv)


SMALL = ["--eval-problems", "4", "--heldout-problems", "3", "--eval-samples", "16"]


def test_evaluate_command_writes_a_monotone_pass_at_k_curve(tmp_path):
    result = run_eval("tiny", *SMALL, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((tmp_path / "pass_at_k.json").read_text())["models"]["tiny"]
    curve = [data[f"pass@{k}"] for k in (1, 2, 4, 8, 16)]
    assert all(a <= b for a, b in zip(curve, curve[1:])) and 0 <= data["greedy"] <= 1
    assert {"heldout_add", "heldout_sort"} <= data.keys()
    assert (tmp_path / "pass_at_k.png").stat().st_size > 0 and "| tiny |" in (tmp_path / "pass_at_k.md").read_text()


def test_weight_and_run_commands_end_to_end(tmp_path):
    import es_grpo
    from test_cli import TINY_RUN
    run = tmp_path / "run"
    assert run_es_grpo(*TINY_RUN, "--out", str(run)).returncode == 0
    model, tokenizer = es_grpo.load_model("")  # a "trained" model that surely moved: one ES perturbation
    params = list(model.parameters())
    es_grpo.set_weights(params, [p.detach().float().clone() for p in params], seed=1, sigma=2e-3)
    trained = str(tmp_path / "moved")
    model.save_pretrained(trained)
    tokenizer.save_pretrained(trained)
    for argv, stem in ((["drift", "tiny", trained, str(run / "stage1-grpo")], "drift"),
                       (["sparsity", "tiny", trained, "--taus", "0,1e-3,1"], "sparsity"),
                       (["diversity", "tiny", "--population", "2", "--samples", "2", "--sigmas", "1e-3,1e-2"],
                        "diversity"),
                       (["forgetting", "tiny", trained], "forgetting"),
                       (["curves", str(run)], "curves"),
                       (["sweep", "--populations", "2,4", "--sequences", "16", "--prompts", "2"], "sweep")):
        result = run_eval(*argv, *(SMALL if argv[0] != "curves" else []), "--out", str(tmp_path / stem))
        assert result.returncode == 0, (argv, result.stderr[-2000:])
        assert (tmp_path / stem / f"{stem}.png").exists() and (tmp_path / stem / f"{stem}.json").exists()
    sparsity = json.loads((tmp_path / "sparsity" / "sparsity.json").read_text())["rows"]
    assert sparsity["tau=0"]["sparsity"] < 0.01 and sparsity["tau=0.001"]["sparsity"] > 0.3
    assert sparsity["tau=1"]["sparsity"] == 1.0
    sweep = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["rows"]
    assert [(r["population"], r["updates"], r["sequences"]) for r in sweep.values()] == [(2, 4, 16), (4, 2, 16)]
    assert sparsity["tau=0"]["pass@1_kept"] == pytest.approx(1.0)


def test_quick_reproduction_report_end_to_end(tmp_path):
    result = run_eval("reproduce", "--quick", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    report = (tmp_path / "REPORT.md").read_text()
    claims = json.loads((tmp_path / "report.json").read_text())["claims"]
    verdicts = ("reproduced", "partly reproduced", "not reproduced", "not measurable here")
    assert len(claims) == 6 and all(verdict in verdicts for _, verdict, _ in claims)
    for run in ("grpo-s0", "es-s0", "grpo-es-s0", "es-grpo-s0"):
        assert (tmp_path / "runs" / run / "summary.json").exists()
    assert "| grpo-es |" in report and "## Claims" in report
    assert all((tmp_path / "analyses" / name / f"{name}.png").exists()
               for name in ("drift", "sparsity", "diversity", "curves"))
