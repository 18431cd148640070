"""Claim 2's measurement: the success counts of an ES population around a model, and from them
JS_succ, the paper's predicted coverage gain and the measured one, estimated without bias where
counts are zero; JS_pol from every member's samples scored by every member."""
from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import torch

import es_grpo
from analyses.evaluation import context, load, measured, versioned
from analyses.statistics import interval, per_problem
from es_grpo import Context, score
from scale.chunks import concat_rollouts
from scale.config import Args, evaluation_sets

def js_pol(logp: torch.Tensor) -> float:
    """JS_pol = mean_i KL(pi_i || pi_bar), pi_bar = mean_j pi_j, estimated from samples of each
    member.

    logp: (N, N, S): logp[i, j, s] = log pi_j(y) for the s-th sample y drawn from member i."""
    members = logp.shape[0]
    own = logp.diagonal(dim1=0, dim2=1).T  # (N, S): log pi_i(y) for y ~ pi_i
    mixture = torch.logsumexp(logp, dim=1) - np.log(members)  # (N, S): log pi_bar(y)
    return float((own - mixture).mean())


def completion_logprobs(model, roll: es_grpo.Rollout, temperature: float,
                        batch: int = 16) -> torch.Tensor:
    """(B,) each completion's log-prob under model at temperature, scored in batches of rows of like
    length, each trimmed to its own longest prompt and completion: a batch costs its own tokens, not
    the roll's longest."""
    lengths, prompt_lengths = roll.completion_mask.sum(1), roll.prompt_mask.sum(1)  # (B,) each
    total = torch.zeros(len(lengths))
    for rows in lengths.argsort().split(batch):
        width, prompt_width = int(lengths[rows].max().clamp(min=1)), int(prompt_lengths[rows].max())
        part = es_grpo.Rollout([], roll.prompt_ids[rows, -prompt_width:],
                               roll.prompt_mask[rows, -prompt_width:],
                               roll.completion_ids[rows, :width],
                               roll.completion_mask[rows, :width], None, None)
        token_logp, _ = es_grpo.token_logprobs(model, part, temperature)  # (b, width)
        total[rows] = (token_logp * part.completion_mask).sum(1).float()
    return total


def population_diversity(run: Context, problems: list[dict], population: int, sigma: float,
                         samples: int, draw: int = 0) -> dict:
    """Perturb the model N times as ES does and count, per problem, each member's and the centre's
    correct answers among `samples` draws at the evaluation temperature, every member with its own
    sampling noise (diversity_statistics turns the counts into JS_succ, the predicted and the
    measured coverage gains). JS_pol (shown beside the verdict, not read by it) scores each member's
    first draw of every problem under every member: N^2 P scorings, fewer than the (N + 1) P samples
    >= (N + 1) P N draws decoded for the counts, at any model size (its cost: report/NOTES.md,
    "Real-size speed"). The members' seeds and sampling noise follow run.args.seed; `draw` numbers
    the measurement (one per sigma), so that each sigma's centre and members sample with noise of
    their own."""
    model, tokenizer, args, seed = run.model, run.tokenizer, run.args, run.args.seed
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    seeds = random.Random(seed).sample(range(2**31 - 1), population)
    repeated = [p for p in problems for _ in range(samples)]
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in repeated]

    # (P,) correct answers among `samples`, and the first draws' roll
    def correct(member_seed, index: int):
        # index 0: the centre; 1..N: the members
        es_grpo.set_weights(params, master, member_seed, sigma)
        sampling = args.sampling("eval",
                                 seed * 1_000_003 + (draw * (2 * population + 2) + index) * 7919)
        # as JS_pol scores
        roll = run.generate(model, tokenizer, prompts, dataclasses.replace(sampling, top_p=1.0))
        rewards = score(run, repeated, roll.texts)
        return (rewards == 1.0).view(len(problems),
                                     samples).sum(1), roll.rows(slice(0, None, samples))

    centre, _ = correct(None, 0)
    counted = [correct(member_seed, i + 1) for i, member_seed in enumerate(seeds)]
    members = torch.stack([counts for counts, _ in counted])  # (N, P)
    # (N P) rows, i-major
    firsts = concat_rollouts([first for _, first in counted], tokenizer.pad_token_id)
    # [i, j, p]: i's draw of problem p scored by j
    logp = torch.zeros(population, population, len(problems))
    with torch.no_grad():
        for j, member_seed in enumerate(seeds):
            es_grpo.set_weights(params, master, member_seed, sigma)
            # (N P,) all together: the
            scored = completion_logprobs(model, firsts, args.eval_temperature)
            logp[:, j] = scored.view(population, len(problems))  # fewest padded tokens
    es_grpo.set_weights(params, master)
    return {"population": population, "sigma": sigma, "samples": samples, "problems": len(problems),
            "js_pol": js_pol(logp), "js_pol_problems": len(problems), "js_pol_samples": 1,
            "member_correct": members.tolist(), "centre_correct": centre.tolist()}


RATE_GRID = 256  # points of a problem's mean success rate, on which member_rate_model integrates it


def member_rate_model(member_correct: np.ndarray, samples: int, iterations: int = 100) -> dict:
    """Empirical Bayes for the ES members' success rates: problem p's mean rate mu_p ~ Beta(a, b),
    member i's rate p_ip ~ Beta(kappa mu_p, kappa (1 - mu_p)), its count of correct answers ~
    Binomial(samples, p_ip); (a, b, kappa) maximise the counts' marginal likelihood (L-BFGS; mu_p
    integrated on RATE_GRID points). Returns them, the grid, and each problem's posterior of mu_p on
    it, (RATE_GRID, P). A member's zero count then says "small", not "zero": its rate is read with
    the other members' on that problem and the problems' spread."""
    counts = torch.as_tensor(np.asarray(member_correct), dtype=torch.float64)  # (N, P)
    k = torch.arange(samples + 1, dtype=torch.float64)  # (S+1,) every possible count
    # (S+1, P) members with each count
    histogram = (counts[None] == k[:, None, None]).sum(1).double()
    mu = (torch.arange(RATE_GRID, dtype=torch.float64) + 0.5) / RATE_GRID  # (G,)
    # (S+1,)
    log_choose = math.lgamma(samples + 1) - torch.lgamma(k + 1) - torch.lgamma(samples - k + 1)
    lbeta = lambda x, y: torch.lgamma(x) + torch.lgamma(y) - torch.lgamma(x + y)  # noqa: E731
    # log a, b, kappa
    logs = torch.tensor([0.0, 0.0, math.log(10.0)], dtype=torch.float64, requires_grad=True)

    def log_joint():  # (G, P): log prior(mu) + log P(the problem's counts | mu)
        # members alike: kappa grows without end, stopped at 1.2e6
        a, b, kappa = logs.clamp(-7.0, 14.0).exp()
        # (G,)
        prior = (a - 1) * mu.log() + (b - 1) * (-mu).log1p() - lbeta(a, b) - math.log(RATE_GRID)
        alpha, beta = (kappa * mu)[:, None], (kappa * (1 - mu))[:, None]  # (G, 1)
        # (G, S+1) beta-binomial
        each = log_choose + lbeta(k + alpha, samples - k + beta) - lbeta(alpha, beta)
        return prior[:, None] + each @ histogram  # (G, P)

    optimizer = torch.optim.LBFGS([logs], max_iter=iterations, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = -torch.logsumexp(log_joint(), 0).sum()
        loss.backward()
        return loss
    optimizer.step(closure)
    with torch.no_grad():
        a, b, kappa = logs.clamp(-7.0, 14.0).exp().tolist()
        return {"a": a, "b": b, "kappa": kappa, "mu": mu.numpy(),
                "posterior": torch.softmax(log_joint(), 0).numpy()}


def posterior_diversity(member_correct: np.ndarray, samples: int, draws: int = 200,
                        seed: int = 0) -> dict:
    """Per problem (P,), posterior means under member_rate_model (`draws` draws of every member's
    rate) of js_succ = h(p_bar) - mean_i h(p_i), predicted = N p_bar (1 - p_bar)^(N-1) js_succ (the
    paper's formula) and gain = (1 - p_bar)^N - prod_i (1 - p_i) (the population's Pass@N over one
    policy of its mean success). Checked by simulation where the truth is known
    (tests/test_diversity.py:
    test_claim2s_ratio_is_estimated_without_bias_where_counts_are_zero)."""
    member_correct = np.asarray(member_correct)
    population, problems = member_correct.shape
    fit, rng = member_rate_model(member_correct, samples), np.random.default_rng(seed)
    cdf = fit["posterior"].cumsum(0)  # (G, P)
    # (D, P)
    picks = (rng.random((draws, problems))[:, None, :] > cdf[None]).sum(1).clip(max=RATE_GRID - 1)
    mu = fit["mu"][picks][:, None, :]  # (D, 1, P)
    p = rng.beta(fit["kappa"] * mu + member_correct,
                 fit["kappa"] * (1 - mu) + samples - member_correct)  # (D,N,P)
    h = lambda q: es_grpo.binary_entropy(torch.as_tensor(q)).numpy()  # noqa: E731
    p_bar = p.mean(1)  # (D, P)
    js = h(p_bar) - h(p).mean(1)
    predicted = population * p_bar * (1 - p_bar) ** (population - 1) * js
    gain = (1 - p_bar) ** population - np.prod(1 - p, 1)
    ratios = predicted.sum(1) / gain.sum(1)  # (D,) the ratio over problems, draw by draw
    return {"js_succ": js.mean(0), "predicted": predicted.mean(0), "gain": gain.mean(0),
            "ratio": (float(predicted.mean(0).sum() / gain.mean(0).sum()),
                      *np.percentile(ratios, [2.5, 97.5])),
            "rate_model": {key: fit[key] for key in ("a", "b", "kappa")}}


def mean_policy_fails(member_correct: np.ndarray, samples: int) -> np.ndarray:
    """(P,) an unbiased estimate of (1 - p_bar)^N, N draws of one policy of the members' mean
    success all failing, from each member's count of correct answers among `samples` (N <= samples).
    (1 - p_bar)^N is the mean over the N^N tuples of members of prod_j (1 - p_{i_j}); a member drawn
    m times is estimated without bias by the chance that m of its own samples, drawn without
    replacement, all fail, C(S - c, m) / C(S, m); the tuples are summed by a generating function: N!
    / N^N [t^N] prod_i sum_m C(S - c_i, m) / C(S, m) t^m / m!. (Pass@N of the pooled N x S samples
    draws a member twice more often than a tuple does: biased low by 2-3% of the JS part in
    simulation, tests/test_diversity.py.)"""
    counts = np.asarray(member_correct, dtype=int)
    population, problems = counts.shape
    draws = np.arange(population + 1)
    # table[c, m] = C(S - c, m) / C(S, m) / m!, for every count c and multiplicity m
    table = (np.array([[1.0 - es_grpo.pass_at_k(samples, c, m) if m else 1.0 for m in draws]
                       for c in range(samples + 1)])
             / np.array([math.factorial(m) for m in draws], dtype=float))
    # (P, N+1): the product's coefficients of t^0..t^N
    series = np.zeros((problems, population + 1))
    series[:, 0] = 1.0
    for member in table[counts]:  # (P, N+1): this member's factor
        product = np.zeros_like(series)
        for m in draws:
            product[:, m:] += series[:, :population + 1 - m] * member[:, m:m + 1]
        series = product
    return series[:, population] * math.factorial(population) / float(population) ** population


def diversity_statistics(member_correct: np.ndarray, centre_correct: np.ndarray,
                         samples: int) -> dict:
    """Per problem (arrays (P,)), from success counts of N members (N, P) and of the centre (P,),
    S samples each:
    js_succ, predicted, gain  posterior means (posterior_diversity): the members' JS_succ, the
                      paper's formula N p_bar (1 - p_bar)^(N-1) js_succ, and the population's
                      Pass@N over one policy of success rate p_bar (what the formula predicts)
    ratio             (estimate, low, high): predicted / gain over problems, its 95% interval from
                      the posterior's draws (a bootstrap of the problems' posterior means covers
                      the truth about 58% of the time in simulation, the draws about 93%:
                      tests/test_diversity.py)
    js_succ_plugin    h(p_bar) - mean_i h(p_i) with p_i = c_i / S (biased up by about
                      (1 - 1/N) / 2S, and a zero count reads as a rate of 0: shown, not used)
    population_pass   Pass@N of the population, one sample per member: 1 - prod_i (1 - c_i / S),
                      unbiased as the members' samples are independent
    mean_policy_pass  Pass@N of one policy of success rate p_bar: 1 - mean_policy_fails, unbiased
    centre_pass       the unperturbed model's Pass@N, unbiased estimator (needs S >= N)
    gain_counts = population_pass - mean_policy_pass, the same gain from the counts alone;
    mean_policy_gain = mean_policy_pass - centre_pass, the part owed to the members' mean success;
    gain_vs_centre = their sum."""
    population, problems = member_correct.shape
    p = member_correct / samples  # (N, P)
    h = lambda q: es_grpo.binary_entropy(torch.as_tensor(q)).numpy()  # noqa: E731
    posterior = posterior_diversity(member_correct, samples)
    result = {"js_succ": posterior["js_succ"], "predicted": posterior["predicted"],
              "gain": posterior["gain"], "ratio": posterior["ratio"],
              "js_succ_plugin": h(p.mean(0)) - h(p).mean(0),
              "population_pass": 1 - (1 - p).prod(0),
              "mean_policy_pass": 1 - mean_policy_fails(member_correct, samples),
              "centre_pass": per_problem(centre_correct, samples, population)}
    return result | {"gain_counts": result["population_pass"] - result["mean_policy_pass"],
                     "mean_policy_gain": result["mean_policy_pass"] - result["centre_pass"],
                     "gain_vs_centre": result["population_pass"] - result["centre_pass"]}


@dataclasses.dataclass
class Population:  # the ES populations whose diversity diversity_analysis measures
    size: int  # N
    sigmas: list[float]  # one population per noise scale
    samples: int  # per problem, for each member and for the centre (at least N)


def diversity_analysis(model_name: str, population: Population, args: Args,
                       measure=measured) -> dict:
    """JS_succ, JS_pol, the predicted and the measured coverage gains of an ES population around the
    model, one row per sigma: each sigma's counts a piece of their own (measure:
    analyses.evaluation.measured), read with this module's estimators."""
    rows = {}
    for draw, sigma in enumerate(population.sigmas):
        one = dataclasses.replace(population, sigmas=[sigma])
        counts = measure(f"diversity-sigma{sigma:g}", [model_name], population_counts, model_name,
                         one, draw, args)
        stats = diversity_statistics(np.array(counts["member_correct"]),
                                     np.array(counts["centre_correct"]), counts["samples"])
        rows[f"sigma={sigma:g}"] = counts | diversity_row(stats)
    return rows


@versioned(1)
def population_counts(model_name: str, population: Population, draw: int, args: Args) -> dict:
    """population_diversity around the model at the population's (one) sigma, on the evaluation
    problems."""
    model, tokenizer = load(model_name, args)
    _, evaluation, _ = evaluation_sets(args, tokenizer)
    return population_diversity(context(args, model, tokenizer), evaluation, population.size,
                                population.sigmas[0], population.samples, draw)


def diversity_row(stats: dict) -> dict:
    """Means over problems, each with its interval (KEY_ci) and what the interval rests on
    (KEY_error: se, df, dropped, for saved_interval); ratio = predicted / measured gain."""
    data = {key: value[None] for key, value in stats.items() if key != "ratio"}  # (1 seed, P)
    statistics = {key: lambda m, key=key: m[key] for key in (
        "js_succ", "js_succ_plugin", "predicted", "gain", "gain_counts", "mean_policy_gain",
        "gain_vs_centre", "population_pass", "mean_policy_pass", "centre_pass")}
    if "ratio" not in stats:  # counts without the posterior's draws: a bootstrap over problems
        statistics["ratio"] = lambda m: m["predicted"] / m["gain"]
    row = {}
    for key, statistic in statistics.items():
        ci = interval(statistic, data)
        row[key], row[key + "_ci"], row[key + "_error"] = (
            ci[0], [ci[1], ci[2]], [ci.se, ci.df, ci.dropped])
    if "ratio" in stats:  # the posterior's interval, its se the half-width's normal equivalent
        estimate, low, high = stats["ratio"]
        row["ratio"], row["ratio_ci"], row["ratio_error"] = (
            estimate, [low, high], [(high - low) / 3.92, 0, 0.0])
    return row
