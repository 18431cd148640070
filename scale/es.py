"""ES at scale: one population scorer and one update (es_grpo.run's score_members and es_update).

es_grpo.py scores the members one at a time, each set in the model's weights, and draws a member's
eps twice: to perturb it (set_weights) and again to move the master (es_update). PopulationScorer
takes one of four paths and says which (`path`; a run's config.json records those it took):

- batched: members decoded together on stacked weights (scale/population.py), each eps kept;
- summed: members one at a time, each eps drawn once on every core and summed, as soon as its
  reward is known, into A = sum_n r_n eps_n and B = sum_n eps_n, so that an update whose weights
  are affine in the rewards (z = a r + b: the z-score, centred rewards) is a A + b B;
- kept: members one at a time, each eps kept for the update where the population's noise fits
  in memory (any fitness shaping: centred ranks are not affine in the rewards, nor is --es-null);
- redrawn: es_grpo.py's way, the update draws each eps again (several processes, an engine's
  members, --es-noise redrawn, or no room to keep them).

Update moves the master from what the scorer left: a A + b B, or es_update's arithmetic over the
kept eps, drawing those it lacks. The noise is a source with es_grpo.noise's contract,
source(seed, index, like, out=None) -> eps, and prepare(params) before the first: PER_TENSOR
(es_grpo.noise) or a NoiseTable. A variant is a source or a fitness shaping (Args.fitness), not a
new scorer; a source of low-rank factors would add a method beside __call__ for the stacked path.

--es-noise table is a departure (docs: scale/README.md, "Departures"): Salimans et al. (2017) share
one table of Gaussian noise and give each member an offset into it, so that a perturbation is a
slice, not a draw. Here each (member, tensor) takes its own offset; -seed gives the negated slice.
"""
from __future__ import annotations

import dataclasses
import os
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

import es_grpo
from es_grpo import Context, ESState, new_scores, prompt_text, score_member, score_members
from scale.config import AFFINE
from scale.population import decode_as_is, members_together, population_forward

TABLE_VALUES = 2**26  # at least: the table is also at least 4 x the largest tensor (see NoiseTable)


def threads() -> int:
    return max(1, min(torch.get_num_threads(), os.cpu_count() or 1))


@contextmanager
def timing(seconds: Counter, phase: str):
    """Adds the block's wall seconds to seconds[phase] (what scale.bench reads of an update)."""
    tick = time.perf_counter()
    yield
    seconds[phase] += time.perf_counter() - tick


class PerTensor:
    """es_grpo.noise as a source: each tensor's eps from its own seeded generator."""

    def __call__(self, seed: int, index: int, like: torch.Tensor, out=None) -> torch.Tensor:
        return es_grpo.noise(seed, index, like, out)

    def prepare(self, params: list[torch.Tensor]):
        pass


PER_TENSOR = PerTensor()


class NoiseTable:
    """One table of standard normal float32 values, drawn once (seeded) on every core, shared by
    every member: eps of tensor `index` for member `seed` is the slice at an offset drawn from
    (|seed|, index), negated for seed < 0. Its size: TABLE_VALUES or 4 x the largest tensor,
    whichever is larger, so that a tensor's slice has at least 3 x its size of offsets to start
    from; made by prepare (the model's tensors unknown until then)."""

    def __init__(self, seed: int = 0, values: int = TABLE_VALUES):
        self.seed, self.values, self.table = seed, values, None

    def prepare(self, params: list[torch.Tensor]):
        if self.table is not None:
            return
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
            raise RuntimeError("NoiseTable: prepare(params) before the first eps")
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


def on_threads(work, count: int, workers: int = 0):
    """work(i) for i < count, on `workers` threads (0: one a core)."""
    with ThreadPoolExecutor(workers or threads()) as pool:
        list(pool.map(work, range(count)))


@dataclasses.dataclass
class Sums:
    """What the summed path leaves for the update: the rewards it summed with, and
    A = sum_n r_n eps_n and B = sum_n eps_n per tensor (float32, on the master's device)."""
    rewards: torch.Tensor  # (N,) as es_step reads them: each member's mean reward, float32
    weighted: list[torch.Tensor]  # A
    plain: list[torch.Tensor]  # B


def shaping(args) -> str:
    """The run's fitness shaping: scale's --es-shaping, or es_grpo.py's --es-zscore."""
    return getattr(args, "es_shaping", "zscore" if args.es_zscore else "centered")


def room(device: torch.device) -> float:
    """Bytes the kept noise may take: half the free GPU, or a quarter of the available RAM."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0] / 2
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 4
    except (ValueError, OSError):
        return 2**30


class PopulationScorer:
    """es_grpo.run's score_members hook, with es_grpo.score_members's contract: (run, state,
    problems, seeds, seed) -> (scores, drawn): every member's reward, tokens and entropy sum (N,)
    and problems solved (N, P), summed over the processes; drawn: what Update moves the master by
    (Sums, or eps by (seed, tensor index)). batched: on, off or auto (scale/population.py's
    members_together); reuse: False draws every eps again in the update (--es-noise redrawn)."""

    def __init__(self, source=PER_TENSOR, batched: str = "auto", reuse: bool = True,
                 workers: int = 0):
        self.source, self.batched, self.reuse, self.workers = source, batched, reuse, workers
        self.path, self.seconds = None, Counter()  # the last path taken; seconds by phase
        # eps and sigma * eps, the model's size each, drawn into and computed in again by every
        # member not kept: fresh memory the size of a model is slow to fill
        self.eps = self.scaled = None

    def __call__(self, run: Context, state: ESState, problems: list[dict], seeds: list[int],
                 seed: int) -> tuple[dict, dict | Sums]:
        self.source.prepare(state.members)
        mine = run.ranks.share(range(len(seeds)))
        together = members_together(run, state, len(problems), len(mine), self.batched)
        if together:
            try:
                self.path = "batched"
                return self.decoded_together(run, state, problems, seeds, seed, together)
            except NotImplementedError:  # a layer it cannot batch: one member at a time instead
                pass
        self.path = self.one_at_a_time_path(run, state, len(seeds))
        if run.ranks.world_size > 1 or run.es_weights is not None:  # es_grpo.py's own way
            if self.source is not PER_TENSOR:
                raise ValueError("a noise table's members are scored on one process, HF rollout")
            return redrawn(run, state, problems, seeds, seed)
        return self.one_by_one(run, state, problems, seeds, seed)

    def one_at_a_time_path(self, run: Context, state: ESState, members: int) -> str:
        """summed, kept or redrawn (module docstring), for members set in the weights in turn."""
        if not self.reuse or run.ranks.world_size > 1 or run.es_weights is not None:
            return "redrawn"
        if shaping(run.args) in AFFINE and not run.args.es_null:
            return "summed"
        size = members * sum(p.numel() * 4 for p in state.members)
        return "kept" if size <= room(state.members[0].device) else "redrawn"

    def decoded_together(self, run: Context, state: ESState, problems: list[dict],
                         seeds: list[int], seed: int, together: int) -> tuple[dict, dict]:
        P, mine, drawn = len(problems), run.ranks.share(range(len(seeds))), {}
        scores = new_scores(len(seeds), P)
        prompts = [prompt_text(p, run.tokenizer) for p in problems]
        sampling = run.args.sampling("es", seed)
        for group in [mine[i:i + together] for i in range(0, len(mine), together)]:
            with population_forward(run.model, state, [seeds[m] for m in group], run.args.es_sigma,
                                    drawn, self.source):
                roll = decode_as_is(run.generate)(
                    run.model, run.tokenizer, prompts * len(group),
                    dataclasses.replace(sampling, batch_size=len(group) * P))
            for j, member in enumerate(group):
                score_member(run, scores, member, problems, roll.rows(slice(j * P, (j + 1) * P)))
        return run.ranks.sum(scores), drawn  # every process has every member's scores now

    def one_by_one(self, run: Context, state: ESState, problems: list[dict], seeds: list[int],
                   seed: int) -> tuple[dict, dict | Sums]:
        """Members set in the weights in turn on one process, each eps drawn on every core from the
        source, and summed, kept, or let go (redrawn: the update draws it again)."""
        scores, params, summed = new_scores(len(seeds), len(problems)), state.members, None
        prompts = [prompt_text(p, run.tokenizer) for p in problems]
        if self.path == "summed":
            summed = Sums(None, *([torch.zeros_like(m) for m in state.master] for _ in range(2)))
        keep = self.path == "kept"
        if not keep:
            self.buffers(params)
        kept, eps, into = {}, None, None if keep else self.eps
        for member, member_seed in enumerate(seeds):
            mirror = eps is not None and member_seed == -seeds[member - 1]  # antithetic: -eps
            with timing(self.seconds, "noise"):
                if mirror:  # a kept eps stays its member's
                    eps = [e.neg() if keep else e.neg_() for e in eps]
                else:
                    eps = draw_all(self.source, member_seed, params, self.workers, into)
                perturb(params, state.master, eps, run.args.es_sigma, self.workers, self.scaled)
            with timing(self.seconds, "decode"):
                roll = run.generate(run.model, run.tokenizer, prompts,
                                    run.args.sampling("es", seed))
            with timing(self.seconds, "scoring"):
                score_member(run, scores, member, problems, roll)
            with timing(self.seconds, "sums"):  # what the update is made of
                if summed is not None:
                    accumulate(summed, eps, float(scores["reward"][member]), self.workers)
                elif keep:
                    kept.update(((member_seed, i), e) for i, e in enumerate(eps))
        es_grpo.set_weights(params, state.master)
        if summed is None:
            return scores, kept
        summed.rewards = scores["reward"].float()
        return scores, summed

    def buffers(self, params: list[torch.Tensor]):
        """self.eps and self.scaled: float32 tensors like params, made at the first update."""
        where = lambda tensors: [(t.shape, t.device) for t in tensors]
        if self.eps is None or where(self.eps) != where(params):
            self.eps, self.scaled = ([torch.empty(p.shape, dtype=torch.float32, device=p.device)
                                      for p in params] for _ in range(2))


def redrawn(run: Context, state: ESState, problems: list[dict], seeds: list[int],
            seed: int) -> tuple[dict, dict]:
    """es_grpo.score_members on this process's share of the members, the scores summed over
    processes; nothing kept (the update draws each eps again)."""
    mine = run.ranks.share(range(len(seeds)))
    part, _ = score_members(run, state, problems, [seeds[member] for member in mine], seed)
    scores = new_scores(len(seeds), len(problems))
    for name, values in part.items():
        scores[name][mine] = values
    return run.ranks.sum(scores), {}  # every process has every member's scores now


def perturb(params: list[torch.Tensor], master: list[torch.Tensor], eps: list[torch.Tensor],
            sigma: float, workers: int = 0, scaled: list[torch.Tensor] | None = None):
    """params <- master + sigma * eps, as es_grpo.set_weights computes it, each tensor on a thread;
    scaled: where sigma * eps is computed (None: new tensors)."""
    def set_one(i: int):
        with torch.no_grad():
            device = params[i].device
            moved = torch.mul(eps[i].to(device), sigma, out=None if scaled is None else scaled[i])
            params[i].copy_(moved.add_(master[i].to(device)))
    on_threads(set_one, len(params), workers)


def accumulate(sums: Sums, eps: list[torch.Tensor], reward: float, workers: int = 0):
    """A += r eps and B += eps, each tensor on a thread."""
    def add(i: int):
        e = eps[i].to(sums.weighted[i].device)
        sums.weighted[i].add_(e, alpha=reward)
        sums.plain[i].add_(e)
    on_threads(add, len(eps), workers)


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


class Update:
    """es_grpo.run's es_update hook (es_grpo.es_update's contract): master += alpha / N * sum_n z_n
    eps_n, as a A + b B from PopulationScorer's Sums where z = a r + b; otherwise es_update's
    arithmetic over the eps it kept, drawing the others again from the same source."""

    def __init__(self, source=PER_TENSOR):
        self.source, self.seconds = source, Counter()
        self.step_norm: float | None = None  # the last update's ||alpha / N sum_n z_n eps_n||

    @torch.no_grad()
    def __call__(self, params, master, seeds: list[int], z: torch.Tensor, alpha: float, drawn):
        with timing(self.seconds, "update"):
            summed = isinstance(drawn, Sums)
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
