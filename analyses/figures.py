"""Every analysis's outputs, side by side in its folder: the JSON of its numbers, a markdown table
and a PNG. The commands of eval.py and the reproduction's report writer draw with these; nothing
else plots."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analyses.evaluation import EVAL_FLAGS, curve_ks
from analyses.paths import CURVE_COLUMNS, CURVE_KEYS, LABELS, finals_array, path_arrays
from analyses.statistics import T_975, t_quantile
from analyses.weights import MODULE_KINDS
from es_grpo import log, markdown_table

def save_outputs(out: Path, stem: str, data: dict, table: str, plot,
                 panels: tuple[int, int] = (1, 1)):
    """JSON, markdown and PNG side by side; the PNG is drawn by plot(axes) (an array when panels >
    1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(data, indent=2))
    (out / f"{stem}.md").write_text(table + "\n")
    figure, axes = plt.subplots(*panels, figsize=(6 * panels[1], 4 * panels[0]),
                                squeeze=panels == (1, 1))
    plot(axes)
    figure.tight_layout()
    figure.savefig(out / f"{stem}.png", dpi=120)
    plt.close(figure)
    log(table)
    log(f"wrote {out / stem}.json, .md, .png")


def grouped_bars(axes, rows: dict[str, dict], columns: list[str]):
    """One group of bars per column, one bar per row (model)."""
    width = 0.8 / len(rows)
    for i, (name, row) in enumerate(rows.items()):
        axes.bar(np.arange(len(columns)) + i * width, [row.get(c, 0.0) for c in columns], width,
                 label=name)
    axes.set_xticks(np.arange(len(columns)) + 0.4 - width / 2, columns, fontsize=7)
    axes.legend(fontsize=7)


def t95(seeds: int) -> float:
    """A 95% interval's half-width over `seeds` means, in standard errors: Student's t, seeds - 1 df
    (2.78 for 5 seeds, where the normal 1.96 would cover less)."""
    return t_quantile(T_975, seeds - 1, 1.960)


def write_evaluation(out: Path, results: dict[str, dict], args) -> None:
    """eval.py MODEL ...: each model's Pass@K curve, Maj@K, greedy accuracy, entropy and length."""
    ks = curve_ks(args.eval_samples)
    columns = [f"pass@{k}" for k in ks] + [f"maj@{ks[-1]}", "greedy", "entropy", "length"]

    def plot(axes):
        for name, row in results.items():
            axes.plot(ks, [row[f"pass@{k}"] for k in ks], marker="o", label=name)
        axes.set(xscale="log", xlabel="K", ylabel="Pass@K",
                 title=f"Pass@K, n={args.eval_samples}, T={args.eval_temperature}")
        axes.legend(fontsize=7)

    settings = {k: getattr(args, k) for k in EVAL_FLAGS}
    save_outputs(out, "pass_at_k", {"settings": settings, "models": results},
                 markdown_table(results, columns), plot)


def write_drift(out: Path, data: dict) -> None:
    """weights.drift_analysis's result: relative L2 drift per module kind, and the ratio of two
    models'."""
    results, ratio = data["drift"], data["ratio"]
    kinds = ["total"] + [kind for kind, _ in MODULE_KINDS] + ["other"]
    kinds = [k for k in kinds if any(k in r for r in results.values())]

    def plot(axes):
        grouped_bars(axes, results, kinds)
        axes.set(yscale="log", ylabel="relative L2 drift", title="drift from the base model")

    table = markdown_table(results, kinds) + "".join(f"\n\ndrift ratio {k}: {v:.2f}"
                                                     for k, v in ratio.items())
    save_outputs(out, "drift", data, table, plot)


def write_sparsity(out: Path, data: dict) -> None:
    """weights.sparsity_analysis's result: Pass@1 of the sparsified updates against random masks."""
    rows, full = data["rows"], data["full"]
    k = next(key for key in next(iter(rows.values())) if key.startswith("pass@") and key
             != "pass@1")
    table = markdown_table(rows, ["mask", "sparsity", "pass@1", k, "pass@1_kept", "gain_kept"],
                           "update")
    save_outputs(out, "sparsity", data, table, lambda axes: plot_sparsity(axes, rows, full))


def plot_sparsity(axes, rows: dict, full: dict):
    for kind, marker in (("largest kept", "o"), ("random mask", "x"), ("null ES run", "s")):
        chosen = [r for r in rows.values() if r["mask"] == kind]
        if chosen:
            axes.plot([100 * r["sparsity"] for r in chosen], [r["pass@1"] for r in chosen],
                      marker=marker, label=f"Pass@1, {kind}")
    axes.axhline(full["pass@1"], ls=":", color="C0", label="Pass@1, whole update")
    axes.axhline(full["base"]["pass@1"], ls="--", color="k", label="Pass@1, base")
    axes.set(xlabel="update coordinates zeroed (%)", ylabel="Pass@1", title="sparsified ES update")
    axes.legend(fontsize=7)


def write_diversity(out: Path, model_name: str, rows: dict) -> None:
    """diversity.diversity_analysis's rows, one per sigma: the predicted and measured coverage
    gains."""
    first = next(iter(rows.values()))
    size, samples = first["population"], first["samples"]

    def plot(axes):
        xs = [r["sigma"] for r in rows.values()]
        for key in ("predicted", "gain", "gain_counts", "gain_vs_centre"):
            estimate = np.array([r[key] for r in rows.values()])
            spread = np.array([[r[key] - r[key + "_ci"][0],
                                r[key + "_ci"][1] - r[key]] for r in rows.values()]).T
            axes.errorbar(xs, estimate, yerr=spread, marker="o", capsize=3, label=key)
        axes.set(xscale="log", xlabel="sigma", ylabel=f"Pass@{size} gain",
                 title=f"population vs one policy, N={size}, {samples} samples (95% CI)")
        axes.legend(fontsize=7)

    columns = ["js_succ", "js_pol", "predicted", "gain", "gain_counts", "ratio", "gain_vs_centre",
               "population_pass", "centre_pass"]
    table = {name: {c: (f"{row[c]:.4f} [{row[c + '_ci'][0]:.4f}, {row[c + '_ci'][1]:.4f}]"
                        if c + "_ci" in row else row[c]) for c in columns}
                        for name, row in rows.items()}
    save_outputs(out, "diversity", {"model": model_name, "rows": rows},
                 markdown_table(table, columns, "noise"), plot)


def write_forgetting(out: Path, data: dict) -> None:
    """forgetting.forgetting_deltas's result: held-out changes after training, per family."""
    deltas = data["deltas"]
    columns = list(next(iter(deltas.values())).keys()) if deltas else []

    def plot(axes):
        grouped_bars(axes, deltas, columns)
        axes.axhline(0, color="k", lw=0.5)
        axes.set(ylabel="change after training", title="held-out tasks")

    save_outputs(out, "forgetting", data, markdown_table(deltas, columns), plot)


def write_forgetting_control(out: Path, result: dict) -> None:
    """forgetting.forgetting_control's result: held-out Pass@K of the base, ES, GRPO and the noise
    control."""
    means = result["means"]
    columns = list(next(iter(means.values())))

    def plot(axes):
        grouped_bars(axes, means, columns)
        axes.set(ylabel="held-out Pass@K",
                 title=f"held-out {', '.join(result['families']) or 'none'}: base, ES, GRPO, noise")

    save_outputs(out, "forgetting", result, markdown_table(means, columns), plot)


def write_curves(out: Path, curves: dict) -> None:
    """paths.training_curves: reward, entropy, disagreement and KL of each run along its updates and
    its sequences generated, each stage's own decoding named; the last line's values."""
    runs, decoding = curves["runs"], curves["decoding"]

    # each stage's own training decoding: ES greedy, GRPO sampled
    def label(name: str, stage: str) -> str:
        temperature = decoding[name][stage]
        return (f"{name}, {stage} "
                f"({'greedy' if not temperature else f'temperature {temperature:g}'})")

    def plot(axes):
        for row, x_key in enumerate(("update", "run_sequences")):
            for col, key in enumerate(CURVE_KEYS):
                for index, (name, lines) in enumerate(runs.items()):
                    for stage, ls in (("grpo", "-"), ("es", "--")):
                        points = [(m[x_key],
                                   m[key]) for m in lines if key in m and m["stage"] == stage]
                        if points:
                            axes[row, col].plot(*zip(*points), label=label(name, stage), lw=1,
                                                ls=ls, color=f"C{index}")
                title = "training decoding's token entropy" if key == "entropy" else ""
                axes[row, col].set(xlabel=x_key if x_key == "update" else "sequences generated",
                                   ylabel=key, title=title)
        axes[0, 0].legend(fontsize=6)

    summary = curves["summary"]
    save_outputs(out, "curves", {"runs": summary}, markdown_table(summary, CURVE_COLUMNS), plot,
                 panels=(2, len(CURVE_KEYS)))


def write_sweep(out: Path, rows: dict, run_flags: list[str], sequences: int) -> None:
    """training.population_sweep's rows: ES's Pass@K by population size at equal sequences."""
    populations = [row["population"] for row in rows.values()]

    def plot(axes):
        for key in ("pass@1", "pass@16", "pass@64"):
            if all(key in r for r in rows.values()):
                axes.plot(populations, [r[key] for r in rows.values()], marker="o", label=key)
        axes.set(xscale="log", xlabel="population N", ylabel="Pass@K",
                 title=f"ES at {sequences} sequences")
        axes.legend(fontsize=7)

    save_outputs(out, "sweep", {"rows": rows, "run_flags": run_flags},
                 markdown_table(rows,
                                ["alpha", "updates", "sequences", "pass@1", "pass@16", "pass@64"],
                                "population"), plot)


def sizes_table(sizes: dict) -> dict:
    """Pass@1 of each population, and the final pretraining loss, per model size."""
    return {f"{size} ({entry['parameters'] / 1e6:.2f}M)": {
        **{name: row["pass@1"] for name, row in entry["rows"].items()},
        "pretrain loss": entry.get("pretrain_loss")}
        for size, entry in sizes.items()}


def write_sizes(out: Path, sizes: dict) -> None:
    """training.size_sweeps's result: Pass@1 by population on each model size."""
    table = sizes_table(sizes)

    def plot(axes):
        for label, entry in zip(table, sizes.values()):
            axes.plot([row["population"] for row in entry["rows"].values()],
                      [row["pass@1"] for row in entry["rows"].values()], marker="o", label=label)
        axes.set(xscale="log", xlabel="population N (equal sequences)", ylabel="Pass@1",
                 title="ES, by model size")
        axes.legend(fontsize=7)

    save_outputs(out, "sizes", {size: {**entry, "rows": {
        name: {key: value for key, value in row.items() if key != "correct"}
        for name, row in entry["rows"].items()}}
        for size, entry in sizes.items()},
        markdown_table(table, list(next(iter(table.values()))), "model"), plot)


def write_pass_at_k(out: Path, curves: dict, k_max: int) -> None:
    """paths.pass_at_k_curves: Pass@K of the base and each schedule's end, K = 1..k_max."""
    ks = curve_ks(k_max)

    def plot(axes):
        for name, curve in curves.items():
            axes.plot(ks, [curve[f"pass@{k}"] for k in ks], marker="o", ms=3, label=LABELS[name],
                      color="k" if name == "base" else None, ls="--" if name == "base" else "-")
        axes.set(xscale="log", xlabel="K", ylabel="Pass@K (mean over seeds)",
                 title=f"Pass@K, K = 1..{k_max}")
        axes.set_xscale("log", base=2)
        axes.legend(fontsize=7)

    columns = [f"pass@{k}" for k in ks] + ["base_overtakes_at_K"]
    save_outputs(out, "pass_at_k", curves, markdown_table(curves, columns), plot)


def write_paths(out: Path, runs: dict, k: int, matched: dict | None = None,
                frontier: dict | None = None) -> None:
    """Each schedule's path (mean over seeds and problems, bars: 95% over seeds), the GRPO models
    trained to ES's Pass@1 (claim 1's matched comparison) and, against Pass@1, the frontier runs'
    paths (other learning rates and alphas): Pass@K and token entropy, the two things claim 1
    compares at matched Pass@1. Decoding: the evaluation's (temperature, samples per problem)."""
    paths = {name: path_arrays(run["paths"], k) for name, run in runs.items()}
    extra = {name: path_arrays(run["paths"], k) for name, run in (frontier or {}).items()}

    def plot(axes):
        for index, (name, path) in enumerate(paths.items()):
            (p1, e1), (pk, ek) = seed_spread(path["pass@1"]), seed_spread(path[f"pass@{k}"])
            style = dict(marker="o", ms=3, lw=1, capsize=2, color=f"C{index}", label=LABELS[name])
            axes[0, 0].errorbar(p1, pk, xerr=e1, yerr=ek, **style)
            axes[0, 1].errorbar(path["sequences"], p1, yerr=e1, **style)
            axes[1, 0].errorbar(path["sequences"], pk, yerr=ek, **style)
            axes[1, 1].errorbar(p1, *seed_spread(path["entropy"][:, :, None]), xerr=e1, **style)
        for index, (name, path) in enumerate(extra.items(), len(paths)):
            for row, key in ((0, f"pass@{k}"), (1, "entropy")):
                values = path[key] if key != "entropy" else path[key][:, :, None]
                axes[row, row].plot(seed_spread(path["pass@1"])[0], seed_spread(values)[0],
                                    marker=".", ls="--", lw=1, color=f"C{index}", label=name)
        if matched and matched["finals"]:
            plot_matched(axes, matched, runs["es"]["config"]["eval_samples"], k)
        base = paths["es"]
        axes[0, 0].plot(base["pass@1"].mean((1, 2))[:1], base[f"pass@{k}"].mean((1, 2))[:1], "k*",
                        ms=10, label="base")
        axes[0, 0].set(xlabel="Pass@1", ylabel=f"Pass@{k}",
                       title="paths in the (Pass@1, Pass@K) plane")
        axes[0, 1].set(xscale="symlog", xlabel="sequences generated", ylabel="Pass@1")
        axes[1, 0].set(xscale="symlog", xlabel="sequences generated", ylabel=f"Pass@{k}")
        axes[1, 1].set(xlabel="Pass@1", ylabel="token entropy (nats)",
                       title="entropy against Pass@1")
        axes[0, 0].legend(fontsize=6)

    data = {name: {key: value.mean(tuple(range(1, value.ndim))).tolist()
                   for key, value in path.items()
                   # interval() data: `entropy` is their ratio
                   if key not in ("entropy_sums", "entropy_tokens")}
            for name, path in {**paths, **extra}.items()}
    summary = {name: {"points": len(path["update"]), "last_update": int(path["update"][-1]),
                      "sequences": int(path["sequences"][-1]),
                      "seconds": float(path["seconds"][-1])}
               for name, path in {**paths, **extra}.items()}
    save_outputs(out, "paths", data, markdown_table(summary, list(next(iter(summary.values())))),
                 plot, panels=(2, 2))


def seed_spread(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """write_paths' points: (points, seeds, P) -> the mean and 95% half-width over the seeds'
    means."""
    per_seed, seeds = values.mean(2), values.shape[1]
    half = (t95(seeds) * per_seed.std(1, ddof=1) / np.sqrt(seeds) if seeds > 1
            else np.zeros(len(per_seed)))
    return per_seed.mean(1), half


def plot_matched(axes, matched: dict, n: int, k: int):
    """write_paths' black diamond: the GRPO models trained to ES's Pass@1 (n samples a problem),
    bars 95% over seeds, in the (Pass@1, Pass@K) and the entropy panels."""
    ends = [finals_array(matched["finals"], n, kk).mean(1) for kk in (1, k)]  # (seeds,) each
    half = [t95(len(e)) * e.std(ddof=1) / np.sqrt(len(e)) if len(e) > 1 else 0.0 for e in ends]
    axes[0, 0].errorbar(ends[0].mean(), ends[1].mean(), xerr=half[0], yerr=half[1], marker="D",
                        color="k", capsize=2,
                        label=f"GRPO trained to ES's Pass@1 ({matched['updates']} updates)")
    axes[1, 1].plot(ends[0].mean(), np.mean([row["entropy"] for row in matched["finals"]]), "kD")
