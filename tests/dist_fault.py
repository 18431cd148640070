"""A torchrun target for tests/test_scale.py: es_grpo.run with a fault injected into rank 1 in ES update
FAULT_AT (FAULT = raise, die, hang or diverge), or into its GRPO update if STEP=grpo."""
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import es_grpo  # noqa: E402

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
