"""Runs as paths: a run folder's metrics and summaries read as a path of (compute, per-problem
Pass@K, entropy) points, read at matched compute or matched Pass@1 with intervals; Pass@K curves of
the runs' ends."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import es_grpo
from analyses.evaluation import curve_ks, final
from analyses.statistics import (entropy_arrays, entropy_by_problem, entropy_data, interval,
                                 per_problem, token_entropy)

LABELS = {"base": "base", "grpo": "GRPO", "es": "ES", "grpo-es": "GRPO->ES", "es-grpo": "ES->GRPO"}


def read_metrics(run: Path) -> list[dict]:
    """metrics.jsonl lines, with the compute spent since the start of the run, over all its stages:
    `run_sequences`, `run_tokens` (the lines' own counts restart at each stage) and `run_seconds`
    (training only: trajectory evaluations are not counted)."""
    try:
        lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
                 if line.strip()]
    except (OSError, ValueError) as err:
        raise es_grpo.BadInput(f"{run}: cannot read metrics.jsonl "
                               f"({err.__class__.__name__})") from None
    earlier, seconds, previous = {"sequences": 0, "tokens": 0}, 0.0, None
    for line in lines:
        if previous is not None and line["stage"] != previous["stage"]:
            earlier = {key: earlier[key] + previous[key] for key in earlier}
        seconds += line["seconds"]
        line.update(run_sequences=earlier["sequences"] + line["sequences"],
                    run_tokens=earlier["tokens"] + line["tokens"], run_seconds=seconds)
        previous = line
    return lines


def path_point(where: dict, result: dict, n: int, k: int) -> dict:
    """A path point: the compute spent so far (`where`), per-problem Pass@1 and Pass@k from an
    evaluation's counts of right answers among n samples, and its token entropy (and per problem:
    entropy_by_problem)."""
    return {**where, "pass@1": per_problem(result["correct"], n, 1),
            f"pass@{k}": per_problem(result["correct"], n, k),
            "entropy": result["entropy"], **entropy_by_problem(result, len(result["correct"]))}


START = {"update": 0, "sequences": 0, "tokens": 0, "seconds": 0.0}  # a path's first point: the base


def trajectory_point(line: dict, n: int, k: int) -> dict:
    """A metrics.jsonl line's trajectory evaluation (n samples a problem) as a path point, at the
    compute spent since the run's start (read_metrics)."""
    return path_point({"update": line["update"], "sequences": line["run_sequences"],
                       "tokens": line["run_tokens"], "seconds": line["run_seconds"]}, line["eval"],
                      n, k)


def run_path(run: Path, k: int) -> list[dict]:
    """A run's path: the base model, every trajectory point and every stage's end, with the compute
    spent so far (update, sequences, tokens, seconds) and per-problem Pass@1 and Pass@k (arrays
    (P,)) and entropy."""
    config, summary = (json.loads((run / name).read_text()) for name
                       in ("config.json", "summary.json"))
    stages = summary["stages"]
    path = [path_point(START, stages[0], config["eval_samples"], k)]
    ends, update, done = {}, 0, {"sequences": 0, "tokens": 0, "seconds": 0.0}
    for (_, updates), row in zip(es_grpo.stages_of(config["algo"], config["steps"]), stages[1:]):
        update, done = update + updates, {key: done[key] + row[key] for key in done}
        ends[update] = (done, row)
    for line in read_metrics(run):
        if "eval" in line and line["update"] not in ends:
            path.append(trajectory_point(line, config["trajectory_samples"], k))
        # a stage's end: its full evaluation (more samples) stands for the point
        if line["update"] in ends:
            done, row = ends[line["update"]]
            path.append(path_point({"update": line["update"], **done}, row,
                                   config["eval_samples"], k))
    return path


def heldout_families(row: dict) -> list[str]:
    return [key
            for key, value in row.items() if key.startswith("heldout_") and isinstance(value, dict)]


def finals_array(rows: list[dict], n: int, k: int) -> np.ndarray:
    """(seeds, P) per-problem Pass@k of one model per seed, on the evaluation set."""
    return per_problem([row["correct"] for row in rows], n, k)


def path_arrays(paths: list[list[dict]], k: int) -> dict:
    """The seeds' paths of one schedule (the same points: the same settings): compute axes
    (points,), means over seeds; pass@1, pass@k and entropy_by_problem's two (points, seeds, P);
    entropy (points, seeds)."""
    points = min(map(len, paths))
    axes = {axis: np.array([np.mean([path[i][axis] for path in paths]) for i in range(points)])
            for axis in ("update", "sequences", "tokens", "seconds")}
    scores = {key: np.stack([np.stack([path[i][key] for path in paths]) for i in range(points)])
              for key in ("pass@1", f"pass@{k}", "entropy_sums", "entropy_tokens")}
    return axes | scores | {"entropy": np.array([[path[i]["entropy"] for path in paths] for i
                                                 in range(points)])}


def at_level(x: np.ndarray, y: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Per draw (rows of x and y: (draws, points)): y where x first reaches `level` along the path,
    linear between points; nan where the path never reaches it."""
    x, y, level = (np.asarray(x, dtype=float), np.asarray(y, dtype=float),
                   np.asarray(level, dtype=float))
    above = x >= level[:, None]  # (draws, points)
    i = above.argmax(1)  # the first point at or above the level (0 where none is: masked below)
    before = np.maximum(i - 1, 0)
    take = lambda a, j: np.take_along_axis(a, j[:, None], 1)[:, 0]  # noqa: E731
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (level - take(x, before)) / (take(x, i) - take(x, before))
        between = take(y, before) + t * (take(y, i) - take(y, before))
    result = np.where(i == 0, take(y, i), between)
    return np.where(above.any(1), result, np.nan)


def at_compute(axis: np.ndarray, y: np.ndarray, value: float) -> np.ndarray:
    """(draws,) y at `value` of a compute axis (points,), linear between points; nan beyond the
    path's end."""
    return np.array([np.interp(value, axis, row, right=np.nan) for row in y])


def matched(end: dict, path: dict, axis: str, k: int) -> dict:
    """A model at its end minus another schedule's path where the path matches it on `axis`: Pass@1
    and Pass@k differences with intervals. axis: update, sequences or seconds (matched compute) or
    pass@1 (matched Pass@1, the trade-off); end: its (seeds, P) arrays and compute totals."""
    data = {"e1": end["pass@1"], "ek": end[f"pass@{k}"], "p1": path["pass@1"],
            "pk": path[f"pass@{k}"]}

    def at(m, key):
        return at_level(m["p1"], m[key],
                        m["e1"]) if axis == "pass@1" else at_compute(path[axis], m[key], end[axis])

    where = (end[axis] if axis != "pass@1" else
             float(at_level(path["pass@1"].mean((1, 2))[None], path["sequences"][None],
                            end["pass@1"].mean()[None])[0]))
    return {"pass@1": interval(lambda m: m["e1"] - at(m, "p1"), data),
            f"pass@{k}": interval(lambda m: m["ek"] - at(m, "pk"), data),
            "where": where}


def matched_entropy(end: dict, path: dict, base: list[dict]) -> dict:
    """ES's token entropy at its end minus another schedule's where that schedule's path reaches
    ES's Pass@1 (`difference`), and that path's entropy there over the base model's minus 1
    (`relative`: -1 would be a total collapse). end, path: end_of's and path_arrays'; base: the base
    model's evaluations, one a seed. Evaluations without per-problem entropy (entropy_by_problem):
    the interval rests on the seeds, and on the problems only through where the path matches."""
    data = {"e1": end["pass@1"], "p1": path["pass@1"], **entropy_data("ee", end),
            **entropy_data("pe", path),
            **entropy_data("be", entropy_arrays(base, end["pass@1"].shape[-1]))}
    at = lambda m: at_level(m["p1"], token_entropy(m, "pe"),
                            m["e1"])  # noqa: E731  the path's, at ES's Pass@1
    return {"difference": interval(lambda m: token_entropy(m, "ee") - at(m), data),
            "relative": interval(lambda m: at(m) / token_entropy(m, "be") - 1, data)}


def load_runs(out: Path, seeds_of: dict[str, list[int]], k: int) -> dict:
    """Per schedule, over its seeds: end rows, base rows, paths, compute totals and the settings."""
    runs = {}
    for name, seeds in seeds_of.items():
        folders = [out / f"{name}-s{seed}" for seed in seeds]
        summaries = [json.loads((f / "summary.json").read_text()) for f in folders]
        config = json.loads((folders[0] / "config.json").read_text())
        totals = {key: [sum(row[key] for row in s["stages"][1:]) for s in summaries]
                  for key in ("sequences", "tokens", "seconds")}
        runs[name] = {"finals": [final(s) for s in summaries],
                      "base": [s["stages"][0] for s in summaries],
                      "paths": [run_path(f, k) for f in folders], "totals": totals,
                      "config": config,
                      "stages": es_grpo.stages_of(config["algo"], config["steps"])}
    return runs


def end_of(run: dict, k: int) -> dict:
    n = run["config"]["eval_samples"]
    return {"pass@1": finals_array(run["finals"], n, 1),
            f"pass@{k}": finals_array(run["finals"], n, k),
            "entropy": np.array([row["entropy"] for row in run["finals"]]),  # (seeds,)
            **entropy_arrays(run["finals"], len(run["finals"][0]["correct"])),  # (seeds, P) each
            "update": run["config"]["steps"],
            **{key: float(np.mean(v)) for key, v in run["totals"].items()}}


def comparisons(runs: dict, k: int) -> dict[str, dict]:
    """The fair comparisons: each model at its end against another schedule's path at matched
    compute or matched Pass@1; claim 1's two alone where the runs hold no GRPO->ES (stopped runs:
    the trajectories report)."""
    paths = {name: path_arrays(run["paths"], k) for name, run in runs.items()}
    ends = {name: end_of(run, k) for name, run in runs.items()}
    # the one that spent less, at its end
    def at_the_shorter(a: str, b: str, axis: str) -> tuple[str, dict]:
        first, second = (a, b) if ends[a][axis] <= paths[b][axis][-1] else (b, a)
        return (f"{LABELS[first]} vs {LABELS[second]}, at {LABELS[first]}'s {axis}",
                matched(ends[first], paths[second], axis, k))

    rows = {"ES vs GRPO, at ES's Pass@1": matched(ends["es"], paths["grpo"], "pass@1", k),
            **dict([at_the_shorter("grpo", "es", "sequences")])}
    if "grpo-es" not in runs:
        return rows
    rows |= {**dict(at_the_shorter(a, b, "seconds") for a, b in (("grpo", "es"),
                                                                  ("grpo", "grpo-es"))),
             "GRPO->ES vs GRPO, at equal updates":
                 matched(ends["grpo-es"], paths["grpo"], "update", k),
             "GRPO->ES vs GRPO, at GRPO->ES's Pass@1":
                 matched(ends["grpo-es"], paths["grpo"], "pass@1", k),
             "GRPO->ES vs ES, at GRPO->ES's Pass@1":
                 matched(ends["grpo-es"], paths["es"], "pass@1", k)}
    data = {"a1": ends["grpo-es"]["pass@1"], "b1": ends["es"]["pass@1"],
            "ak": ends["grpo-es"][f"pass@{k}"], "bk": ends["es"][f"pass@{k}"]}
    rows["GRPO->ES vs ES alone, at equal sequences"] = {
        "pass@1": interval(lambda m: m["a1"] - m["b1"], data),
        f"pass@{k}": interval(lambda m: m["ak"] - m["bk"], data),
        "where": ends["grpo-es"]["sequences"]}
    return rows


def pass_at_k_curves(runs: dict, base: str = "es", intervals: bool = True) -> dict:
    """Pass@K for K = 1, 2, 4, ..., n of the base model (run `base`'s) and every run's end (means
    over seeds and problems), the smallest K at which the base model is at least as good, and (with
    `intervals`) base minus model at K = n with its interval over the run's own seeds."""
    n = runs[base]["config"]["eval_samples"]
    ks = curve_ks(n)
    models = {"base": runs[base]["base"], **{name: run["finals"] for name, run in runs.items()}}
    curves = {name: {f"pass@{k}": float(finals_array(rows, n, k).mean()) for k in ks}
              for name, rows in models.items()}
    for name in runs:
        crossing = [k for k in ks if curves["base"][f"pass@{k}"] >= curves[name][f"pass@{k}"]]
        curves[name]["base_overtakes_at_K"] = crossing[0] if crossing else None
        if intervals:
            curves[name][f"base_minus_model_at_{n}"] = interval(lambda m: m["b"] - m["m"], {
                "b": finals_array(runs[name]["base"], n, n),
                "m": finals_array(models[name], n, n)})
    return curves


CURVE_KEYS = ("reward", "entropy", "disagreement", "kl")  # the training curves drawn per run
CURVE_COLUMNS = ["update", "reward", "entropy", "run_sequences"]  # and their last line's values


def training_curves(folders: list[Path]) -> dict:
    """Each run's metrics.jsonl lines (read_metrics), named by folder (no machine's paths), each
    stage's own training decoding (its temperature: ES greedy, GRPO sampled) and the last line's
    values."""
    runs = {folder.name: read_metrics(folder) for folder in folders}
    decoding = {name: {stage: json.loads((folder
                                          / "config.json").read_text()).get(f"{stage}_temperature")
                       for stage in ("es", "grpo")} for name, folder in zip(runs, folders)}
    summary = {name: {key: lines[-1].get(key) for key in CURVE_COLUMNS}
               for name, lines in runs.items()}
    return {"runs": runs, "decoding": decoding, "summary": summary}
