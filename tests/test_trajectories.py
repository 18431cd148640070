"""eval.py trajectories: runs stopped at a deadline, read off their trajectory points
(analyses/reproduction/trajectories.py), on run folders written here with planted effects."""
import dataclasses
import json
import types

import numpy as np
import pytest

import es_grpo
from analyses.evaluation import EVAL_FLAGS
from analyses.reproduction import trajectories
from scale.config import parse_args

PROBLEMS, SAMPLES = 60, 32
SHARED = ["--task", "add", "--eval-problems", str(PROBLEMS), "--trajectory-samples", str(SAMPLES),
          "--eval-samples", "64", "--max-new-tokens", "128"]
BASE_RATES = np.random.default_rng(0).uniform(0.05, 0.5, PROBLEMS)


def counts(rates, seed):
    return np.random.default_rng(seed).binomial(SAMPLES, np.clip(rates, 0, 1)).tolist()


def write_run(folder, flags, points, seed):
    """A run folder as scale.train leaves one stopped after its last point: config.json and
    metrics.jsonl, a trajectory point (per-problem counts, entropy) at each (update, Pass@1 gain,
    entropy) of `points`."""
    args = parse_args([*SHARED, *flags])
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(dataclasses.asdict(args)))
    lines = [{"update": update, "stage": args.algo, "sequences": 100 * update,
              "tokens": 2000 * update,
              "seconds": 1.0,
              "eval": {"correct": counts(BASE_RATES + gain, seed + update), "entropy": entropy}}
             for update, gain, entropy in points]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def write_base(tmp_path, **changed):
    settings = {key: getattr(parse_args([*SHARED, "--eval-samples", str(SAMPLES)]),
                             key) for key in EVAL_FLAGS}
    path = tmp_path / "base" / "pass_at_k.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"settings": settings | changed,
                                "models": {"base": {"correct": counts(BASE_RATES, 0),
                                                    "entropy": 1.4}}}))
    return path


def planted(tmp_path, es_entropy, grpo_entropy):
    """ES gains 0.1 Pass@1 over 12 updates at `es_entropy`; three GRPO rates reach +0.3 at
    `grpo_entropy`; a null ES run stays at the base."""
    runs = tmp_path / "runs"
    folders = [write_run(runs / f"grpo-lr{lr:g}-s0",
                         ["--algo", "grpo", "--steps", "36", "--grpo-lr", str(lr)],
                         [(6, 0.05 * speed, grpo_entropy), (12, 0.15 * speed, grpo_entropy),
                          (18, 0.3 * speed, grpo_entropy)], seed)
               for seed, (lr, speed) in enumerate(((3e-6, 0.5), (1e-5, 1.0), (3e-5, 1.2)), 100)]
    folders.append(write_run(runs / "es-s0", ["--algo", "es", "--steps", "12"],
                             [(3, 0.02, es_entropy), (6, 0.05, es_entropy), (12, 0.1, es_entropy)],
                             200))
    folders.append(write_run(runs / "es-null-s0", ["--algo", "es", "--steps", "12", "--es-null"],
                             [(3, 0, 1.4), (6, 0, 1.4), (12, 0, 1.4)], 300))
    return folders


def report(tmp_path, folders, base):
    flags = types.SimpleNamespace(runs=[str(f) for f in folders], base=str(base),
                                  out=str(tmp_path / "real"))
    trajectories.write_trajectories(flags, "python eval.py trajectories ...")
    return json.loads((tmp_path / "real"
                       / "report.json").read_text()), (tmp_path / "real" / "REPORT.md").read_text()


def keep_entropy_by_problem(files, rng):
    """Every evaluation in these metrics.jsonl and pass_at_k.json files with its entropy kept per
    problem too, as es_grpo.evaluate keeps it: problems of different lengths, each one's entropy a
    token near the model's."""
    def kept(evaluation):
        lengths = rng.integers(10, 40, PROBLEMS) * SAMPLES
        sums = (evaluation["entropy"] + rng.normal(0, 0.05, PROBLEMS)) * lengths
        return evaluation | {"entropy_sums": sums.tolist(), "lengths": lengths.tolist(),
                             "entropy": float(sums.sum() / lengths.sum())}
    for path in files:
        if path.name == "metrics.jsonl":
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            path.write_text("".join(json.dumps(line | {"eval": kept(line["eval"])}) + "\n" for line
                                    in lines))
        else:
            data = json.loads(path.read_text())
            path.write_text(json.dumps(data | {"models": {"base": kept(data["models"]["base"])}}))


@pytest.mark.parametrize("es_entropy, grpo_entropy, expected",
                         [(1.4, 0.05, "holds"), (0.05, 1.4, "fails")])
def test_a_planted_entropy_collapse_decides_claim_1s_collapse_over_problems_and_its_reverse_fails(
        tmp_path, es_entropy, grpo_entropy, expected):
    folders, base = planted(tmp_path, es_entropy, grpo_entropy), write_base(tmp_path)
    keep_entropy_by_problem([base, *(folder / "metrics.jsonl" for folder in folders)],
                            np.random.default_rng(6))
    data, text = report(tmp_path, folders, base)
    assert data["roles"] == {"es": "es-s0", "null": "es-null-s0", "grpo": "grpo-lr1e-05-s0"}
    parts = {part["part"]: part for part in data["claim1"]["parts"]}
    collapse = parts["GRPO's token entropy collapses (at its end, at most half the base's)"]
    # one seed decides nothing
    assert collapse["over_problems"] == expected and collapse["outcome"] == "undecided"
    gain = parts["ES raises Pass@1 over the base"]  # a planted 0.1 over 60 problems x 32 samples
    assert (gain["over_problems"] == "holds"
            and "undecided: 1 seed (over problems only: holds)" in text)
    halved = ("3 of 3 learning rates halved or more" if grpo_entropy < 0.7
              else "0 of 3 learning rates halved")
    assert halved in text


def test_a_stopped_run_ends_at_its_last_point_and_the_null_control_sees_the_gain(tmp_path):
    data, text = report(tmp_path, planted(tmp_path, 1.4, 0.05), write_base(tmp_path))
    assert data["runs"]["grpo-lr1e-05-s0"]["updates"] == "18/36"  # stopped: 18 of 36 updates
    assert data["runs"]["es-s0"]["sequences"] == 1200
    estimate, low, high = data["null_control"]["pass@1"]
    assert low > 0 and abs(estimate - 0.1) < 0.03  # ES minus the null run: the planted gain, found
    assert ("| base |" in text and "![paths](paths.png)" in text
            and (tmp_path / "real" / "paths.png").is_file())


def test_a_base_evaluated_otherwise_is_refused_in_one_line(tmp_path):
    folders = planted(tmp_path, 1.4, 0.05)
    with pytest.raises(es_grpo.BadInput, match="evaluated otherwise than the base.*eval_split"):
        report(tmp_path, folders, write_base(tmp_path, eval_split="dev"))


def test_one_seeds_entropy_intervals_rest_on_the_problems_where_the_evaluations_kept_them(tmp_path):
    """Entropy kept as one number a model (the first lease's runs): one seed's entropy change has no
    spread (se 0), and the report says so; kept per problem, the same comparisons get intervals over
    problems, and the planted collapse is still decided."""
    folders, base = planted(tmp_path, 1.4, 0.05), write_base(tmp_path)
    data, text = report(tmp_path, folders, base)
    estimate, low, high = data["null_control"]["entropy_change"]["es"]
    assert low == pytest.approx(high, abs=1e-12) and "one number a model" in text
    shown = {item["name"]: item["value"] for item in data["claim1"]["shown"]}
    # GRPO's entropy fall
    fall = shown["GRPO's token entropy at its end relative to the base (grpo, 18 updates)"]
    assert fall[0] == pytest.approx(-0.96, abs=0.005) and fall[1] == fall[2]  # no spread measured
    keep_entropy_by_problem([base, *(folder / "metrics.jsonl" for folder in folders)],
                            np.random.default_rng(5))
    data, text = report(tmp_path, folders, base)
    for role in ("es", "null"):
        estimate, low, high = data["null_control"]["entropy_change"][role]
        assert low < estimate < high and high - low < 0.1
    parts = {part["part"]: part for part in data["claim1"]["parts"]}
    assert parts["GRPO's token entropy collapses (at its end, at most half the base's)"][
        "over_problems"] == "holds"
    shown = {item["name"]: item["value"] for item in data["claim1"]["shown"]}
    fall = shown["GRPO's token entropy at its end relative to the base (grpo, 18 updates)"]
    assert fall[1] < fall[0] < fall[2] < -0.9  # GRPO's fall: now with a spread
    assert "one number a model" not in text
