import concurrent.futures
import contextlib
import copy
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

# read when huggingface_hub is imported: tests never wait on a hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

# One thread for the tests in this process, and the scripts they start: the tiny model's operations
# are too small for a second thread to pay, and the two-rank launches running meanwhile get the
# other core.
os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# tests/exercises.py check: a student's copy is es_grpo for every import
if os.environ.get("ES_GRPO_FILE"):
    spec = importlib.util.spec_from_file_location("es_grpo", os.environ["ES_GRPO_FILE"])
    sys.modules["es_grpo"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["es_grpo"])

import es_grpo  # noqa: E402


def in_process(main, *argv) -> SimpleNamespace:
    """main(argv) run in this process, reported as a subprocess would be: returncode, stdout and
    stderr (a SystemExit with a message prints it and exits 1, as Python does). Saves starting an
    interpreter and importing torch and transformers for each command."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exit:
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
            code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def run_es_grpo(*argv) -> SimpleNamespace:
    """`python es_grpo.py ARGV`, in this process."""
    return in_process(lambda args: es_grpo.run(es_grpo.parse_args(args)), *argv)


def run_scale(*argv) -> SimpleNamespace:
    """`python -m scale.train ARGV` on one process (no torchrun), in this process."""
    from scale import train
    return in_process(train.main, *argv)


TINY_RUN = ["--steps", "2", "--es-population", "2", "--es-prompts", "4", "--grpo-prompts", "2",
            "--grpo-group", "2",
            "--eval-problems", "3", "--heldout-problems", "2", "--eval-samples", "16"]


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory):
    """A finished GRPO->ES run of `python es_grpo.py` with TINY_RUN and a trajectory point at update
    2 (4 samples): its folder and result, shared by the tests that read a run (none may change
    it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    return out, run_es_grpo(*TINY_RUN, "--eval-every", "2", "--trajectory-samples", "4", "--out",
                            str(out))


@pytest.fixture
def stepped_rows(monkeypatch) -> list:
    """The inputs' shape (R, 1) of every new token that takes scale/decode_step.py's step while the
    test runs, in order."""
    from scale import decode_step
    shapes, step = [], decode_step.step
    monkeypatch.setattr(decode_step, "step", lambda model, inputs, *rest, **kwargs: (
        shapes.append(inputs.shape), step(model, inputs, *rest, **kwargs))[1])
    return shapes


@pytest.fixture(scope="session")
def tiny():
    """The shipped tiny model and its tokenizer."""
    model, tokenizer = es_grpo.load_model("")
    return model.eval(), tokenizer


@pytest.fixture
def fresh_tiny():
    """A copy that a test may modify."""
    model, tokenizer = es_grpo.load_model("")
    return model.eval(), tokenizer


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what will not run
def pytest_collection_modifyitems(session, config, items):
    """tests/test_scale.py's two-rank launches start now, in the background, and so do the lane's
    commands (LANE) of the tests that will run; those tests run last, when their commands are done
    or nearly so."""
    if any({"shared", "faulty_jobs"} & set(getattr(item, "fixturenames", ())) for item in items):
        import test_scale
        test_scale.start_background(config._tmp_path_factory.mktemp("background"))
    names = {item.name for item in items}
    for test, (module, starter) in LANE.items():
        if test in names:
            getattr(importlib.import_module(module), starter)(
                config._tmp_path_factory.mktemp(starter))
    waiting = sorted((item for item in items if item.name in LANE),
                     key=lambda item: list(LANE).index(item.name))
    items[:] = [item for item in items if item.name not in LANE] + waiting


# one background lane for commands that need no test's state: (module, the function that starts
# its command, given a folder of its own) of each test that reads one, in the lane's order. The
# two-rank launches hold the second core for about the suite's first half; the lane fills it after.
LANE = {"test_the_bench_starts_its_children_as_modules": ("test_docs", "start_bench_child"),
        "test_quick_reproduction_report_end_to_end": ("test_reproduction",
                                                      "start_quick_reproduction"),
        "test_the_tiny_report_is_what_the_code_makes_of_its_runs": ("test_reports",
                                                                    "start_tiny_remake"),
        "test_es_grpo_py_copied_alone_beside_tiny_model_answers_help_and_trains": (
            "test_cli", "start_standalone_copy"),
        "test_every_documented_entry_point_starts_as_python_starts_it": (
            "test_docs", "start_entry_points"),
        "test_every_exercise_fails_on_the_student_copy_and_passes_on_the_reference": (
            "test_exercises", "start_student_copy"),
        "test_exercise_1_filled_from_the_reference_passes_check": (
            "test_exercises", "start_filled_check"),
        "test_two_runs_started_at_once_on_one_folder_end_with_one_run_and_one_refusal": (
            "test_reliability", "start_race")}
LATER = concurrent.futures.ThreadPoolExecutor(max_workers=1)


def later(job) -> concurrent.futures.Future:
    """job() in the background lane, once the lane's earlier jobs have ended: beside
    tests/test_scale.py's two-rank launches, on the core the in-process tests leave idle. A test
    reads the future's result."""
    return LATER.submit(job)


STARTED: list = []  # the lane's processes: ended with the session


# the environment as the session began: a lane's command never takes a variable that a test in
# this process has set for the while (WORLD_SIZE, RANK, ...)
LANE_ENV = dict(os.environ)
LANE_SECONDS = 600  # a lane's command that runs longer is killed


def command(argv: list[str], cwd: Path, logs: Path, **env) -> subprocess.Popen:
    """`python ARGV` run in cwd on one thread to its end, at most LANE_SECONDS (then killed: exit
    -9), with LANE_ENV (env: variables set or replaced), its output in logs/out.txt and
    logs/err.txt."""
    with (logs / "out.txt").open("w") as out, (logs / "err.txt").open("w") as err:
        process = subprocess.Popen([sys.executable, *argv], cwd=cwd, stdout=out, stderr=err,
                                   env={**LANE_ENV, **env})  # LANE_ENV: one thread
    STARTED.append(process)
    try:
        process.wait(timeout=LANE_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return process



def ran(process: subprocess.Popen, logs: Path) -> subprocess.CompletedProcess:
    """A lane's command as subprocess.run would have returned it."""
    return subprocess.CompletedProcess(process.args, process.returncode,
                                       (logs / "out.txt").read_text(),
                                       (logs / "err.txt").read_text())


def pytest_sessionfinish(session, exitstatus):
    if "test_scale" in sys.modules:
        sys.modules["test_scale"].stop_background()
    # the session stopped before a test read its command
    LATER.shutdown(wait=False, cancel_futures=True)
    for process in STARTED:
        if process.poll() is None:
            process.terminate()


def pytest_addoption(parser):
    parser.addoption("--fuzz-count", type=int, default=30_000,
                     help="completions per verifier in the fuzz test")


def es_step_recording_rewards(model, tokenizer, problems, args, seed=1, batched=None):
    """es_step's statistics, the member rewards it normalised, its master after the update, and the
    texts; batched: scale/es.py's PopulationScorer's mode, each eps drawn again by es_grpo.es_update
    (None: es_grpo's members one at a time)."""
    from scale.es import PopulationScorer
    model = copy.deepcopy(model)
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    rewards, texts, plain_zscore, plain_score = [], [], es_grpo.zscore, es_grpo.score
    es_grpo.zscore = lambda r: (rewards.append(r.clone()), plain_zscore(r))[1]
    es_grpo.score = lambda run, p, t: (texts.extend(t), plain_score(run, p, t))[1]
    try:
        scorer = (es_grpo.score_members if batched is None
                  else PopulationScorer(batched=batched, reuse=False))
        run = es_grpo.Context(args, model, tokenizer, score_members=scorer)
        stats = es_grpo.es_step(run, es_grpo.ESState(params, master), problems, seed=seed)
    finally:
        es_grpo.zscore, es_grpo.score = plain_zscore, plain_score
    return stats, rewards[0], master, texts


def summary_of(out):
    return [{k: v for k, v in stage.items() if k != "seconds"}
            for stage in json.loads((out / "summary.json").read_text())["stages"]]


def countdown_file(path, count, start=0):
    path.write_text("".join(json.dumps({"numbers": [a, 2, 3], "target": a + 5}) + "\n"
                            for a in range(start, start + count)))
    return path


GSM8K = [
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
                 "clips in May. How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = "
               "<<48+24=72>>72 clips altogether in April and May.\n#### 72"},
    {"question": "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of "
                 "babysitting. How much did she earn?",
     "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned "
               "0.2 x 50 = $<<0.2*50=10>>10.\n#### 10"},
    {"question": "A company spends $1,200 a month. How much in a year?",
     "answer": "12 * 1,200 = $<<12*1200=14400>>14,400\n#### 14,400"},
]


FUSED = {".q_proj.": ".qkv_proj.", ".k_proj.": ".qkv_proj.", ".v_proj.": ".qkv_proj.",
         # vLLM 0.33.0 llama.py: hf_to_vllm_mapper
         ".gate_proj.": ".gate_up_proj.", ".up_proj.": ".gate_up_proj."}


class FakeEngine:
    """Stands in for vllm.LLM where the real engine cannot run: in the main test tier (vLLM is not
    installed there) for what a CPU engine cannot show, the code paths of CUDA-only scripts
    (scale/gpu_check.py) and the collective creation of an engine on every rank
    (tests/dist_jobs.py). Everything else about the engine (greedy decoding equal to
    es_grpo.rollout, reloads of whole fused layers, the tied head, ES inside the engine bit-exact,
    stop tokens, two ranks, teardown) is tested on the real CPU engine in tests/test_vllm.py.

    It holds the weights as vLLM holds a Llama's (q, k and v fused into one qkv_proj tensor, gate
    and up into gate_up_proj, a tied head not loaded by name), refuses a reload that leaves a fused
    layer partly loaded, as the real reload would leave it uninitialised, and decodes with a
    transformers copy rebuilt from the fused tensors."""

    def __init__(self, model, tokenizer, dtype=None):
        self.model, self.tokenizer, self.generated_with, self.loads = (
            copy.deepcopy(model), tokenizer, [], 0)
        # transformers name -> (vLLM name, rows); vLLM tensors
        self.slices, self.fused, parts = {}, {}, {}
        for name, param in model.named_parameters():
            fused = next((name.replace(hf, vllm) for hf, vllm in FUSED.items() if hf in name), name)
            parts.setdefault(fused, []).append((name, param.detach().clone()))
        for fused, named in parts.items():
            self.fused[fused] = torch.cat([tensor
                                           for _, tensor in named]).to(dtype or named[0][1].dtype)
            start = 0
            for name, tensor in named:
                self.slices[name] = (fused, slice(start, start + len(tensor)))
                start += len(tensor)
        self.dtype = dtype or next(model.parameters()).dtype

    def load_weights(self, weights):
        self.loads += 1
        named = dict(weights)
        loaded = {self.slices[name][0] for name in named}
        partial = [name for name, (fused, _) in self.slices.items()
                   if fused in loaded and name not in named]
        if partial:
            raise ValueError(f"fused layers partly loaded: {partial} missing")
        for name, tensor in named.items():
            fused, rows = self.slices[name]
            self.fused[fused][rows].copy_(tensor.to(self.dtype))

    def transformers_weights(self) -> dict[str, torch.Tensor]:
        return {name: self.fused[fused][rows] for name, (fused, rows) in self.slices.items()}

    def collective_rpc(self, method, args=()):
        if method == "es_grpo_load_weights":
            return [self.load_weights(*args)]
        assert method == "es_grpo_placement", method
        return [(torch.device("cpu"), self.dtype)]

    def reset_prefix_cache(self):
        pass

    @torch.no_grad()
    def generate(self, prompts, params, use_tqdm):
        """Prompts arrive as token ids, each request samples with its own seed, and stops at any of
        its stop_token_ids, which stays in its token_ids."""
        assert all(prompt.keys() == {"prompt_token_ids"} for prompt in prompts)
        own = dict(self.model.named_parameters())
        for name, tensor in self.transformers_weights().items():
            own[name].data.copy_(tensor)
        self.generated_with.append({name: tensor.clone()
                                    for name, tensor in self.transformers_weights().items()})
        outputs = []
        for prompt, p in zip(prompts, params):
            ids, generator = list(prompt["prompt_token_ids"]), torch.Generator().manual_seed(p.seed)
            completion = []
            while (len(completion) < p.max_tokens
                   and not (completion and completion[-1] in p.stop_token_ids)):
                logits = self.model(  # (1, V)
                    input_ids=torch.tensor([ids + completion])).logits[:, -1].float()
                uniform = torch.rand(1, generator=generator)
                completion.append(
                    int(es_grpo.sample_tokens(logits, p.temperature, p.top_p, uniform)[0]))
            outputs.append(SimpleNamespace(outputs=[SimpleNamespace(token_ids=completion)]))
        return outputs


SMALL_RUN = ["--steps", "2", "--es-population", "2", "--es-prompts", "2", "--grpo-prompts", "2",
             "--grpo-group", "2",
             "--eval-problems", "2", "--heldout-problems", "1", "--eval-samples", "16",
             "--max-new-tokens", "6"]


def report_copy(tmp_path: Path, folder: str, model: str = "") -> list[str]:
    """A committed report (`folder` under the repository) copied into tmp_path, as its REPORT.md's
    command would remake it there: the command's argv (its third line), with --saved-only (from its
    committed runs and saved analyses, nothing trained or measured: a run not finished, or an
    analysis whose saved key the code no longer gives, fails naming it). model: the folder the
    command's --model names, linked into the copy."""
    import shutil
    # weights too, if kept
    shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns(
        "REPORT.md", "report.json", "*.png", "again", "stage*-*", "checkpoint.pt", "lock"))
    # the tiny report a larger model's is compared with
    beside = Path(folder).parent / "report.json"
    if (ROOT / beside).is_file() and folder != "report":
        shutil.copy(ROOT / beside, tmp_path / beside)
    argv = (ROOT / folder
            / "REPORT.md").read_text().splitlines()[2].split("`python eval.py ")[1].split("`")[0]
    argv = [*argv.split(), "--saved-only"]
    if model:
        named = tmp_path / argv[argv.index("--model") + 1]
        named.parent.mkdir(parents=True, exist_ok=True)
        named.symlink_to(Path(model).resolve())
    return argv


def remade_report(tmp_path: Path, folder: str, model: str = "") -> tuple[dict, Path]:
    """report_copy's command run in this process: (the committed report.json, the copy's folder)."""
    import eval as cli
    argv, previous = report_copy(tmp_path, folder, model), os.getcwd()
    os.chdir(tmp_path)
    try:
        done = in_process(cli.main, *argv)
    finally:
        os.chdir(previous)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((ROOT / folder / "report.json").read_text()), tmp_path / folder
