"""A torchrun target for tests/test_scale.py: scale/train.py with a fault injected into rank 1 after its
update FAULT_AT of the stage STEP (es, or grpo), through the `ranks` hook: FAULT = raise, die, hang or
diverge (none: no fault). Each rank prints how many FSDP modules are still alive when the process group is
destroyed (gloo may abort the exit if any are)."""
import gc
import os
import signal
import sys
import time
from pathlib import Path

import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scale"))
from distributed import Torchrun  # noqa: E402
from train import main  # noqa: E402

destroy = dist.destroy_process_group


def reporting_destroy(*args, **kwargs):
    alive = sum(isinstance(o, FSDPModule) for o in gc.get_objects())
    line = f"rank {os.environ['RANK']}: {alive} FSDP modules alive when the process group is destroyed\n"
    os.write(1, line.encode())  # one write: the ranks share the pipe, and unbuffered prints could interleave
    destroy(*args, **kwargs)


dist.destroy_process_group = reporting_destroy


class FaultyRank1(Torchrun):
    updates_seen = 0

    def after_update(self, params, stage, update, last):
        if self.rank == 1 and stage == os.environ.get("STEP", "es"):
            self.updates_seen += 1
            fault = os.environ["FAULT"] if self.updates_seen == int(os.environ["FAULT_AT"]) else ""
            if fault == "raise":
                raise RuntimeError("injected fault")
            if fault == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            if fault == "hang":
                time.sleep(3600)
            if fault == "diverge":
                params[0].data.add_(1e-3)
        super().after_update(params, stage, update, last)


main(sys.argv[1:], FaultyRank1)
