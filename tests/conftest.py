import contextlib
import importlib.util
import io
import os
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # read when huggingface_hub is imported: tests never wait on a hub

import pytest  # noqa: E402
import torch  # noqa: E402

# One thread for the tests in this process, and the scripts they start: the tiny model's operations are too
# small for a second thread to pay (quick reproduction: 42 s with 2 threads, 46 s with 1, but 61 s of CPU
# against 45), and the two-rank launches running meanwhile get the other core.
os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

if os.environ.get("ES_GRPO_FILE"):  # tests/exercises.py check: a student's copy is es_grpo for every import
    spec = importlib.util.spec_from_file_location("es_grpo", os.environ["ES_GRPO_FILE"])
    sys.modules["es_grpo"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["es_grpo"])

import es_grpo  # noqa: E402


def in_process(main, *argv) -> SimpleNamespace:
    """main(argv) run in this process, reported as a subprocess would be: returncode, stdout and stderr
    (a SystemExit with a message prints it and exits 1, as Python does). Saves starting an interpreter and
    importing torch and transformers for each command."""
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


TINY_RUN = ["--steps", "2", "--es-population", "2", "--es-prompts", "4", "--grpo-prompts", "2", "--grpo-group", "2",
            "--eval-problems", "3", "--heldout-problems", "2", "--eval-samples", "16"]


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory):
    """A finished GRPO->ES run of `python es_grpo.py` with TINY_RUN and a trajectory point at update 2 (4
    samples): its folder and result, shared by the tests that read a run (none may change it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    return out, run_es_grpo(*TINY_RUN, "--eval-every", "2", "--trajectory-samples", "4", "--out", str(out))


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
    """tests/test_scale.py's two-rank launches start now, in the background, if a test that reads them will run."""
    if any({"shared", "faulty_jobs"} & set(getattr(item, "fixturenames", ())) for item in items):
        import test_scale
        test_scale.start_background(config._tmp_path_factory.mktemp("background"))


def pytest_sessionfinish(session, exitstatus):
    if "test_scale" in sys.modules:
        sys.modules["test_scale"].stop_background()


def pytest_addoption(parser):
    parser.addoption("--fuzz-count", type=int, default=30_000,
                     help="completions per verifier in the fuzz test")
