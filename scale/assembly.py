"""One place builds a run's machinery: the hooks that es_grpo.run and es_grpo.Context take.

es_grpo.py's Context has a hook for each thing scale/ does otherwise: how completions are decoded
(`generate`), how work splits over processes (`ranks`), where ES sets its members (`es_weights`),
how the population is scored (`score_members`), ES's update (`es_update`), GRPO's step
(`grpo_step`), the run folder (`folder`), where the problems come from (`problems`) and how an
answer is graded (`grade`). `hooks` builds all of them from the settings (scale/config.py's Args);
scale.train, eval.py and analyses/, scale.bench and scale.gpu_check take theirs from it, so a run, a
measurement and a benchmark with the same settings decode, score and grade alike.
"""
from __future__ import annotations

import es_grpo
from scale import verifier
from scale.config import Args, evaluation_sets
from scale.decode import FastRollout
from scale.es import PER_TENSOR, NoiseTable, PopulationScorer, Update
from scale.grpo import grpo_step
from scale.runs import ResumableFolder
from scale.tracking import TrackedFolder, missing


def hooks(args: Args, engine=None, launcher=None) -> dict:
    """es_grpo.run's hooks for these settings. engine: a started rollout engine for --rollout vllm
    (scale/vllm_rollout.py's VLLMRollout.launch; scale.gpu_check's stand-ins). launcher: the ranks'
    class (scale/distributed.py's Torchrun under scale.train; None: one process,
    es_grpo.OneProcess)."""
    in_engine_es = engine is not None and args.algo == "es"  # the trainer's model: only saved
    made = dict(generate=rollout_hook(args, engine), **es_hooks(args), grpo_step=grpo_step,
                problems=evaluation_sets, grade=verifier.grade, folder=run_folder(args))
    if engine is not None:  # ES's members: the engine's weights, in any stage
        made["es_weights"] = engine.es_weights
    if launcher is not None:
        made["ranks"] = launcher(args.grpo_fsdp, args.check_every, args.dist_timeout,
                                 engine=engine, model_device="cpu" if in_engine_es else None)
    return made


def run_folder(args: Args) -> ResumableFolder:
    """The run folder: checkpoints, --resume, a lock, and with --report-to a tracker beside it (its
    package missing: one line, exit 2, before anything starts)."""
    folder, refused = (args.resume, args.save_every, args.base_from), missing(args.report_to)
    if refused:
        raise es_grpo.BadInput(refused)
    if args.report_to == "none":
        return ResumableFolder(*folder)
    return TrackedFolder(args.report_to, *folder)


def es_hooks(args: Args) -> dict:
    """The population's scorer and the update (scale/es.py), sharing --es-noise's source."""
    source = NoiseTable(args.seed) if args.es_noise == "table" else PER_TENSOR
    scorer = PopulationScorer(source, args.es_batched, reuse=args.es_noise != "redrawn")
    return dict(score_members=scorer, es_update=Update(source))


def rollout_hook(args: Args, engine):
    if args.rollout == "vllm":
        if engine is None:
            raise ValueError("--rollout vllm needs a started engine (scale/vllm_rollout.py)")
        return engine
    return FastRollout(args.rollout_dtype) if args.rollout == "hf" else es_grpo.rollout


def context(args: Args, model, tokenizer, engine=None) -> es_grpo.Context:
    """What an analysis, a benchmark or a check decodes, scores and grades with outside a run: the
    hooks a run with these settings gets (its folder aside: nothing is written), on one process."""
    made = hooks(args, engine)
    del made["folder"]
    return es_grpo.Context(args, model, tokenizer, **made)
