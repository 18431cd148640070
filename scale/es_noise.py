"""ES's noise at real size: each member's eps drawn once and on every core, or read from a table.

es_grpo.py draws a member's eps twice: to perturb the member (set_weights), and again to move the
master (es_update). Here a member scored one at a time has its eps drawn once, tensor by tensor on a
pool of threads (each tensor's generator is its own: es_grpo.noise), and summed as soon as the
member's reward is known into two float32 accumulators the size of the model,

    A = sum_n r_n eps_n,    B = sum_n eps_n,

so that any update whose weights are affine in the rewards, z_n = a r_n + b (the z-score, the
centred raw rewards), is a A + b B, without drawing any eps again. Antithetic pairs (s, -s) draw
once per pair. Where the weights are not affine in the rewards (--es-null shuffles them across
members), the update draws again as es_grpo.py does.

--es-noise table is a departure (docs: scale/README.md, "Departures"): Salimans et al. (2017) share
one table of Gaussian noise and give each member an offset into it, so that a perturbation is a
slice, not a draw. Here each (member, tensor) takes its own offset; -seed gives the negated slice.
"""
from __future__ import annotations

import os
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import torch

import es_grpo
from es_grpo import Context, ESState, new_scores, noise, prompt_text, score_member

NOISES = ("once", "redrawn", "table")
TABLE_VALUES = 2**26  # at least: the table is also at least 4 x the largest tensor (see NoiseTable)


def threads() -> int:
    return max(1, min(torch.get_num_threads(), os.cpu_count() or 1))


@contextmanager
def timing(seconds: Counter, phase: str):
    """Adds the block's wall seconds to seconds[phase] (what scale.bench reads of an update)."""
    tick = time.perf_counter()
    yield
    seconds[phase] += time.perf_counter() - tick


class NoiseTable:
    """One table of standard normal float32 values, drawn once (seeded) on every core, shared by
    every member: eps of tensor `index` for member `seed` is the slice at an offset drawn from
    (|seed|, index), negated for seed < 0. Its size: TABLE_VALUES or 4 x the largest tensor,
    whichever is larger, so that a tensor's slice has at least 3 x its size of offsets to start
    from; made at the first eps asked for (the model's tensors unknown until then)."""

    def __init__(self, seed: int = 0, values: int = TABLE_VALUES):
        self.seed, self.values, self.table = seed, values, None

    def make(self, params: list[torch.Tensor]):
        size = max(self.values, 4 * max(p.numel() for p in params))
        table, chunk = torch.empty(size, dtype=torch.float32), 2**22

        def fill(start: int):
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + start)
            part = table[start:start + chunk]
            part.copy_(torch.randn(part.shape, generator=generator))
        with ThreadPoolExecutor(threads()) as pool:
            list(pool.map(fill, range(0, size, chunk)))
        self.table = table

    def offset(self, seed: int, index: int, count: int) -> int:
        return random.Random(abs(seed) * 1_000_003 + index).randrange(len(self.table) - count + 1)

    def __call__(self, seed: int, index: int, like: torch.Tensor,
                 out: torch.Tensor | None = None) -> torch.Tensor:
        """es_grpo.noise's contract: eps of like's shape, float32, on like's device (into out, if
        given)."""
        if self.table is None or like.numel() * 4 > len(self.table):
            raise RuntimeError("NoiseTable: make(params) before the first eps")
        start = self.offset(seed, index, like.numel())
        part = self.table[start:start + like.numel()].view(like.shape)
        eps = part.to(like.device, copy=True) if out is None else out.copy_(part)
        return eps.neg_() if seed < 0 else eps


def draw_all(source, seed: int, params: list[torch.Tensor], workers: int = 0,
             into: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """Every tensor's eps for member `seed`, each from source(seed, index, param), on a pool of
    `workers` threads (0: one a core; torch's generators release the GIL, one generator is one
    core); into: float32 tensors like params to draw into (None: new ones)."""
    def draw(i: int) -> torch.Tensor:
        return source(seed, i, params[i], out=None if into is None else into[i])
    with ThreadPoolExecutor(workers or threads()) as pool:
        return list(pool.map(draw, range(len(params))))


@dataclass
class Accumulated:
    """What a drawn-once population leaves for the update: the rewards it summed with, and
    A = sum_n r_n eps_n and B = sum_n eps_n per tensor (float32, on the master's device)."""
    rewards: torch.Tensor  # (N,) as es_step reads them: each member's mean reward, float32
    weighted: list[torch.Tensor]  # A
    plain: list[torch.Tensor]  # B


class DrawnOnce:
    """es_grpo.run's score_members hook, member by member (es_grpo.score_members's contract), each
    member's eps drawn once (source: es_grpo.noise, or a NoiseTable), on every core, and summed into
    Accumulated for OnceUpdate. One process: the accumulators are not summed over ranks."""

    def __init__(self, source=noise, workers: int = 0):
        """workers: threads that draw and sum eps (0: one a core); seconds: by phase, summed."""
        self.source, self.workers, self.seconds = source, workers, Counter()
        # eps and sigma * eps, the model's size each, drawn into and computed in again by every
        # member: fresh memory the size of a model is slow to fill (report/NOTES.md, "Real-size
        # speed")
        self.eps = self.scaled = None

    def __call__(self, run: Context, state: ESState, problems: list[dict], seeds: list[int],
                 seed: int) -> tuple[dict, Accumulated]:
        scores, params = new_scores(len(seeds), len(problems)), state.members
        if isinstance(self.source, NoiseTable) and self.source.table is None:
            self.source.make(params)
        prompts = [prompt_text(p, run.tokenizer) for p in problems]
        weighted = [torch.zeros_like(m) for m in state.master]
        plain = [torch.zeros_like(m) for m in state.master]
        self.buffers(params)
        eps = None
        for member, member_seed in enumerate(seeds):
            mirror = eps is not None and member_seed == -seeds[member - 1]  # antithetic: -eps
            with timing(self.seconds, "noise"):
                eps = [e.neg_() for e in eps] if mirror else draw_all(
                    self.source, member_seed, params, self.workers, self.eps)
                perturb(params, state.master, eps, run.args.es_sigma, self.workers, self.scaled)
            with timing(self.seconds, "decode"):
                roll = run.generate(run.model, run.tokenizer, prompts,
                                    run.args.sampling("es", seed))
            with timing(self.seconds, "scoring"):
                score_member(run, scores, member, problems, roll)
            with timing(self.seconds, "sums"):  # what the update is made of
                reward = float(scores["reward"][member].float())
                accumulate(weighted, plain, eps, reward, self.workers)
        es_grpo.set_weights(params, state.master)
        return scores, Accumulated(scores["reward"].float(), weighted, plain)

    def buffers(self, params: list[torch.Tensor]):
        """self.eps and self.scaled: float32 tensors like params, made at the first update."""
        where = lambda tensors: [(t.shape, t.device) for t in tensors]
        if self.eps is None or where(self.eps) != where(params):
            self.eps, self.scaled = ([torch.empty(p.shape, dtype=torch.float32, device=p.device)
                                      for p in params] for _ in range(2))


def perturb(params: list[torch.Tensor], master: list[torch.Tensor], eps: list[torch.Tensor],
            sigma: float, workers: int = 0, scaled: list[torch.Tensor] | None = None):
    """params <- master + sigma * eps, as es_grpo.set_weights computes it, each tensor on one of
    `workers` threads (0: one a core); scaled: where sigma * eps is computed (None: new
    tensors)."""
    def set_one(i: int):
        with torch.no_grad():
            device = params[i].device
            moved = torch.mul(eps[i].to(device), sigma, out=None if scaled is None else scaled[i])
            params[i].copy_(moved.add_(master[i].to(device)))
    with ThreadPoolExecutor(workers or threads()) as pool:
        list(pool.map(set_one, range(len(params))))


def accumulate(weighted, plain, eps, reward: float, workers: int = 0):
    """A += r eps and B += eps, each tensor on one of `workers` threads (0: one a core)."""
    def add(i: int):
        e = eps[i].to(weighted[i].device)
        weighted[i].add_(e, alpha=reward)
        plain[i].add_(e)
    with ThreadPoolExecutor(workers or threads()) as pool:
        list(pool.map(add, range(len(eps))))


def affine(z: torch.Tensor, rewards: torch.Tensor) -> tuple[float, float] | None:
    """(a, b) with z = a * rewards + b for every member, to float rounding, or None."""
    z, rewards = z.double(), rewards.double()
    if rewards.max() == rewards.min():
        return (0.0, float(z[0])) if (z == z[0]).all() else None
    i, j = int(rewards.argmin()), int(rewards.argmax())
    a = float((z[j] - z[i]) / (rewards[j] - rewards[i]))
    b = float(z[i] - a * rewards[i])
    close = (a * rewards + b - z).abs().max() <= 1e-5 * max(1.0, float(z.abs().max()))
    return (a, b) if close else None


class OnceUpdate:
    """es_grpo.run's es_update hook (es_grpo.es_update's contract): master += alpha / N * sum_n z_n
    eps_n, computed as a A + b B from DrawnOnce's sums where z = a r + b; otherwise (eps drawn in a
    batch, or z not affine in the rewards: --es-null) from eps drawn again by the same source."""

    def __init__(self, source=noise):
        self.source, self.seconds = source, Counter()
        self.step_norm: float | None = None  # the last update's ||alpha / N sum_n z_n eps_n||

    @torch.no_grad()
    def __call__(self, params, master, seeds: list[int], z: torch.Tensor, alpha: float, drawn):
        with timing(self.seconds, "update"):
            return self.update(params, master, seeds, z, alpha, drawn)

    def update(self, params, master, seeds: list[int], z: torch.Tensor, alpha: float, drawn):
        summed = isinstance(drawn, Accumulated)
        coefficients = affine(z, drawn.rewards) if summed else None
        if coefficients is None:
            return self.redrawn(params, master, seeds, z, alpha, None if summed else drawn)
        a, b = coefficients
        norms = []
        for base, weighted, plain in zip(master, drawn.weighted, drawn.plain):
            step = weighted.mul_(a).add_(plain, alpha=b)
            base.add_(step.to(base.device), alpha=alpha / len(seeds))
            norms.append(torch.linalg.vector_norm(step))
        self.measured(norms, alpha / len(seeds))
        es_grpo.set_weights(params, master)

    def measured(self, norms: list[torch.Tensor], scale: float):
        """The step's norm from its tensors' (a reduction each, no copy), read once all are queued
        (on a GPU the first read waits for them all)."""
        self.step_norm = scale * sum(norm.item() ** 2 for norm in norms) ** 0.5

    def redrawn(self, params, master, seeds, z, alpha, drawn):
        """es_grpo.es_update's arithmetic, in its order (with es_grpo.noise, bit for bit), from
        this source, measuring the step's norm."""
        norms = []
        for index, (param, base) in enumerate(zip(params, master)):
            step = torch.zeros(param.shape, dtype=torch.float32, device=param.device)
            for seed, weight in zip(seeds, z.tolist()):
                if weight:
                    eps = (drawn or {}).pop((seed, index), None)
                    step.add_(self.source(seed, index, param) if eps is None else eps,
                              alpha=weight)
            base.add_(step.to(base.device), alpha=alpha / len(seeds))
            norms.append(torch.linalg.vector_norm(step))
        self.measured(norms, alpha / len(seeds))
        es_grpo.set_weights(params, master)
