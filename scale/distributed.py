"""What torchrun adds to es_grpo.run: the machinery behind its `ranks` hook (es_grpo.OneProcess).

Under torchrun every rank runs -m scale.train. ES ranks deal out the population and exchange only
scores; GRPO ranks take contiguous shares of the prompts, and DDP (or FSDP2 with --grpo-fsdp)
averages the gradients. Every rank then holds the same weights, and after_update proves it. A rank
that fails stops the others within --dist-timeout seconds. On one process (WORLD_SIZE=1) each method
does what es_grpo.OneProcess does, except that checkpoints keep GRPO's state keyed by parameter
name.
"""
from __future__ import annotations

import copy
import gc
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.nn.parallel import DistributedDataParallel

import es_grpo

# checkpoints: whole tensors, on the CPU
WHOLE_STATE = StateDictOptions(full_state_dict=True, cpu_offload=True)


class Torchrun(es_grpo.OneProcess):
    """The ranks torchrun started (RANK, WORLD_SIZE, LOCAL_RANK), joined in one process group."""

    def __init__(self, grpo_fsdp: bool = False, check_every: int = 1, timeout_s: int = 600,
                 engine=None, model_device: str | None = None):
        """engine: a rollout backend with start() (vllm_rollout.VLLMRollout), started on every rank
        at once. model_device: where the trainer's model lives if not on this rank's GPU ("cpu" when
        ES runs inside the engine and no GRPO stage needs the model on the GPU)."""
        self.rank, self.world_size, self.local_rank = (
            int(os.environ.get(name, default))
            for name, default in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)))
        self.is_main = self.rank == 0
        self.grpo_fsdp, self.check_every, self.timeout_s = grpo_fsdp, check_every, timeout_s
        self.engine, self.model_device = engine, model_device

    def start(self, device: str) -> str:
        """Join torchrun's process group (nccl on GPUs, gloo on CPUs), then start the rollout engine
        on every rank together; returns this rank's device."""
        if self.world_size > 1 and device.startswith("cuda"):
            device = f"cuda:{self.local_rank}"
            torch.cuda.set_device(device)
        if self.world_size > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if device.startswith("cuda") else "gloo",
                                    timeout=timedelta(seconds=self.timeout_s))
        if self.engine is not None:
            self.engine.start()
        return self.model_device or device

    def stop(self):
        """The rollout engine last of all: vLLM's shutdown destroys its own groups and then the
        default process group (vLLM 0.33.0 v1/engine/core.py:834-850), so nothing collective may
        follow it; the group is destroyed here only where the engine left it (no engine, or the
        stand-in's)."""
        # FSDP modules sit in reference cycles; gloo can abort the exit if they outlive the group
        gc.collect()
        if self.engine is not None:
            self.engine.shutdown()
        if dist.is_initialized():
            dist.destroy_process_group()

    def barrier(self):
        if self.world_size > 1:
            dist.barrier()

    def log(self, text: str):
        if self.is_main:
            es_grpo.log(text)

    def sum(self, values):
        """A tensor, a number or a dict of them, summed over the ranks in one collective; types are
        kept."""
        if self.world_size == 1:
            return values
        named = values if isinstance(values, dict) else {"": values}
        flat = [torch.as_tensor(v, dtype=torch.float64).flatten().cpu() for v in named.values()]
        total = torch.cat(flat).to("cuda" if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(total)
        summed = {}
        for (name, value), part in zip(named.items(), total.cpu().split([len(f) for f in flat])):
            if isinstance(value, torch.Tensor):
                summed[name] = part.view(value.shape).to(dtype=value.dtype, device=value.device)
            else:
                summed[name] = type(value)(part.item())
        return summed if isinstance(values, dict) else summed[""]

    def gather(self, item) -> list:
        if self.world_size == 1:
            return [item]
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, item)
        return gathered

    def grpo_trainer(self, model, reference):
        """DDP over the ranks, or with --grpo-fsdp a copy sharded with FSDP2 (ZeRO-3: weights,
        gradients and AdamW states split over the ranks; rollouts keep using the whole model,
        refreshed after each step)."""
        if self.world_size == 1:
            if self.grpo_fsdp:
                self.log("grpo: --grpo-fsdp shards over torchrun ranks; on one process it changes "
                         "nothing")
            return model
        if not self.grpo_fsdp:
            return DistributedDataParallel(model,
                                           device_ids=[model.device.index] if model.device.type
                                           == "cuda" else None, broadcast_buffers=False)
        trainer = shard(copy.deepcopy(model))
        if reference is not None:
            shard(reference)
        held = sum(p.to_local().numel() for p
                   in trainer.parameters()) / sum(p.numel() for p in model.parameters())
        self.log(f"grpo: FSDP over {self.world_size} ranks, this rank holds {held:.0%} of the "
                 f"trained weights and AdamW states")
        return trainer

    def after_update(self, params: list, stage: str, update: int, last: bool):
        """Every --check-every updates (counted over the run) and at the end of each stage."""
        if last or (self.check_every and update % self.check_every == 0):
            check_same_weights(params, f"update {update} ({stage})", self.world_size)


def grpo_state(ranks, state: es_grpo.GRPOState) -> dict:
    """What a checkpoint keeps of GRPO: AdamW's state and the reference model. Under torchrun
    (scale.train, on one process or many): whole tensors keyed by parameter name, gathered by every
    rank (a collective under FSDP), so a run resumes on any number of ranks, sharded or not;
    elsewhere (eval.py's runs) keyed by index."""
    if not isinstance(ranks, Torchrun):
        return {"optimizer": state.optimizer.state_dict(),
                "reference": state.reference and state.reference.state_dict()}
    return {"optimizer": get_optimizer_state_dict(state.trainer, state.optimizer,
                                                  options=WHOLE_STATE),
            "reference": None if state.reference is None else get_model_state_dict(
                state.reference, options=WHOLE_STATE)}


def load_grpo_state(ranks, state: es_grpo.GRPOState, saved: dict):
    """grpo_state's contents back into the stage's AdamW and reference, from either kind of
    checkpoint."""
    trainer, optimizer, reference = state.trainer, state.optimizer, state.reference
    if not any(isinstance(key, str) for key in saved["optimizer"]["state"]):  # keyed by index
        if isinstance(trainer, FSDPModule):
            raise es_grpo.BadInput("--resume: a one-process GRPO checkpoint cannot be resumed "
                                   "sharded; leave out --grpo-fsdp")
        optimizer.load_state_dict(saved["optimizer"])
        if reference is not None:
            reference.load_state_dict(saved["reference"])
        return
    if not isinstance(ranks, Torchrun):
        raise es_grpo.BadInput("--resume: GRPO state keyed by name: resume it with -m scale.train")
    # every rank read the checkpoint; FSDP keeps its shards
    whole = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(trainer, optimizer, saved["optimizer"], options=whole)
    if reference is not None:
        set_model_state_dict(reference, saved["reference"], options=whole)


def shard(model):
    """FSDP2 (ZeRO-3): each decoder layer's tensors, then the rest, split over the ranks; a layer's
    whole weights exist only while it runs. The layers are the classes transformers itself keeps
    unsplit."""
    for layer in [m for m in model.modules() if type(m).__name__
                  in (model._no_split_modules or [])]:
        fully_shard(layer)
    fully_shard(model)
    return model


@torch.no_grad()
def check_same_weights(params: list[torch.Tensor], where: str, world_size: int):
    """Stop every rank if any two hold different weights (compares each tensor's float64 sum and sum
    of squares across the ranks)."""
    if world_size == 1:
        return
    # (tensors, 2)
    local = torch.zeros(len(params), 2, dtype=torch.float64, device=params[0].device)
    for row, param in zip(local, params):
        # never a float64 copy of a whole embedding
        for chunk in param.detach().flatten().split(1 << 22):
            chunk = chunk.double()
            row += torch.stack([chunk.sum(), chunk.square().sum()])
    local = local.flatten().to("cuda" if dist.get_backend() == "nccl" else "cpu")  # (2 * tensors,)
    high, low = local.clone(), local.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    differ = high != low
    if differ.any():
        raise SystemExit(f"{where}: ranks hold different weights (tensor "
                         f"{int(differ.nonzero()[0]) // 2} differs first); stopped")
