"""How fast ES's eps is made (noise): es_grpo.noise's per-tensor draws on 1 thread and on every
core (scale/es.py's draw_all), and slices of the shared noise table, for the real model's
tensors where it is converted (python -m scale.real_model), else the tiny model's."""
from __future__ import annotations

import statistics
from pathlib import Path

import es_grpo
from scale.assembly import hooks
from scale.bench.harness import timed
from scale.bench.real import REAL_FOLDER
from scale.config import Args
from scale.es import draw_all, threads


def bench_noise(repeats: int) -> list[str]:
    folder = REAL_FOLDER if (Path(REAL_FOLDER) / "config.json").is_file() else ""
    params = list(es_grpo.load_model(folder)[0].parameters())
    values = sum(p.numel() for p in params)
    table = hooks(Args(es_noise="table"))["es_update"].source  # a run's table
    made = timed(lambda: table.prepare(params))
    ways = {"es_grpo.noise, 1 thread": lambda seed: draw_all(es_grpo.noise, seed, params, 1),
            f"es_grpo.noise, {threads()} threads": lambda seed: draw_all(es_grpo.noise, seed,
                                                                         params),
            f"table slices, {threads()} threads": lambda seed: draw_all(table, seed, params)}
    lines = [f"| one member's eps, {values / 1e6:.1f}M values ({folder or 'tiny model'}) "
             "| seconds | M values/s |", "|---|---|---|"]
    for name, way in ways.items():
        seconds = statistics.median(timed(lambda way=way, seed=seed: way(seed))
                                    for seed in range(1, repeats + 2))
        lines.append(f"| {name} | {seconds:.3f} | {values / seconds / 1e6:.0f} |")
    lines.append(f"| making the table once ({len(table.table) / 1e6:.0f}M values) | {made:.3f} | "
                 f"{len(table.table) / made / 1e6:.0f} |")
    return lines
