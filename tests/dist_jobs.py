"""A torchrun target for tests/test_scale.py: one or more scale/train.py runs in one launch. Each
launch starts three interpreters that import torch and transformers (about 8 s on 2 cores), so the
runs that can share one do: the process group is joined by the first run and destroyed by the last.

JOBS is a JSON list of jobs, each {"argv": [...]} plus, optionally:
- "fault": raise, die or diverge, injected into rank 1 after its update "at" of the stage "step" (es
  or grpo) through the `ranks` hook; a run stopped with SystemExit (diverging weights) is reported
  on stderr and the next job starts;
- "engine": "start" or "first_use": es_grpo.run with a stand-in vLLM engine whose creation is a
  collective, as vLLM's is with external_launcher. "start" lets Torchrun start it on every rank
  after joining the process group (what scale/train.py does); "first_use" leaves it to the first
  generation, which strands the ranks when one of them has nothing to generate yet. ENGINE_TIMEOUT:
  its --dist-timeout, which reaches the engine's own process group (the default group's timeout is
  600 s).
Rank 0 prints `job N: begins` before each job. Each rank says when an engine is shut down, when the
process group is destroyed (with the FSDP modules still alive then: gloo may abort the exit if any
are) and, after an engine job, how many engines it created."""
import gc
import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import es_grpo  # noqa: E402
from scale.config import evaluation_sets, parse_args  # noqa: E402
from scale.distributed import Torchrun  # noqa: E402
from scale.grpo import grpo_step  # noqa: E402
from scale.es import PopulationScorer  # noqa: E402
from conftest import FakeEngine  # noqa: E402
from scale.train import main  # noqa: E402
from scale.vllm_rollout import EngineSettings, VLLMRollout  # noqa: E402

rank, destroy, job = os.environ["RANK"], dist.destroy_process_group, {}


# one write per line: the ranks share the pipe, and prints could interleave
def say(text: str, stream: int = 1):
    os.write(stream, f"rank {rank}: {text}\n".encode())


def reporting_destroy(*args, **kwargs):
    alive = sum(isinstance(o, FSDPModule) for o in gc.get_objects())
    say(f"process group destroyed, {alive} FSDP modules alive")
    destroy(*args, **kwargs)


class FaultyRank1(Torchrun):
    updates_seen = 0

    def after_update(self, params, stage, update, last):
        if self.rank == 1 and stage == job.get("step", "es"):
            self.updates_seen += 1
            fault = job.get("fault", "") if self.updates_seen == job.get("at", 0) else ""
            if fault == "raise":
                raise RuntimeError("injected fault")
            if fault == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            if fault == "diverge":
                params[0].data.add_(1e-3)
        super().after_update(params, stage, update, last)


def engine_run(argv: list[str], at: str):
    """As vLLM 0.33.0 with external_launcher: creating the engine joins a process group of its own,
    with the timeout LLM(...) is given (EngineSettings: --dist-timeout, here ENGINE_TIMEOUT), and
    its shutdown destroys the default process group too (EngineCore.shutdown ->
    cleanup_dist_env_and_memory)."""
    # ranks late under load: not a fault
    created, timeout = [], int(os.environ.get("ENGINE_TIMEOUT", "60"))
    settings = EngineSettings("", "float32", 0.5, 64, 8192, 256, 0, timeout).arguments()

    def make_engine():
        seconds = timedelta(seconds=settings["cpu_distributed_timeout_seconds"])
        dist.all_reduce(torch.ones(1), group=dist.new_group(backend="gloo", timeout=seconds))
        created.append(1)
        return FakeEngine(*es_grpo.load_model(""))

    def close_engine(engine):
        say("engine shut down")
        dist.destroy_process_group()

    backend = VLLMRollout(make_engine, SimpleNamespace, close_engine)
    # the engine's timeout decides
    ranks = Torchrun(timeout_s=600, engine=backend if at == "start" else None)
    es_grpo.run(parse_args(argv), generate=backend, ranks=ranks, es_weights=backend.es_weights,
                score_members=PopulationScorer(reuse=False), grpo_step=grpo_step,
                problems=evaluation_sets)
    say(f"{len(created)} engine created")


jobs = json.loads(os.environ["JOBS"])
for number, job in enumerate(jobs):
    dist.destroy_process_group = (reporting_destroy if number == len(jobs) - 1
                                  else lambda *args, **kwargs: None)
    if rank == "0":
        os.write(1, f"job {number}: begins\n".encode())
    try:
        if job.get("engine"):
            engine_run(job["argv"], job["engine"])
        else:
            main(job["argv"], FaultyRank1)
    except SystemExit as stop:
        if len(jobs) == 1 or not isinstance(stop.code, str):
            raise
        say(f"job {number}: {stop.code}", stream=2)
