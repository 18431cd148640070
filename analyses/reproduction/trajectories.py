"""Runs stopped at a deadline, read off their trajectory points: the real model's report
(report/smollm2-add-gpu/REPORT.md).

report/smollm2-add-gpu/h200.sh trains every schedule at once on a lent GPU and stops what is still
going at its deadline, so most runs end without their final evaluation (summary.json); their
metrics.jsonl still holds a trajectory point every few updates (Pass@K counts per problem and token
entropy, on the test problems). Here each run's path is the base model, evaluated apart with the
same settings (`eval.py MODEL`), then those points; a run's last point stands for its end. Claim 1
is judged by the tiny report's own rule and intervals (claims.claim1 on claim1_values); ES is set
against the null ES run at equal updates (the control for a gain by chance); claims 2-6 are not
measured (they need the trained weights, a held-out evaluation at the end or a finished second
stage) and the report says so.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import es_grpo
from analyses import figures
from analyses.evaluation import curve_ks
from analyses.paths import (LABELS, START, comparisons, pass_at_k_curves, path_point,
                            read_metrics, trajectory_point)
from analyses.reproduction.claims import claim1, claim1_values
from analyses.reproduction.pilot import entropy_difference_variance
from analyses.reproduction.parts import claim_records, parts_section
from analyses.reproduction.scaling import scale_paragraph
from analyses.statistics import (PAPER_EFFECTS, detectable, entropy_change, interval,
                                 paired_difference, per_problem, shown)

K = 32  # the large K of the verdicts, as the tiny report's
# a base must share them
SETTINGS = ("eval_split", "eval_temperature", "max_new_tokens", "task", "seed")


def read_base(path: Path) -> tuple[dict, dict]:
    """(settings, evaluation) of the base model from `eval.py MODEL --out FOLDER`'s pass_at_k.json
    (one model)."""
    try:
        data = json.loads(path.read_text())
        (row,) = data["models"].values()
        return data["settings"], row
    except (OSError, ValueError, KeyError) as err:
        raise es_grpo.BadInput(f"{path}: not one model's pass_at_k.json from eval.py "
                               f"({err})") from None


def stopped_run(folder: Path, settings: dict, base: dict) -> dict:
    """A run as analyses.paths.load_runs gives one (one seed), from its trajectory points: its last
    point is its end (`finals`), its config's eval_samples the points' samples. Refused: a run whose
    points were evaluated otherwise than the base (problems, samples, split, temperature, length,
    seed, task)."""
    config = json.loads((folder / "config.json").read_text())
    n, lines = config["trajectory_samples"], [line for line in read_metrics(folder) if "eval"
                                              in line]
    differ = [key for key in SETTINGS if settings.get(key) != config.get(key)]
    if (not lines or differ or n != settings["eval_samples"] or n < K
            or len(base["correct"]) != config["eval_problems"]):
        raise es_grpo.BadInput(f"{folder}: no trajectory point, fewer than {K} samples a point, or "
                               f"evaluated otherwise than the base "
                               f"({', '.join(differ) or 'samples or problems'})")
    path = [path_point(START, base, n, K), *(trajectory_point(line, n, K) for line in lines)]
    last = path[-1]
    return {"finals": [lines[-1]["eval"]], "base": [base], "paths": [path],
            "totals": {key: [last[key]] for key in ("sequences", "tokens", "seconds")},
            "config": {**config, "eval_samples": n, "steps": last["update"],
                       "planned_steps": config["steps"]},
            "stages": es_grpo.stages_of(config["algo"], last["update"])}


def read_runs(folders: list[Path], base_file: Path) -> dict:
    """Every run by folder name, each stopped_run's record."""
    settings, base = read_base(base_file)
    return {folder.name: stopped_run(folder, settings, base) for folder in folders}


def roles(runs: dict) -> dict[str, str]:
    """Which run plays which part: `es` (ES, not null), `null`, `grpo` (the GRPO run at the middle
    learning rate; the others are the frontier) and `grpo-es`; by config, not by name."""
    of = lambda algo, null=False: sorted(n for n, r in runs.items()  # noqa: E731
                                         if r["config"]["algo"] == algo and r["config"]["es_null"]
                                         == null)
    grpo = sorted(of("grpo"), key=lambda name: runs[name]["config"]["grpo_lr"])
    found = {"es": of("es"), "null": of("es", True), "grpo": grpo[len(grpo) // 2:][:1],
             "grpo-es": of("grpo-es")}
    if not (found["es"] and found["grpo"]):
        raise es_grpo.BadInput("trajectories: needs an ES run and a GRPO run")
    return {role: names[0] for role, names in found.items() if names}


def judge_claim1(runs: dict, parts: dict):
    """claims.claim1 on claim1_values, from the stopped runs: ES's end against the base, the middle
    GRPO path (paths.comparisons' claim 1 rows) and the frontier of the other GRPO learning
    rates."""
    main = {"es": runs[parts["es"]], "grpo": runs[parts["grpo"]]}
    frontier = {name: run
                for name, run in runs.items() if run["config"]["algo"] == "grpo" and name
                != parts["grpo"]}
    return claim1(claim1_values(main, comparisons(main, K), frontier, K))


def null_control(runs: dict, parts: dict) -> dict:
    """ES minus the null ES run (rewards shuffled across members) at their ends, the same updates:
    Pass@1 and Pass@K, paired over problems; and each one's token entropy change from the base
    (statistics.entropy_change)."""
    if "null" not in parts:
        return {}
    es, null = runs[parts["es"]], runs[parts["null"]]
    ends = {name: run["finals"][0]["correct"] for name, run in (("es", es), ("null", null))}
    return {"updates": (es["config"]["steps"], null["config"]["steps"]),
            **{f"pass@{k}": paired_difference(per_problem([ends["es"]], K, k),
                                              per_problem([ends["null"]], K, k))
               for k in (1, K)},
            "entropy_change": {role: entropy_change(runs[parts[role]]["finals"], es["base"])
                               for role in ("es", "null")}}


def run_rows(runs: dict) -> dict[str, dict]:
    """Each run's end as the report's table shows it: updates done of those planned, sequences,
    Pass@1 and Pass@K with 95% intervals over problems, token entropy."""
    rows = {}
    for name, run in runs.items():
        end = run["paths"][0][-1]
        rows[name] = {"updates": f"{run['config']['steps']}/{run['config']['planned_steps']}",
                      "sequences": end["sequences"],
                      **{f"pass@{k}": level(end[f"pass@{k}"]) for k in (1, K)},
                      "entropy": end["entropy"]}
    return rows


def level(values: np.ndarray) -> str:
    """A mean over problems (P,) with its 95% interval over them."""
    estimate, low, high = interval(lambda m: m["a"], {"a": values[None]})
    return f"{estimate:.3f} [{low:.3f}, {high:.3f}]"


def plots(out: Path, runs: dict, parts: dict):
    """figures.write_paths (the main ES and GRPO runs as schedules; the other runs dashed, named by
    folder) and write_pass_at_k of the base, ES and GRPO."""
    main = {"es": runs[parts["es"]], "grpo": runs[parts["grpo"]]}
    others = {name: run for name, run in runs.items() if name not in (parts["es"], parts["grpo"])}
    figures.write_paths(out, main, K, frontier=others)
    figures.write_pass_at_k(out, pass_at_k_curves(main, intervals=False), K)


def write_trajectories(flags, command: str) -> dict:
    """Runs stopped at a deadline (or finished) read as paths from their trajectory points, against
    the base model's evaluation: claim 1 by the tiny report's rule, the null ES control, Pass@K
    curves; report.json, REPORT.md and the figures in --out. flags: runs, base, out."""
    out = Path(flags.out)
    runs = read_runs([Path(run) for run in flags.runs], Path(flags.base))
    parts = roles(runs)
    claim, control, rows = judge_claim1(runs, parts), null_control(runs, parts), run_rows(runs)
    plots(out, runs, parts)
    curves = pass_at_k_curves(runs, parts["es"], intervals=False)
    (out / "report.json").write_text(json.dumps(
        {"command": command, "roles": parts, "runs": rows, "claim1": claim_records([claim])[0],
         "curves": curves,
         "null_control": {key: list(value) if isinstance(value, tuple) else value
                          for key, value in control.items()}}, indent=1))
    lines = report_lines(runs, parts, claim, control, rows, curves, command, out)
    (out / "REPORT.md").write_text("\n".join(lines) + "\n")
    es_grpo.log(f"wrote {out / 'REPORT.md'}")
    return {"claim1": claim.verdict, "roles": parts}


def run_table(runs: dict, rows: dict) -> list[str]:
    """The base and each run's end: its settings, updates done of those planned, Pass@1 and Pass@K,
    entropy."""
    base = next(iter(runs.values()))["paths"][0][0]
    lines = [f"| run | algo | rate | updates done / planned | sequences | Pass@1 | Pass@{K} | "
             f"token entropy |", "|---|---|---|---|---|---|---|---|",
             f"| base | - | - | - | 0 | {base['pass@1'].mean():.3f} | "
             f"{base[f'pass@{K}'].mean():.3f} | {base['entropy']:.3f} |"]
    for name, row in rows.items():
        config = runs[name]["config"]
        rate = {"grpo": f"lr {config['grpo_lr']:g}", "es": f"alpha {config['es_alpha']:g}",
                "grpo-es": f"lr {config['grpo_lr']:g}, alpha {config['es_alpha']:g}"
                }[config["algo"]]
        algo = LABELS[config["algo"]] + (" null" if config["es_null"] else "")
        lines.append(f"| {name} | {algo} | {rate} | {row['updates']} | {row['sequences']:,} | "
                     f"{row['pass@1']} | {row[f'pass@{K}']} | {row['entropy']:.3f} |")
    return lines


def report_lines(runs: dict, parts: dict, claim, control: dict, rows: dict, curves: dict,
                 command: str, out: Path) -> list[str]:
    """REPORT.md: how it was made, the runs, claim 1's verdict by the tiny report's rule, the null
    control, Pass@K curves, the figures, what it cannot decide (with the pilot's numbers,
    out/pilot.json, if there), and what changed with scale (against the tiny report's,
    out/../report.json, if there)."""
    config = runs[parts["es"]]["config"]
    problems = len(runs[parts["es"]]["base"][0]["correct"])
    lines = [f"# GRPO against ES on {Path(config['model']).name or 'the tiny model'}", "",
             f"Made by `{command}`, from runs that `report/smollm2-add-gpu/h200.sh` trained on "
             f"one lent GPU, all at once, each "
             "stopped at the script's deadline if still going (so most end at their last "
             "trajectory point, without "
             "their final evaluation), and the base model's evaluation with the same settings "
             "(`base/`). Every "
             f"point: task `{config['task']}`, {problems} `{config['eval_split']}` problems x {K} "
             f"samples at "
             f"temperature {config['eval_temperature']}, at most {config['max_new_tokens']} new "
             f"tokens; seed "
             f"{config['seed']} only. Intervals and verdict words are the tiny report's "
             f"(report/REPORT.md); with one "
             "seed an interval rests on the problems alone.", "", "## The runs", "",
             *run_table(runs, rows), "", "## Claim 1, by the tiny report's rule", "",
             f"`es` is {parts['es']} and `grpo` {parts['grpo']} (the middle learning rate); the "
             f"other GRPO runs are the frontier.", "", *parts_section([claim])[2:]]
    if control:
        (es_updates, null_updates), change = control["updates"], control["entropy_change"]
        lines += ["## The control: ES against the null ES run", "",
                  f"ES minus the null run (rewards shuffled across members), after {es_updates} "
                  f"and {null_updates} "
                  f"updates: Pass@1 {shown(control['pass@1'])} (detectable "
                  f"{detectable(control['pass@1'])}), "
                  f"Pass@{K} {shown(control[f'pass@{K}'])}; token entropy change from the base: ES "
                  f"{shown(change['es'])}, null {shown(change['null'])} nats.", ""]
    ks = curve_ks(K)
    lines += ["## Pass@K of each run's end", "",
              "| model | " + " | ".join(f"pass@{k}" for k in ks) +
              " | base overtakes at K |", "|---|" + "---|" * (len(ks) + 1)]
    lines += [f"| {name} | " + " | ".join(f"{curve[f'pass@{k}']:.3f}" for k in ks) +
              f" | {curve.get('base_overtakes_at_K') or '-'} |" for name, curve in curves.items()]
    return lines + ["", "![paths](paths.png)", "",
                    "*Paths of the ES and GRPO runs (and, dashed, the others) in the "
                    f"(Pass@1, Pass@{K}) and (Pass@1, entropy) planes and along sequences "
                    f"generated.*", "",
                    "![Pass@K](pass_at_k.png)", "",
                    *limits(claim, curves, runs, out / "pilot.json"), "",
                    *scale_paragraph(claim.values, parts["grpo"], 1, out.parent / "report.json")]


def limits(claim, curves: dict, runs: dict, pilot_file: Path) -> list[str]:
    """What these runs cannot decide, and why: one seed (where the evaluations kept entropy as one
    number a model, with the sampling SE of an entropy difference from the pilot, if beside: the
    base model's samples of dev problems), the detectable Pass@K effects, the runs that saturate the
    task, the claims not measured."""
    evaluations = [row for run in runs.values() for row in (*run["finals"], *run["base"])]
    problems = len(evaluations[0]["correct"])
    solved = [name for name, curve in curves.items() if name != "base" and curve["pass@1"] >= 0.99]
    pilot = json.loads(pilot_file.read_text()) if pilot_file.is_file() else {}
    family = pilot["families"][pilot["task"]] if pilot else {}
    samples = next(iter(runs.values()))["config"]["eval_samples"]
    sampling = "" if "sample_lengths" not in family else (
        f"; sampling's, from the pilot's samples of dev problems ({pilot_file}), puts the SE of an "
        f"entropy difference at {problems} problems x {samples} samples near "
        f"{(entropy_difference_variance(family, samples) / problems) ** 0.5:.3f} nats for the base "
        f"model")
    # older evaluations kept one number a model
    by_problem = all("entropy_sums" in row for row in evaluations)
    return ["## What these runs cannot decide", "",
            "- One seed: intervals rest on the problems alone (the seeds' spread is unmeasured); "
            "token entropy's "
            "too, read from each problem's sums, so they hold the problems' and sampling's spread."
            if by_problem else
            "- One seed: intervals rest on the problems alone; these evaluations kept token "
            "entropy as one number a "
            "model, so its interval holds only the uncertainty of where a path matches, and a "
            "change from the base "
            f"has none (no spread, so no verdict; the seeds' spread is unmeasured{sampling}).",
            f"- Claim 1's Pass@{K} comparisons at the paper's effect "
            f"({PAPER_EFFECTS['passk_es_minus_grpo']}): "
            "detectable here "
            + ", ".join(f"{detectable(c.value)} ({c.name})" for c in claim.conditions
                                           if f"Pass@{K}" in c.name) + ".",
            *([f"- The task saturates: {', '.join(solved)} reach(es) a Pass@1 of 0.99 or more over "
               f"the {problems} "
               "problems, where no Pass@K can fall below the base's; claim 1's coverage comparison "
               "needs problems the trained models do not all solve."] if solved else []),
            "- Claims 2 and 4 (diversity, sparsity and drift) need the trained weights, which "
            "stayed on the GPU; "
            "claim 5 needs a held-out evaluation at each run's end, which the deadline cut; claim "
            "3 needs GRPO->ES's "
            "second stage finished; claim 6 needs more than one population size."]
