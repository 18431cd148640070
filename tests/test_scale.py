"""scale/: two gloo ranks on CPU against one process, faults across ranks, and the vLLM backend's
logic on plain torch models and a stand-in engine (the real engine, vLLM's CPU build, is
tests/test_vllm.py's, in CI's second tier)."""
import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

import es_grpo
from conftest import ROOT, in_process

from scale import config, gpu_check, train  # noqa: E402
from scale.es import PopulationScorer  # noqa: E402
from scale.runs import ResumableFolder  # noqa: E402
from scale.vllm_rollout import EngineSettings, completions_to_rollout  # noqa: E402

RUN = ["--steps", "3", "--es-population", "5", "--es-prompts", "4", "--grpo-prompts", "4",
       "--grpo-group", "4",
       "--eval-problems", "3", "--heldout-problems", "2", "--eval-samples", "16",
       "--rollout-batch", "8"]
# what torchrun gives each rank; thread count changes float sums
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}


class Launch:
    """tests/dist_jobs.py on two gloo ranks, its jobs (argv, and a fault or a stand-in engine) run
    one after the other in one launch; result() waits for it and gives (returncode, stdout and
    stderr as a namespace, seconds it ran). then: (folder, copy, jobs) launched when these end, on a
    copy of a folder the first launch wrote."""

    def __init__(self, jobs: list[dict], env=ONE_THREAD,
                 then: tuple[Path, Path, list[dict]] | None = None):
        self.jobs, self.env, self.then, self.outcome, self.then_outcome = (
            jobs, env, then, None, None)
        self.done = threading.Event()

    # the launches' torchrun processes still alive: stop_background() ends them
    running: set = set()
    stopped, lock = False, threading.Lock()  # and no launch starts after it

    @classmethod
    def launch(cls, jobs: list[dict], env: dict):
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node=2", str(ROOT / "tests" / "dist_jobs.py")]
        started = time.time()
        with cls.lock:
            if cls.stopped:
                return SimpleNamespace(returncode=None, stdout="",
                                       stderr="not launched: the session ended"), 0.0
            process = subprocess.Popen(command, cwd=ROOT, env={**env, "JOBS": json.dumps(jobs)},
                                       text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            cls.running.add(process)
        try:
            stdout, stderr = process.communicate(timeout=300)
            said = SimpleNamespace(returncode=process.returncode, stdout=stdout, stderr=stderr)
        except subprocess.TimeoutExpired:
            process.kill()
            said = SimpleNamespace(returncode=None, stdout="", stderr="timed out after 300 s")
        cls.running.discard(process)
        return said, time.time() - started

    def run(self):
        try:
            self.outcome = self.launch(self.jobs, self.env)
            if self.then and not Launch.stopped:
                folder, copy_to, jobs = self.then
                shutil.copytree(folder, copy_to)
                self.then_outcome = self.launch(jobs, self.env)
        finally:
            self.done.set()

    def result(self):
        self.done.wait()
        return self.outcome


def single(*argv):
    """scale/train.py on one process, in this one, with the one thread torchrun gives each rank."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return in_process(train.main, *argv)
    finally:
        torch.set_num_threads(threads)


# GRPO with FSDP, a checkpoint every update
SHARDED = ["--algo", "grpo", "--grpo-fsdp", "--save-every", "1"]
ENGINE_RUN = ["--algo", "es", "--steps", "2", "--es-population", "4", "--es-prompts", "4",
              "--eval-problems", "1", # 1 evaluation chunk
              "--heldout-problems", "1", "--eval-samples", "16", "--rollout-batch", "16"]
TWO_RANK = [("--algo", "es"), ("--algo", "grpo"), tuple(SHARDED), ("--algo", "es", "diverge"),
            ("engine", *ENGINE_RUN)]
# the launches, started as the session begins (conftest.py) or by the first test to need them
BACKGROUND: dict = {}


def start_background(root: Path):
    """Every two-rank launch of this file, run one after the other by a background thread while the
    other tests run: each takes a core the in-process tests mostly leave idle, and the failing jobs
    mostly wait.
    - failing jobs, one launch each: the stand-in engine created on first use (the engine test's
      control: a rank waits in a collective the other never joins, until --dist-timeout), a rank
      that dies at update 2 of ES, and one that raises at update 2 of sharded GRPO (the run folder
      then copied and resumed);
    - every other two-rank run in one launch: ES, GRPO with DDP and with FSDP, ES with ranks made to
      diverge, and ES inside a stand-in engine that Torchrun starts (the last job: it destroys the
      process group)."""
    if BACKGROUND:
        return
    first_use = {"engine": "first_use", "argv": [*ENGINE_RUN, "--out", str(root / "first_use")]}
    BACKGROUND["first_use"] = Launch([first_use],
                                     {**ONE_THREAD, "ENGINE_TIMEOUT": "3"}), root / "first_use"
    die = ["--algo", "es", "--steps", "4", "--save-every", "1", "--eval-problems", "1",
           "--heldout-problems", "1", # the base evaluation small: only the updates matter
           "--eval-samples", "16", "--dist-timeout", "10"]
    died = {"fault": "die", "at": 2, "argv": [*RUN, *die, "--out", str(root / "die")]}
    BACKGROUND["die"] = Launch([died]), root / "die"
    raised = {"fault": "raise", "step": "grpo", "at": 2,
              "argv": [*RUN, *SHARDED, "--dist-timeout", "10", "--out", str(root / "raise")]}
    resume = (root / "raise", root / "resumed", [{"argv": ["--resume", str(root / "resumed")]}])
    BACKGROUND["raise"] = Launch([raised], then=resume), root / "raise"
    jobs = [{"engine": "start", "argv": [*flags[1:], "--out", str(root / two_rank_name(flags))]}
            if flags[0] == "engine" else
            {"fault": "diverge", "at": 1,
             "argv": [*RUN, *flags[:-1], "--out", str(root / two_rank_name(flags))]}
            if flags[-1] == "diverge" else {"argv": [*RUN, *flags, "--out",
                                                     str(root / two_rank_name(flags))]}
            for flags in TWO_RANK]
    BACKGROUND["two_rank"] = Launch(jobs), root
    launches = [launch for launch, _ in BACKGROUND.values()]
    threading.Thread(target=lambda: [launch.run() for launch in launches], daemon=True).start()


def stop_background():
    """At the session's end (conftest.py): a launch no test waited for (deselected, or the session
    stopped early) is ended with its workers, not left running."""
    with Launch.lock:
        Launch.stopped = True
        for process in list(Launch.running):
            process.terminate()  # torchrun's agent then stops its workers


def two_rank_name(flags) -> str:
    return "2-" + "-".join(flags).replace("--", "")


@pytest.fixture(scope="module")
def faulty_jobs(tmp_path_factory):
    """The failing jobs (start_background): name -> (result, seconds, run folder)."""
    start_background(tmp_path_factory.mktemp("background"))
    return {name: (*BACKGROUND[name][0].result(), BACKGROUND[name][1])
            for name in ("die", "raise", "first_use")}


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """shared(ranks, *flags): the folder and result of a run of scale/train.py with RUN and flags on
    one process (in this one) or two ranks (the launch of start_background)."""
    start_background(tmp_path_factory.mktemp("background"))
    launched, root = BACKGROUND["two_rank"]
    result, seconds = launched.result()
    print(f"{len(TWO_RANK)} two-rank runs in one launch: {seconds:.1f}s")
    parts, made = result.stdout.split("job "), {}
    for number, flags in enumerate(TWO_RANK):
        said = next((part for part in parts if part.startswith(f"{number}: begins")), "")
        made[two_rank_name(flags)] = SimpleNamespace(returncode=result.returncode, stdout=said,
                                                     stderr=result.stderr)

    def run(ranks: int, *flags):
        name = (f"{ranks}-" + "-".join(flags).replace("--",
                                                      "")) if ranks == 1 else two_rank_name(flags)
        if name not in made:
            made[name] = single(*RUN, *flags, "--out", str(root / name))
        assert made[name].returncode == 0, made[name].stderr[-2000:]
        return root / name, made[name]
    return run


def weights_and_metrics(run, algo):
    metrics = [{k: v for k, v in json.loads(line).items() if k not in ("seconds", "seq_per_s")}
               for line in (run / "metrics.jsonl").read_text().splitlines()]
    return load_file(run / f"stage1-{algo}" / "model.safetensors"), metrics


def one_process_and_two_ranks(algo, shared, *two_rank_flags):
    """Final weights of the tiny model trained by one process and by two gloo ranks; the base
    weights; metrics; the two-rank run's folder and result."""
    (one_folder, _), (two_folder, two) = shared(1, "--algo",
                                                algo), shared(2, "--algo", algo, *two_rank_flags)
    (a, metrics_a), (b,
                     metrics_b) = (weights_and_metrics(run,
                                                       algo) for run in (one_folder, two_folder))
    return a, b, load_file(ROOT / "tiny_model"
                           / "model.safetensors"), [metrics_a, metrics_b], (two_folder, two)


def test_es_on_two_ranks_ends_bit_identical_to_one_process(shared):
    a, b, base, metrics, (folder, _) = one_process_and_two_ranks("es", shared)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], base[k]) for k in a)  # it did train
    assert metrics[0] == metrics[1]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["stages"][1]["sequences"] == 3 * 5 * 4
    # evaluation dealt out over 2 ranks (6 chunks of 8 rows) scores as in one process: every stage's
    # Pass@K,
    # per-problem counts, entropy and held-out results, bit for bit
    one = json.loads((shared(1, "--algo", "es")[0] / "summary.json").read_text())
    stages = [[{k: v for k, v in stage.items() if k != "seconds"} for stage in s["stages"]]
              for s in (one, summary)]
    assert (stages[0] == stages[1] and stages[0][0]["correct"]
            and stages[0][0]["heldout_pass@16"] is not None)


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_grpo_on_two_ranks_matches_one_process_within_1e_5(shared, parallel):
    # the sharded run is the fault test's reference too
    flags = SHARDED[2:] if parallel == "fsdp" else []
    a, b, base, metrics, (_, two) = one_process_and_two_ranks("grpo", shared, *flags)
    moved, apart = (max(float((a[k] - other[k]).abs().max()) for k in a) for other in (base, b))
    print(f"GRPO ({parallel}), 3 updates: 2 ranks vs 1 process differ by {apart:.1e} at most; "
          f"the updates moved weights {moved:.1e}")
    assert moved > 1e-5  # the tolerance is small against the update
    assert apart < 1e-5
    # the same samples, row for row
    assert [m["reward"] for m in metrics[0]] == [m["reward"] for m in metrics[1]]
    # 50-51%: sharded
    assert ("grpo: FSDP over 2 ranks, this rank holds 5" in two.stdout) == (parallel == "fsdp")


def test_sharded_grpo_stopped_by_a_fault_resumes_to_the_uninterrupted_weights(faulty_jobs, shared):
    whole_folder, _ = shared(2, *SHARDED)
    failed, seconds, folder = faulty_jobs["raise"]
    # a rank that raises ends every rank, in time
    print(f"raise: exit {failed.returncode} after {seconds:.1f}s")
    assert failed.returncode != 0 and seconds < 120 and not (folder / "summary.json").exists()
    assert "RuntimeError: injected fault" in failed.stderr
    checkpoint = torch.load(folder / "checkpoint.pt", weights_only=False)["stage_state"]
    assert checkpoint["update"] == 1
    a, metrics_a = weights_and_metrics(whole_folder, "grpo")
    state = checkpoint["optimizer"]["state"]  # AdamW's moments made whole, keyed by parameter name
    assert state and all(state[k]["exp_avg"].shape == a[k].shape for k in state)
    # es_grpo.OneProcess (eval.py's runs) keeps it by index
    one_process = ResumableFolder(resume=str(folder))
    refused = in_process(lambda argv: es_grpo.run(es_grpo.parse_args(argv), folder=one_process))
    assert (refused.returncode == 2
            and "resume it with -m scale.train" in refused.stderr.splitlines()[-1])
    resumed, _ = BACKGROUND["raise"][0].then_outcome  # a copy of the failed run folder, resumed
    folder = folder.parent / "resumed"
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    # --grpo-fsdp restored from the run folder's config.json
    assert "grpo: FSDP over 2 ranks" in resumed.stdout
    # measured: with the FSDP modules of a tiny run still alive, 5 of 20 gloo exits aborted
    for rank in (0, 1):
        assert f"rank {rank}: process group destroyed, 0 FSDP modules alive" in resumed.stdout
    b, metrics_b = weights_and_metrics(folder, "grpo")
    assert all(torch.equal(a[k], b[k]) for k in a) and metrics_a == metrics_b


def test_a_rank_that_dies_makes_every_rank_exit_nonzero_in_bounded_time(faulty_jobs):
    """(A rank that hangs: the engine test's control; one that raises: the sharded GRPO fault
    test.)"""
    result, seconds, run = faulty_jobs["die"]
    print(f"die: exit {result.returncode} after {seconds:.1f}s")
    assert result.returncode != 0
    assert seconds < 120, f"took {seconds:.0f}s"
    assert not (run / "summary.json").exists()
    # the update before the fault
    checkpoint = torch.load(run / "checkpoint.pt", weights_only=False)
    assert checkpoint["stage_state"]["update"] == 1


def test_ranks_with_different_weights_are_stopped_with_a_clear_error(shared):
    folder, result = shared(2, "--algo", "es", "diverge")  # rank 1's weights nudged after update 1
    for rank in (0, 1):  # both stop at the same check (the launch's next job then starts)
        assert (f"rank {rank}: job 3: update 1 (es): ranks hold different weights (tensor 0 "
                f"differs first); stopped") in result.stderr
    assert not (folder / "summary.json").exists()


# --------------------------------------------------------------------------- the vLLM backend
# without vLLM


def test_completions_are_padded_like_the_hf_rollout(tiny):
    _, tokenizer = tiny
    prompt_ids = [tokenizer("C3,5,7=56:").input_ids, tokenizer("A1+2:").input_ids]
    completion_ids = [tokenizer("3").input_ids + [tokenizer.eos_token_id],
                      tokenizer("(5+3)*7").input_ids]
    roll = completions_to_rollout(tokenizer, prompt_ids, completion_ids, "cpu")
    assert roll.texts == ["3", "(5+3)*7"]
    assert roll.prompt_ids.shape == (2, 10) and roll.prompt_mask[1].tolist() == [0] * 5 + [1] * 5
    assert roll.completion_mask.tolist() == [[1, 1, 0, 0, 0, 0, 0], [1] * 7]
    assert (roll.completion_ids[0, 2:].eq(tokenizer.pad_token_id).all()
            and roll.entropy.isnan().all())


def test_the_engine_is_created_on_every_rank_before_any_generation(shared, faulty_jobs, tmp_path):
    """One evaluation chunk for two ranks: rank 1 has nothing to generate in the base evaluation.
    Started by Torchrun on every rank, the engine (its creation a collective) is ready; created on
    first use (the control), rank 0 waits in the creation while rank 1 moves on, and the job fails
    at the timeout. The ES run inside the engines on two ranks ends with the weights of one
    process's transformers run, bit for bit."""
    folder, result = shared(2, "engine", *ENGINE_RUN)
    assert (folder / "summary.json").exists()
    one = single(*ENGINE_RUN, "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr[-2000:]
    a, b = (load_file(run / "stage1-es" / "model.safetensors") for run
            in (tmp_path / "one", folder))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], v)
               for k, v in load_file(ROOT / "tiny_model" / "model.safetensors").items())
    for rank in (0, 1):  # the last job of the launch: it destroys the process group
        said = [line for line in result.stdout.splitlines() if line.startswith(f"rank {rank}:")]
        assert said == [f"rank {rank}: engine shut down",
                        f"rank {rank}: process group destroyed, 0 FSDP modules alive",
                        # created once; shut down before the group goes
                        f"rank {rank}: 1 engine created"]
    # a rank stuck in a collective: the hung-rank case
    control, seconds, folder = faulty_jobs["first_use"]
    print(f"engine created on first use: exit {control.returncode} after {seconds:.1f}s")
    assert control.returncode != 0 and seconds < 120 and not (folder / "summary.json").exists()


def test_one_process_gets_what_the_external_launcher_reads(monkeypatch):
    from scale.vllm_rollout import one_process_environment
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        # recorded, so that teardown restores the environment as it was
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    one_process_environment()
    assert [os.environ[n] for n in ("RANK", "LOCAL_RANK", "WORLD_SIZE",
                                    "MASTER_ADDR")] == ["0", "0", "1", "127.0.0.1"]
    assert 0 < int(os.environ["MASTER_PORT"]) < 65536
    monkeypatch.setenv("RANK", "3")  # under torchrun nothing is touched
    one_process_environment()
    assert os.environ["RANK"] == "3"


def test_the_engine_gets_what_the_trainer_leaves_and_what_cannot_fit_is_refused():
    """scale/train.py's check before the engine starts, on the published Qwen2.5 configs (no
    download) and an 80 GB H100, 8 ranks, as scale/README's recipes run: prompts of 256 tokens plus
    1,024 new ones."""
    from scale import memory
    from transformers import Qwen2Config

    def settings(model, *flags, max_len=256 + 1024, gpu="NVIDIA H100 80GB HBM3", **scale_flags):
        args = config.parse_args(["--preset", "paper", "--rollout", "vllm", *flags])
        return train.engine_settings(dataclasses.replace(args, **scale_flags), 8,
                                     (80e9 / memory.GB, gpu), Qwen2Config(**memory.MODELS[model]),
                                     max_len)

    engine = settings("Qwen2.5-1.5B-Instruct", "--algo", "grpo", "--grpo-microbatch", "4")
    assert engine.dtype == "bfloat16" and 0.25 < engine.memory < 0.3  # the trainer keeps 51.4 GB
    # vLLM's H100 batch
    assert (engine.max_len, engine.batch_tokens, engine.batch_seqs) == (1280, 16384, 1024)
    assert settings("Qwen2.5-1.5B-Instruct", "--algo", "grpo-es", "--grpo-microbatch",
                    "4").memory == engine.memory
    assert settings("Qwen2.5-1.5B-Instruct", "--algo", "es", "--dtype", "bfloat16").memory == 0.9
    # 7B ES: a member staged in bf16 (14.2 GB) beside the engine until its reload leaves the engine
    # 0.73
    assert 0.72 < settings("Qwen2.5-7B-Instruct", "--algo", "es", "--dtype",
                           "bfloat16").memory < 0.74
    a100 = settings("Qwen2.5-1.5B-Instruct", "--algo", "es", gpu="NVIDIA A100-SXM4-80GB")
    # vLLM keeps A100s on the small batch
    assert (a100.batch_tokens, a100.batch_seqs) == (8192, 256)
    # 7B GRPO with DDP: not even alone
    with pytest.raises(ValueError, match="the trainer needs 183.1 GB"):
        settings("Qwen2.5-7B-Instruct", "--algo", "grpo", "--grpo-microbatch", "4")
    with pytest.raises(ValueError,
                       match="leaves 37.3 of this GPU's 75 GB to the trainer, which needs 51.4"):
        settings("Qwen2.5-1.5B-Instruct", "--algo", "grpo", "--grpo-microbatch", "4",
                 vllm_memory=0.5)
    # what vLLM itself would refuse at startup: a KV cache without room for one whole sequence
    with pytest.raises(ValueError, match="it needs to start"):
        settings("Qwen2.5-7B-Instruct", "--algo", "es", "--dtype", "bfloat16", max_len=32768,
                 vllm_memory=0.25)
    with pytest.raises(ValueError, match="more than the model's 32768"):
        settings("Qwen2.5-1.5B-Instruct", "--algo", "es", max_len=40000)
    refused = single("--rollout", "vllm", "--vllm-memory", "1.5", "--out", "never")
    assert refused.returncode == 2 and "--vllm-memory must be in [0, 1)" in refused.stderr


def test_a_cpu_engine_gets_a_kv_cache_in_host_ram_and_what_cannot_fit_is_refused():
    """vLLM's CPU build keeps its KV cache in VLLM_CPU_KVCACHE_SPACE GiB of host RAM: by default the
    least whole GiB that holds one sequence; a cache smaller than one sequence, or engines and
    trainers beyond the RAM, are refused before anything starts."""
    from scale import memory
    from transformers import Qwen2Config
    # 56 KiB a token, bf16
    qwen = memory.estimate(Qwen2Config(**memory.MODELS["Qwen2.5-7B-Instruct"]), ranks=1)
    assert memory.cpu_engine_kv(qwen, "bfloat16", 1280, 0.0, available_gb=100) == 1
    # 1.75 GiB a sequence
    assert memory.cpu_engine_kv(qwen, "bfloat16", 32768, 0.0, available_gb=100) == 2
    with pytest.raises(ValueError, match="holds less than one sequence of 32768 tokens"):
        memory.cpu_engine_kv(qwen, "bfloat16", 32768, 0.0, kv_gib=1, available_gb=100)
    # two ranks of a 7B engine beside 28 GB trainers
    with pytest.raises(ValueError, match="2 CPU engine"):
        memory.cpu_engine_kv(qwen, "bfloat16", 1280, 28.4, ranks=2, available_gb=64)
    assert memory.available_ram_gb() > 0


def test_the_engine_is_as_long_as_the_run_needs_and_its_groups_wait_dist_timeout(tiny):
    """max_model_len: the run's longest prompt in tokens plus --max-new-tokens (not the model's
    context); vLLM's own process groups get --dist-timeout (both are LLM(...) arguments in vLLM
    0.33.0)."""
    _, tokenizer = tiny
    args = config.parse_args(["--max-new-tokens", "12"])
    longest = max(len(es_grpo.prompt_text(p,
                                          tokenizer)) for p in es_grpo.evaluation_pool("countdown"))
    # characters: one token each
    assert longest + 12 <= train.engine_length(args, tokenizer) <= longest + 12 + 8
    arguments = EngineSettings("m", "bfloat16", 0.5, 80, 16384, 1024, 3, 42).arguments()
    assert arguments["max_model_len"] == 80 and arguments["max_num_batched_tokens"] == 16384
    assert (arguments["distributed_timeout_seconds"]
            == arguments["cpu_distributed_timeout_seconds"] == 42)
    long = EngineSettings("m", "bfloat16", 0.5, 20000, 16384, 1024, 3, 42).arguments()
    assert long["max_num_batched_tokens"] == 20000  # vLLM needs a whole sequence in one batch


def test_gpu_check_script_runs_its_code_path_on_cpu():
    """Both algorithms' rows; its vLLM part (tests/test_vllm.py, on the CPU engine) says in one line
    that it is skipped."""
    result = in_process(gpu_check.main, "--hidden", "64", "--layers", "2", "--vocab", "512",
                        "--updates", "2",
                        "--population", "2", "--prompts", "2", "--max-new-tokens", "4", "--device",
                        "cpu", "--vllm", "off")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line.split("|") for line in result.stdout.splitlines()
            if line.startswith("| es") or line.startswith("| grpo")}
    # sequences/s
    assert rows.keys() == {"es", "grpo"} and all(float(row[4]) > 0 for row in rows.values())
    assert "the vLLM part is skipped: --vllm off" in result.stdout


# --------------------------------------------------------------------------- only where a GPU (and
# vLLM) is present

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (none here)")


@needs_cuda
def test_population_batched_es_matches_member_by_member_on_the_gpu():
    model, tokenizer = es_grpo.load_model("", "cuda")
    problems = es_grpo.generate_problems("countdown", 32, seed=8)
    args = es_grpo.Args(es_population=8, es_prompts=32, es_sigma=2e-2)
    masters = []
    for scorer in (es_grpo.score_members, PopulationScorer(batched="on")):
        net = copy.deepcopy(model).eval()
        params = list(net.parameters())
        masters.append(es_grpo.master_weights(params))
        es_grpo.es_step(es_grpo.Context(args, net, tokenizer, score_members=scorer),
                        es_grpo.ESState(params, masters[-1]), problems, seed=1)
    # kernels may round differently
    assert max(float((a - b).abs().max()) for a, b in zip(*masters)) < 1e-6


def test_the_scale_tools_refuse_a_bad_argument_in_one_line(capsys):
    """python -m scale.memory and python -m scale.bench: a bad argument is one line and exit 2,
    before any work."""
    from scale import bench, memory
    for main, argv, said in ((memory.main, ["x"], "invalid int value: 'x'"),
                             (memory.main, ["0"], "at least 1 row"),
                             (bench.main, ["--parts", "es,nope"], "(not nope)"),
                             (bench.main, ["--repeats", "0"], "--repeats at least 1")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        lines = capsys.readouterr().err.strip().splitlines()
        assert (stop.value.code == 2 and said in lines[-1]
                and "Traceback" not in "".join(lines)), (argv, lines)
    memory.main(["2"])
    assert "GRPO micro-batch 2 rows" in capsys.readouterr().out
