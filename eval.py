"""Evaluation and the paper's weight analyses, on top of es_grpo.py (which holds rollout, verifier, Pass@K).

    python eval.py MODEL [MODEL ...] --out evals/          # Pass@K curves, Maj@K, greedy accuracy, entropy, held-out
    python eval.py drift BASE TRAINED [TRAINED ...] --out evals/drift     # relative L2 drift per module kind
    python eval.py sparsity BASE TRAINED --out evals/sparsity            # zero |delta| <= tau: what Pass@K is kept
    python eval.py diversity MODEL --population 8 --sigma 1e-2          # JS_succ, JS_pol, coverage of an ES population
    python eval.py forgetting BEFORE AFTER [AFTER ...]                   # held-out task Pass@K deltas
    python eval.py curves RUN [RUN ...]                                  # training curves from metrics.jsonl
    python eval.py sweep --populations 8,16,32 --sequences 51200         # ES population sizes at equal sequences
    python eval.py reproduce --out report [--quick]                      # every experiment, REPORT.md with verdicts

MODEL is a folder (e.g. runs/es-s0/stage1-es) or a hub id; "" or "tiny" is the shipped tiny model.
Evaluation uses es_grpo's held-out problems (the `test` split unless --eval-split dev), never training ones.
Each command writes JSON, a markdown table and a PNG to --out.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

import es_grpo
from es_grpo import Args, evaluate, evaluation_sets, load_model, log, markdown_table, rollout, score

EVAL_FLAGS = ("data", "eval_data", "task", "eval_split", "eval_problems", "heldout_problems", "eval_samples",
              "eval_temperature", "eval_top_p", "max_new_tokens", "rollout_batch", "device", "dtype", "seed")
MODULE_KINDS = (("embeddings", ("embed",)), ("lm_head", ("lm_head",)), ("norms", ("norm",)),
                ("attention", ("attn", "attention")), ("mlp", ("mlp", "feed_forward")))


def parser_for(command: str) -> argparse.ArgumentParser:
    """The evaluation flags of es_grpo.Args (same names, defaults and help), plus this command's own."""
    parser = es_grpo.dataclass_parser(Args, f"eval.py {command}".strip(), __doc__, only=EVAL_FLAGS,
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="evals", help="folder for the JSON, markdown and PNG outputs")
    return parser


def eval_args(namespace) -> Args:
    args = Args(**{name: getattr(namespace, name) for name in EVAL_FLAGS})
    if args.eval_samples < 1 or args.eval_problems < 1:
        raise SystemExit("eval.py: --eval-samples and --eval-problems must be at least 1")
    return args


def curve_ks(n: int) -> list[int]:
    """K = 1, 2, 4, ... up to n, and n itself."""
    return sorted({2 ** i for i in range(int(np.log2(n)) + 1)} | {n})


def load(name: str, args: Args):
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_model("" if name in ("", "tiny") else name, device, args.dtype)
    return model.eval(), tokenizer


def greedy_accuracy(model, tokenizer, problems: list[dict], args: Args) -> float:
    roll = rollout(model, tokenizer, [es_grpo.prompt_text(p, tokenizer) for p in problems],
                   max_new_tokens=args.max_new_tokens, batch_size=args.rollout_batch)
    return float((score(problems, roll.texts) == 1.0).float().mean())


def evaluate_model(model, tokenizer, args: Args) -> dict:
    """Pass@K and Maj@K for every K of the curve, greedy accuracy, entropy and length, on the evaluation
    problems and on each held-out task family."""
    _, evaluation, heldout = evaluation_sets(args, tokenizer)
    ks = curve_ks(args.eval_samples)
    result = {"problems": len(evaluation),
              **evaluate(model, tokenizer, evaluation, args, args.seed, ks, ks, progress=True),
              "greedy": greedy_accuracy(model, tokenizer, evaluation, args)}
    for task, problems in heldout.items():
        result[f"heldout_{task}"] = {**evaluate(model, tokenizer, problems, args, args.seed, ks, ks, progress=True),
                                     "greedy": greedy_accuracy(model, tokenizer, problems, args)}
    return result


def grouped_bars(axes, rows: dict[str, dict], columns: list[str]):
    """One group of bars per column, one bar per row (model)."""
    width = 0.8 / len(rows)
    for i, (name, row) in enumerate(rows.items()):
        axes.bar(np.arange(len(columns)) + i * width, [row.get(c, 0.0) for c in columns], width, label=name)
    axes.set_xticks(np.arange(len(columns)) + 0.4 - width / 2, columns, fontsize=7)
    axes.legend(fontsize=7)


def save_outputs(out: Path, stem: str, data: dict, table: str, plot, panels: tuple[int, int] = (1, 1)):
    """JSON, markdown and PNG side by side; the PNG is drawn by plot(axes) (an array when panels > 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(data, indent=2))
    (out / f"{stem}.md").write_text(table + "\n")
    figure, axes = plt.subplots(*panels, figsize=(6 * panels[1], 4 * panels[0]), squeeze=panels == (1, 1))
    plot(axes)
    figure.tight_layout()
    figure.savefig(out / f"{stem}.png", dpi=120)
    plt.close(figure)
    log(table)
    log(f"wrote {out / stem}.json, .md, .png")


def cmd_evaluate(argv):
    parser = parser_for("")
    parser.add_argument("models", nargs="+", help="model folders or hub ids ('tiny': the shipped model)")
    namespace = parser.parse_args(argv)
    args = eval_args(namespace)
    results = {}
    for name in namespace.models:
        model, tokenizer = load(name, args)
        results[name] = evaluate_model(model, tokenizer, args)
    ks = curve_ks(args.eval_samples)
    columns = [f"pass@{k}" for k in ks] + [f"maj@{ks[-1]}", "greedy", "entropy", "length"]

    def plot(axes):
        for name, row in results.items():
            axes.plot(ks, [row[f"pass@{k}"] for k in ks], marker="o", label=name)
        axes.set(xscale="log", xlabel="K", ylabel="Pass@K",
                 title=f"Pass@K, n={args.eval_samples}, T={args.eval_temperature}")
        axes.legend(fontsize=7)

    settings = {k: getattr(args, k) for k in EVAL_FLAGS}
    save_outputs(Path(namespace.out), "pass_at_k", {"settings": settings, "models": results},
                 markdown_table(results, columns), plot)
    return results


# ----------------------------------------------------------------------------- weight analyses


def module_kind(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, marks in MODULE_KINDS if any(mark in lowered for mark in marks)), "other")


def named_weights(model) -> dict[str, torch.Tensor]:
    """Parameters by name, each once (tied embeddings count once), in fp32 on the CPU."""
    return {name: p.detach().float().cpu().clone() for name, p in model.named_parameters()}


def drift(base: dict[str, torch.Tensor], trained: dict[str, torch.Tensor]) -> dict:
    """Relative L2 distance ||theta - theta_base|| / ||theta_base||, in total and per module kind."""
    if base.keys() != trained.keys():
        raise SystemExit("eval.py drift: the models have different parameters")
    delta_sq, base_sq = {}, {}
    for name in base:
        kind = module_kind(name)
        delta_sq[kind] = delta_sq.get(kind, 0.0) + float((trained[name] - base[name]).double().pow(2).sum())
        base_sq[kind] = base_sq.get(kind, 0.0) + float(base[name].double().pow(2).sum())
    result = {kind: (delta_sq[kind] / base_sq[kind]) ** 0.5 if base_sq[kind] else 0.0 for kind in delta_sq}
    result["total"] = (sum(delta_sq.values()) / sum(base_sq.values())) ** 0.5
    return result


def sparsify(base: dict[str, torch.Tensor], trained: dict[str, torch.Tensor], tau: float):
    """theta_base + delta * (|delta| > tau), and the fraction of coordinates whose update was zeroed."""
    kept, zeroed, total = {}, 0, 0
    for name in base:
        delta = trained[name] - base[name]
        mask = delta.abs() > tau
        kept[name] = base[name] + delta * mask
        zeroed += int((~mask).sum())
        total += mask.numel()
    return kept, zeroed / total


def cmd_drift(argv):
    parser = parser_for("drift")
    parser.add_argument("base", help="the model before training")
    parser.add_argument("trained", nargs="+", help="trained models (e.g. an ES and a GRPO checkpoint)")
    namespace = parser.parse_args(argv)
    args = eval_args(namespace)
    base = named_weights(load(namespace.base, args)[0])
    results = {name: drift(base, named_weights(load(name, args)[0])) for name in namespace.trained}
    kinds = ["total"] + [kind for kind, _ in MODULE_KINDS] + ["other"]
    kinds = [k for k in kinds if any(k in r for r in results.values())]
    names = list(results)
    ratio = {}
    if len(names) == 2 and results[names[1]]["total"] > 0:
        ratio = {f"{names[0]} / {names[1]}": results[names[0]]["total"] / results[names[1]]["total"]}

    def plot(axes):
        grouped_bars(axes, results, kinds)
        axes.set(yscale="log", ylabel="relative L2 drift", title="drift from the base model")

    table = markdown_table(results, kinds) + "".join(f"\n\ndrift ratio {k}: {v:.2f}" for k, v in ratio.items())
    data = {"base": namespace.base, "drift": results, "ratio": ratio}
    save_outputs(Path(namespace.out), "drift", data, table, plot)
    return data


def cmd_sparsity(argv):
    parser = parser_for("sparsity")
    parser.add_argument("base", help="the model before training")
    parser.add_argument("trained", help="the trained model whose update is sparsified")
    parser.add_argument("--taus", default="0,2.5e-4,5e-4,1e-3,2e-3,3e-3,1e-2,3e-2",
                        help="comma-separated thresholds tau (the paper: 2.5e-4 to 3e-3)")
    namespace = parser.parse_args(argv)
    args = eval_args(namespace)
    try:
        taus = [float(t) for t in namespace.taus.split(",")]
    except ValueError:
        parser.error(f"--taus: not a list of numbers: {namespace.taus!r}")
    model, tokenizer = load(namespace.trained, args)
    base, trained = named_weights(load(namespace.base, args)[0]), named_weights(model)
    _, evaluation, _ = evaluation_sets(args, tokenizer)
    k = max(k for k in es_grpo.PASS_KS if k <= args.eval_samples)
    full = evaluate(model, tokenizer, evaluation, args, args.seed, (1, k), ())
    rows = {}
    for tau in [float("inf"), *taus]:  # tau = inf first: the base model, against which the gain is measured
        weights, sparsity = sparsify(base, trained, tau)
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(weights[name])
        result = evaluate(model, tokenizer, evaluation, args, args.seed, (1, k), ())
        gain = full["pass@1"] - rows["tau=inf"]["pass@1"] if rows else float("nan")
        rows[f"tau={tau:g}"] = {"tau": tau, "sparsity": sparsity, "pass@1": result["pass@1"],
                                f"pass@{k}": result[f"pass@{k}"],
                                "pass@1_kept": result["pass@1"] / full["pass@1"] if full["pass@1"] else float("nan"),
                                "gain_kept": ((result["pass@1"] - rows["tau=inf"]["pass@1"]) / gain
                                              if rows and gain > 0 else float("nan"))}
    full["base_pass@1"] = rows.pop("tau=inf")["pass@1"]  # every update zeroed: the base model

    def plot(axes):
        xs = [100 * r["sparsity"] for r in rows.values()]
        axes.plot(xs, [r["pass@1"] for r in rows.values()], marker="o", label="Pass@1")
        axes.plot(xs, [r[f"pass@{k}"] for r in rows.values()], marker="s", label=f"Pass@{k}")
        axes.axhline(full["pass@1"], ls=":", color="C0")
        axes.axhline(full[f"pass@{k}"], ls=":", color="C1")
        axes.set(xlabel="update coordinates zeroed (%)", ylabel="Pass@K", title="sparsified update")
        axes.legend(fontsize=7)

    table = markdown_table(rows, ["sparsity", "pass@1", f"pass@{k}", "pass@1_kept", "gain_kept"], "threshold")
    save_outputs(Path(namespace.out), "sparsity", {"base": namespace.base, "trained": namespace.trained,
                                                    "full": full, "rows": rows}, table, plot)
    return rows


# ----------------------------------------------------------------------------- diversity of an ES population


def js_pol(logp: torch.Tensor) -> float:
    """JS_pol = mean_i KL(pi_i || pi_bar), pi_bar = mean_j pi_j, estimated from samples of each member.

    logp: (N, N, S): logp[i, j, s] = log pi_j(y) for the s-th sample y drawn from member i."""
    members = logp.shape[0]
    own = logp.diagonal(dim1=0, dim2=1).T  # (N, S): log pi_i(y) for y ~ pi_i
    mixture = torch.logsumexp(logp, dim=1) - np.log(members)  # (N, S): log pi_bar(y)
    return float((own - mixture).mean())


def population_diversity(model, tokenizer, problems: list[dict], args: Args, population: int, sigma: float,
                         samples: int, seed: int = 0) -> dict:
    """Perturb the model N times as ES does; per problem, success rates p_i of each member and of the centre,
    JS_succ, JS_pol, the predicted coverage gain N p(1-p)^(N-1) JS_succ and the measured Pass@N of the
    population (one sample per member) against the centre model's Pass@N. With few samples the plug-in
    JS_succ is biased upward (and can then exceed JS_pol, which it never does exactly): raise --samples."""
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    seeds = es_grpo.random.Random(seed).sample(range(2**31 - 1), population)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems for _ in range(samples)]
    repeated = [p for p in problems for _ in range(samples)]

    def sample(member_seed):
        if member_seed is None:
            es_grpo.set_weights(params, master)
        else:
            es_grpo.set_weights(params, master, member_seed, sigma)
        roll = rollout(model, tokenizer, prompts, temperature=args.eval_temperature, max_new_tokens=args.max_new_tokens,
                       seed=seed, batch_size=args.rollout_batch)
        success = (score(repeated, roll.texts) == 1.0).float().view(len(problems), samples).mean(1)  # (P,)
        return roll, success

    centre_success = sample(None)[1]
    rolls, success = zip(*(sample(s) for s in seeds))
    success = torch.stack(success)  # (N, P)
    logp = torch.zeros(population, population, len(problems), samples)  # [i, j]: samples of i scored by j
    with torch.no_grad():
        for j, member_seed in enumerate(seeds):
            es_grpo.set_weights(params, master, member_seed, sigma)
            for i, roll in enumerate(rolls):
                token_logp, _ = es_grpo.token_logprobs(model, roll, args.eval_temperature)  # (P*S, T)
                logp[i, j] = (token_logp * roll.completion_mask).sum(1).view(len(problems), samples)
    es_grpo.set_weights(params, master)
    per_problem_js_succ = es_grpo.binary_entropy(success.mean(0)) - es_grpo.binary_entropy(success).mean(0)  # (P,)
    p_bar = success.mean(0)  # (P,)
    predicted = population * p_bar * (1 - p_bar) ** (population - 1) * per_problem_js_succ  # (P,)
    population_pass = 1 - (1 - success).prod(0)  # (P,) one sample from each member
    centre_pass = 1 - (1 - centre_success) ** population  # (P,) N samples from the centre
    return {"population": population, "sigma": sigma, "samples": samples, "problems": len(problems),
            "js_succ": float(per_problem_js_succ.mean()),
            "js_pol": float(np.mean([js_pol(logp[:, :, p]) for p in range(len(problems))])),
            "predicted_gain": float(predicted.mean()), "population_pass@N": float(population_pass.mean()),
            "centre_pass@N": float(centre_pass.mean()),
            "measured_gain": float((population_pass - centre_pass).mean())}


def cmd_diversity(argv):
    parser = parser_for("diversity")
    parser.add_argument("model", help="the centre model")
    parser.add_argument("--population", type=int, default=8, help="ES population N")
    parser.add_argument("--sigma", type=float, default=Args.es_sigma, help="ES noise scale")
    parser.add_argument("--sigmas", default="", help="comma-separated sigmas to sweep (overrides --sigma)")
    parser.add_argument("--samples", type=int, default=8, help="samples per problem and member")
    namespace = parser.parse_args(argv)
    args = eval_args(namespace)
    if namespace.population < 2 or namespace.samples < 1:
        parser.error("--population must be at least 2 and --samples at least 1")
    sigmas = [float(x) for x in namespace.sigmas.split(",")] if namespace.sigmas else [namespace.sigma]
    model, tokenizer = load(namespace.model, args)
    _, evaluation, _ = evaluation_sets(args, tokenizer)
    rows = {f"sigma={sigma:g}": population_diversity(model, tokenizer, evaluation, args, namespace.population, sigma,
                                                      namespace.samples, args.seed) for sigma in sigmas}

    def plot(axes):
        xs = [r["sigma"] for r in rows.values()]
        for key in ("js_succ", "js_pol", "predicted_gain", "measured_gain"):
            axes.plot(xs, [r[key] for r in rows.values()], marker="o", label=key)
        axes.set(xscale="log", xlabel="sigma", title=f"ES population diversity, N={namespace.population}")
        axes.legend(fontsize=7)

    columns = ["js_succ", "js_pol", "predicted_gain", "population_pass@N", "centre_pass@N", "measured_gain"]
    save_outputs(Path(namespace.out), "diversity", {"model": namespace.model, "rows": rows},
                 markdown_table(rows, columns, "noise"), plot)
    return rows


# ----------------------------------------------------------------------------- forgetting and training curves


def cmd_forgetting(argv):
    parser = parser_for("forgetting")
    parser.add_argument("before", help="the model before training")
    parser.add_argument("after", nargs="+", help="trained models")
    namespace = parser.parse_args(argv)
    args = eval_args(namespace)
    results = {name: evaluate_model(*load(name, args), args) for name in [namespace.before, *namespace.after]}
    families = [key for key in results[namespace.before] if key.startswith("heldout_")]
    ks = curve_ks(args.eval_samples)
    deltas = {name: {f"{family[8:]} pass@{k}": (results[name][family][f"pass@{k}"]
                                                - results[namespace.before][family][f"pass@{k}"])
                     for family in families for k in (ks[0], ks[-1])} for name in namespace.after}
    columns = list(next(iter(deltas.values())).keys()) if families else []

    def plot(axes):
        grouped_bars(axes, deltas, columns)
        axes.axhline(0, color="k", lw=0.5)
        axes.set(ylabel="change after training", title="held-out tasks")

    save_outputs(Path(namespace.out), "forgetting", {"before": namespace.before, "results": results, "deltas": deltas},
                 markdown_table(deltas, columns), plot)
    return deltas


def read_metrics(run: Path) -> list[dict]:
    """metrics.jsonl lines, with `run_sequences`: sequences generated since the start of the run (the
    lines' own `sequences` restart at each stage)."""
    try:
        lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as err:
        raise SystemExit(f"{run}: cannot read metrics.jsonl ({err.__class__.__name__})")
    earlier, previous = 0, None
    for line in lines:
        if previous is not None and line["stage"] != previous["stage"]:
            earlier += previous["sequences"]
        line["run_sequences"], previous = earlier + line["sequences"], line
    return lines


def cmd_curves(argv):
    parser = argparse.ArgumentParser(prog="eval.py curves", description="training curves of run folders")
    parser.add_argument("runs", nargs="+", help="run folders written by es_grpo.py")
    parser.add_argument("--out", default="evals", help="output folder")
    namespace = parser.parse_args(argv)
    runs = {name: read_metrics(Path(name)) for name in namespace.runs}
    keys = ("reward", "entropy", "js_succ", "kl")

    def plot(axes):
        for row, x_key in enumerate(("update", "run_sequences")):
            for col, key in enumerate(keys):
                for index, (name, lines) in enumerate(runs.items()):
                    points = [(m[x_key], m[key]) for m in lines if key in m]
                    if points:
                        axes[row, col].plot(*zip(*points), label=name, lw=1, color=f"C{index}")
                axes[row, col].set(xlabel=x_key if x_key == "update" else "sequences generated", ylabel=key)
        axes[0, 0].legend(fontsize=6)

    columns = ["update", "reward", "entropy", "run_sequences"]
    summary = {name: {key: lines[-1].get(key) for key in columns} for name, lines in runs.items()}
    save_outputs(Path(namespace.out), "curves", {"runs": summary}, markdown_table(summary, columns),
                 plot, panels=(2, len(keys)))
    return summary


# ----------------------------------------------------------------------------- population sweep and reproduction report


def train_run(out: Path, argv: list[str]) -> dict:
    """One es_grpo.py run, in this process, into a fresh folder; returns its summary."""
    return es_grpo.run(es_grpo.parse_args([*argv, "--out", str(out), "--overwrite"]))


def final(summary: dict) -> dict:
    return summary["stages"][-1]


def population_sweep(out: Path, argv: list[str], populations: list[int], sequences: int, prompts: int) -> dict:
    """ES with several population sizes N at (about) the same total number of generated sequences."""
    rows = {}
    for population in populations:
        steps = max(1, sequences // (population * prompts))
        summary = train_run(out / f"sweep-N{population}", [*argv, "--algo", "es", "--es-population", str(population),
                                                           "--es-prompts", str(prompts), "--steps", str(steps)])
        rows[f"N={population}"] = {"population": population, "updates": steps, "sequences": final(summary)["sequences"],
                                   **{k: final(summary)[k] for k in ("pass@1", "pass@16", "pass@64")
                                      if k in final(summary)}}
    return rows


def cmd_sweep(argv):
    parser = argparse.ArgumentParser(prog="eval.py sweep", description="ES population sizes at equal sequences")
    parser.add_argument("--populations", default="8,16,32", help="comma-separated population sizes N")
    parser.add_argument("--sequences", type=int, default=32 * 64 * 25, help="sequences each ES run may generate")
    parser.add_argument("--prompts", type=int, default=Args.es_prompts, help="prompts per member and iteration")
    parser.add_argument("--out", default="evals", help="output folder (runs go to OUT/runs)")
    namespace, run_flags = parser.parse_known_args(argv)  # other flags go to es_grpo.py
    populations = [int(n) for n in namespace.populations.split(",")]
    rows = population_sweep(Path(namespace.out) / "runs", run_flags, populations, namespace.sequences,
                            namespace.prompts)

    def plot(axes):
        for key in ("pass@1", "pass@16", "pass@64"):
            if all(key in r for r in rows.values()):
                axes.plot(populations, [r[key] for r in rows.values()], marker="o", label=key)
        axes.set(xscale="log", xlabel="population N", ylabel="Pass@K", title=f"ES at {namespace.sequences} sequences")
        axes.legend(fontsize=7)

    save_outputs(Path(namespace.out), "sweep", {"rows": rows, "run_flags": run_flags},
                 markdown_table(rows, ["updates", "sequences", "pass@1", "pass@16", "pass@64"], "population"), plot)
    return rows


def mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def verdicts(table: dict, drift_rows: dict, sparsity_rows: dict, diversity_row: dict, sweep: dict) -> list[tuple]:
    """(claim, verdict, evidence) for the six claims of PAPER.md, from this report's own numbers."""
    m = {name: {k: float(np.mean(v)) for k, v in row.items()} for name, row in table.items()}
    base, grpo, es, grpo_es = m["base"], m["grpo"], m["es"], m["grpo-es"]
    k = max(int(key[5:]) for key in base if key.startswith("pass@"))
    top = f"pass@{k}"
    es_ok = es["pass@1"] > base["pass@1"] and es[top] >= base[top] - 0.02
    grpo_ok = grpo["entropy"] < base["entropy"] and grpo[top] < base[top]
    claims = [("1. ES raises Pass@1 and keeps Pass@K; GRPO's entropy collapses and its Pass@K falls",
               "reproduced" if es_ok and grpo_ok else "not reproduced",
               f"Pass@1 / {top} / entropy: base {base['pass@1']:.3f} / {base[top]:.3f} / {base['entropy']:.3f}, "
               f"ES {es['pass@1']:.3f} / {es[top]:.3f} / {es['entropy']:.3f}, "
               f"GRPO {grpo['pass@1']:.3f} / {grpo[top]:.3f} / {grpo['entropy']:.3f}")]
    gain, predicted = diversity_row["measured_gain"], diversity_row["predicted_gain"]
    claims.append(("2. The ES population's JS diversity explains its higher Pass@K",
                   "reproduced" if gain > 0 and predicted > 0 and diversity_row["js_succ"] <= diversity_row["js_pol"]
                   else "not reproduced",
                   f"JS_succ {diversity_row['js_succ']:.3f} <= JS_pol {diversity_row['js_pol']:.3f}; "
                   "predicted coverage gain "
                   f"{predicted:.3f}, measured population-vs-centre Pass@N gain {gain:.3f}"))
    both = grpo_es["pass@1"] >= grpo["pass@1"] - 0.01 and grpo_es[top] >= es[top] - 0.02
    claims.append(("3. GRPO->ES combines GRPO's Pass@1 with ES's Pass@K", "reproduced" if both else "not reproduced",
                   f"GRPO->ES Pass@1 {grpo_es['pass@1']:.3f} (GRPO {grpo['pass@1']:.3f}), "
                   f"{top} {grpo_es[top]:.3f} (ES {es[top]:.3f})"))
    ratio = next(iter(drift_rows["ratio"].values()), float("nan"))
    sparse = [r for r in sparsity_rows.values() if 0.5 <= r["sparsity"] < 1 and r["gain_kept"] >= 0.8]
    claims.append(("4. ES drifts far (about 40x GRPO) but its gain lives in a sparse set of large updates",
                   "reproduced" if ratio >= 10 and sparse else "partly reproduced" if ratio > 1 and sparse
                   else "not reproduced",
                   f"ES/GRPO drift ratio {ratio:.1f}; "
                   + (f"tau {sparse[-1]['tau']:g} zeroes {100 * sparse[-1]['sparsity']:.0f}% "
                   f"of the update keeping {100 * sparse[-1]['gain_kept']:.0f}% of its Pass@1 gain" if sparse
                   else "no tau zeroed half the update while keeping 80% of the Pass@1 gain")))
    held = f"heldout_pass@{k}"
    claims.append(("5. No catastrophic forgetting after ES on held-out tasks",
                   "reproduced" if es[held] >= base[held] else "not reproduced",
                   f"held-out {held[8:]}: base {base[held]:.3f}, ES {es[held]:.3f}, GRPO {grpo[held]:.3f}"))
    claims.append(("6. Larger models need smaller populations; z-scoring helps; antithetic sampling does not",
                   "not measurable here", "one model size only; population sweep at equal sequences: " +
                   ", ".join(f"N={r['population']}: Pass@1 {r['pass@1']:.3f}" for r in sweep.values())))
    return claims


def cmd_reproduce(argv):
    parser = argparse.ArgumentParser(prog="eval.py reproduce", description="the paper's experiment set at tiny scale")
    parser.add_argument("--out", default="report", help="report folder (runs, plots, REPORT.md)")
    parser.add_argument("--quick", action="store_true", help="one seed and small budgets (a few minutes)")
    parser.add_argument("--seeds", default="", help="comma-separated seeds (default 0,1,2; --quick: 0)")
    parser.add_argument("--steps", type=int, default=0, help="updates per schedule (default 100; --quick: 4)")
    namespace = parser.parse_args(argv)
    quick = namespace.quick
    seeds = [int(s) for s in (namespace.seeds or ("0" if quick else "0,1,2")).split(",")]
    steps = namespace.steps or (4 if quick else 100)
    out = Path(namespace.out)
    eval_flags = ["--eval-problems", "10", "--heldout-problems", "5", "--eval-samples", "16"] if quick else []
    common = ["--es-population", "4", "--es-prompts", "8", "--grpo-prompts", "4", *eval_flags] if quick else []
    summaries = {}
    for seed in seeds:
        for algo in ("grpo", "es", "grpo-es", "es-grpo"):
            log(f"reproduce: {algo}, seed {seed}, {steps} updates")
            summaries[(algo, seed)] = train_run(out / "runs" / f"{algo}-s{seed}",
                                                [*common, "--algo", algo, "--steps", str(steps), "--seed", str(seed)])
    columns = [c for c in ("pass@1", "pass@16", "pass@64", "maj@16", "entropy", "heldout_pass@64", "heldout_pass@16")
               if c in final(summaries[("es", seeds[0])])]
    table = {"base": {c: [summaries[("grpo", s)]["stages"][0][c] for s in seeds] for c in columns}}
    for algo in ("grpo", "es", "grpo-es", "es-grpo"):
        table[algo] = {c: [final(summaries[(algo, s)])[c] for s in seeds] for c in columns + ["sequences"]}
    seed = seeds[0]
    runs = out / "runs"
    es_model, grpo_model = str(runs / f"es-s{seed}" / "stage1-es"), str(runs / f"grpo-s{seed}" / "stage1-grpo")
    analyses_out = out / "analyses"
    drift_rows = cmd_drift(["tiny", es_model, grpo_model, *eval_flags, "--out", str(analyses_out / "drift")])
    sparsity_rows = cmd_sparsity(["tiny", es_model, *eval_flags, "--out", str(analyses_out / "sparsity")])
    population = 4 if quick else Args.es_population
    diversity_rows = cmd_diversity(["tiny", "--population", str(population), "--samples", "2" if quick else "8",
                                    *eval_flags, "--out", str(analyses_out / "diversity")])
    cmd_curves([str(runs / f"{algo}-s{seed}") for algo in ("grpo", "es", "grpo-es", "es-grpo")]
               + ["--out", str(analyses_out / "curves")])
    sweep = population_sweep(out / "runs", common, [2, 4] if quick else [8, 16, 32],
                             sequences=64 if quick else 32 * 64 * 25, prompts=8 if quick else 64)
    claims = verdicts(table, drift_rows, sparsity_rows, next(iter(diversity_rows.values())), sweep)
    lines = ["# Reproduction report (tiny scale)", "",
             f"Command: `python eval.py reproduce {' '.join(argv)}`; seeds {seeds}; {steps} updates per schedule "
             "(two-stage schedules: half each); settings: the tiny preset of es_grpo.py"
             f"{' with ' + ' '.join(common) if common else ''}. "
             "Pass@K on the `test` split at temperature 0.6; mean ± sample std over seeds.", "",
             "| run | " + " | ".join(columns + ["sequences"]) + " |", "|" + "---|" * (len(columns) + 2)]
    for name, row in table.items():
        cells = (mean_std(row[c]) if c in row else "-" for c in columns + ["sequences"])
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Claims", "", "| claim | verdict | numbers |", "|---|---|---|"]
    lines += [f"| {claim} | **{verdict}** | {evidence} |" for claim, verdict, evidence in claims]
    lines += ["", "## Population sweep (equal sequences)", "",
              markdown_table(sweep, ["updates", "sequences", "pass@1", "pass@16", "pass@64"], "population"),
              "", "## Plots", ""]
    lines += [f"![{name}](analyses/{name}/{name}.png)" for name in ("drift", "sparsity", "diversity", "curves")]
    (out / "REPORT.md").write_text("\n".join(lines) + "\n")
    (out / "report.json").write_text(json.dumps({"seeds": seeds, "steps": steps, "table": table, "claims": claims,
                                                 "sweep": sweep}, indent=2))
    log(f"wrote {out / 'REPORT.md'}")
    return claims


COMMANDS = {"reproduce": cmd_reproduce, "sweep": cmd_sweep, "drift": cmd_drift, "sparsity": cmd_sparsity,
            "diversity": cmd_diversity, "forgetting": cmd_forgetting,
            "curves": cmd_curves}

def main(argv: list[str]):
    command = COMMANDS.get(argv[0] if argv else "")
    return command(argv[1:]) if command else cmd_evaluate(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
