"""A torchrun target for tests/test_scale.py: es_grpo.run through scale/'s hooks with a stand-in vLLM engine
whose creation is a collective, as vLLM's is with external_launcher. ENGINE_AT=start lets Torchrun start it
on every rank after joining the process group (what scale/train.py does); ENGINE_AT=first_use leaves it to
the first generation, which strands the ranks when one of them has nothing to generate yet. Each rank says
when the engine is shut down and when the process group is destroyed."""
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scale"), str(ROOT / "tests")]
import es_grpo  # noqa: E402
from distributed import Torchrun  # noqa: E402
from test_scale import FakeEngine  # noqa: E402
from vllm_rollout import VLLMRollout  # noqa: E402

created, rank = [], os.environ["RANK"]
destroy = dist.destroy_process_group


def say(text: str):  # one write per line: two ranks share the pipe, and unbuffered prints could interleave
    os.write(1, f"rank {rank}: {text}\n".encode())


def reporting_destroy(*args, **kwargs):
    say("process group destroyed")
    destroy(*args, **kwargs)


dist.destroy_process_group = reporting_destroy


def make_engine():
    dist.all_reduce(torch.ones(1))  # every rank takes part, or the others wait
    created.append(1)
    return FakeEngine(*es_grpo.load_model(""))


backend = VLLMRollout(make_engine, SimpleNamespace, lambda engine: say("engine shut down"))
ranks = Torchrun(timeout_s=int(os.environ.get("TIMEOUT", "10")),
                 engine=backend if os.environ["ENGINE_AT"] == "start" else None)
es_grpo.run(es_grpo.parse_args(sys.argv[1:]), backend, ranks)
say(f"{len(created)} engine created")
