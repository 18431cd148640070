"""A torchrun target for tests/test_scale.py: es_grpo.run with a fault injected into rank 1 in ES update
FAULT_AT (FAULT = raise, die, hang or diverge; none), or into its GRPO update if STEP=grpo. Each rank prints
how many FSDP modules are still alive when the process group is destroyed (gloo may abort the exit if any are)."""
import gc
import os
import signal
import sys
import time
from pathlib import Path

import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import es_grpo  # noqa: E402

destroy = dist.destroy_process_group


def reporting_destroy(*args, **kwargs):
    alive = sum(isinstance(o, FSDPModule) for o in gc.get_objects())
    print(f"rank {es_grpo.RANK}: {alive} FSDP modules alive when the process group is destroyed", flush=True)
    destroy(*args, **kwargs)


dist.destroy_process_group = reporting_destroy

if es_grpo.RANK == 1:
    step = os.environ.get("STEP", "es") + "_step"
    honest_step, calls = getattr(es_grpo, step), []

    def faulty_step(model, *args, **kwargs):
        stats = honest_step(model, *args, **kwargs)
        calls.append(1)
        fault = os.environ["FAULT"] if len(calls) == int(os.environ["FAULT_AT"]) else ""
        if fault == "raise":
            raise RuntimeError("injected fault")
        if fault == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "hang":
            time.sleep(3600)
        if fault == "diverge":
            next(model.parameters()).data.add_(1e-3)
        return stats

    setattr(es_grpo, step, faulty_step)
es_grpo.run(es_grpo.parse_args(sys.argv[1:]))
