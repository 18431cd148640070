"""One place builds a run's machinery: the hooks that es_grpo.run and es_grpo.Context take.

es_grpo.py's Context has a hook for each thing scale/ does otherwise: how completions are decoded
(`generate`), how work splits over processes (`ranks`), where ES sets its members (`es_weights`),
how the population is scored (`score_members`), ES's update (`es_update`), GRPO's step
(`grpo_step`), the run folder (`folder`), where the problems come from (`problems`) and how an
answer is graded (`grade`). `hooks`
builds all of them from the settings; scale.train, eval.py and analyses/, scale.bench and
scale.gpu_check take theirs from it, so a run, a measurement and a benchmark with the same settings
decode, score and grade alike.
"""
from __future__ import annotations

from dataclasses import dataclass

import es_grpo
from es_grpo import flag
from scale import verifier
from scale.config import Args, evaluation_sets
from scale.decode import FastRollout
from scale.es import NOISES, PER_TENSOR, NoiseTable, PopulationScorer, Update
from scale.grpo import grpo_step
from scale.population import MODES
from scale.runs import ResumableFolder
from scale.tracking import TRACKERS, TrackedFolder, missing

ROLLOUTS = ("hf", "vllm", "plain")


@dataclass
class ScaleArgs:
    """What scale/train.py adds to es_grpo.py's flags (python es_grpo.py --help lists those)."""

    resume: str = flag("", "continue the interrupted run in this folder, with its saved flags")
    save_every: int = flag(10, "updates between checkpoints (0: only after each stage)")
    base_from: str = flag("", "take the base model's evaluation from this run folder (its settings "
                              "that reach evaluation must be this run's) instead of measuring it "
                              "again")
    rollout: str = flag("hf", "rollout engine: hf (es_grpo.rollout with scale/decode.py's speed "
                              "layers), vllm (one engine per rank) or plain (es_grpo.rollout as "
                              "written)", ROLLOUTS)
    vllm_memory: float = flag(0.0, "share of GPU memory vLLM may take; the rest holds the trainer "
                                   "(0: all that the trainer leaves by scale/memory.py's "
                                   "arithmetic, at most 0.9)")
    vllm_dtype: str = flag("auto", "the engine's weights (auto: --dtype for ES alone, so that "
                                   "members are the transformers path's; bfloat16 when a GRPO "
                                   "stage runs)", ("auto", "float32", "bfloat16", "float16"))
    vllm_max_len: int = flag(0, "vLLM max_model_len, prompt plus completion (0: the run's longest "
                                "prompt plus --max-new-tokens)")
    es_noise: str = flag("once", "ES's eps: once (each member's drawn once, on every core, and "
                                 "summed as it is scored: the update draws nothing again), "
                                 "redrawn (es_grpo.py's two draws) or table (a departure: one "
                                 "shared Gaussian table, each member an offset)", NOISES)
    es_batched: str = flag("auto", "decode ES members in one batch, in the model's own dtype (HF "
                                   "rollout; auto: if greedy, without --rollout-dtype's copy, and "
                                   "the weights fit in 1 GiB or half the free GPU)", MODES)
    grpo_fsdp: bool = flag(False, "shard GRPO's trained weights, gradients, AdamW states and "
                                  "reference over the ranks (FSDP2) instead of DDP; rollouts use a "
                                  "whole copy")
    check_every: int = flag(1, "updates between checks that all ranks hold identical weights (0: "
                               "at stage ends)")
    dist_timeout: int = flag(600, "seconds a rank waits for the others before it gives up")
    report_to: str = flag("none", "also log each update's metrics and each evaluation to this "
                                  "tracker as the run goes (scale/tracking.py; its package: "
                                  "scale/requirements-trackers.txt)", TRACKERS)


def hooks(args: Args, scale: ScaleArgs | None = None, engine=None, launcher=None) -> dict:
    """es_grpo.run's hooks for these settings. engine: a started rollout engine for --rollout vllm
    (scale/vllm_rollout.py's VLLMRollout.launch; scale.gpu_check's stand-ins). launcher: the ranks'
    class (scale/distributed.py's Torchrun under scale.train; None: one process,
    es_grpo.OneProcess)."""
    scale = scale or ScaleArgs()
    in_engine_es = engine is not None and args.algo == "es"  # the trainer's model: only saved
    made = dict(generate=rollout_hook(args, scale, engine), **es_hooks(args, scale),
                grpo_step=grpo_step, problems=evaluation_sets, grade=verifier.grade,
                folder=run_folder(scale))
    if engine is not None:  # ES's members: the engine's weights, in any stage
        made["es_weights"] = engine.es_weights
    if launcher is not None:
        made["ranks"] = launcher(scale.grpo_fsdp, scale.check_every, scale.dist_timeout,
                                 config=vars(scale), engine=engine,
                                 model_device="cpu" if in_engine_es else None)
    return made


def run_folder(scale: ScaleArgs) -> ResumableFolder:
    """The run folder: checkpoints, --resume, a lock, and with --report-to a tracker beside it (its
    package missing: one line, exit 2, before anything starts)."""
    folder, refused = (scale.resume, scale.save_every, scale.base_from), missing(scale.report_to)
    if refused:
        raise es_grpo.BadInput(refused)
    if scale.report_to == "none":
        return ResumableFolder(*folder)
    return TrackedFolder(scale.report_to, *folder)


def es_hooks(args: Args, scale: ScaleArgs) -> dict:
    """The population's scorer and the update (scale/es.py), sharing --es-noise's source."""
    source = NoiseTable(args.seed) if scale.es_noise == "table" else PER_TENSOR
    scorer = PopulationScorer(source, scale.es_batched, reuse=scale.es_noise != "redrawn")
    return dict(score_members=scorer, es_update=Update(source))


def rollout_hook(args: Args, scale: ScaleArgs, engine):
    if scale.rollout == "vllm":
        if engine is None:
            raise ValueError("--rollout vllm needs a started engine (scale/vllm_rollout.py)")
        return engine
    return FastRollout(args.rollout_dtype) if scale.rollout == "hf" else es_grpo.rollout


def context(args: Args, model, tokenizer, scale: ScaleArgs | None = None,
            engine=None) -> es_grpo.Context:
    """What an analysis, a benchmark or a check decodes, scores and grades with outside a run: the
    hooks a run with these settings gets (its folder aside: nothing is written), on one process."""
    made = hooks(args, scale, engine)
    del made["folder"]
    return es_grpo.Context(args, model, tokenizer, **made)
