"""--task rg:NAME (scale/gym.py): reasoning-gym's problems, split as the built-in tasks are, graded
by the project's bounded grader and never by reasoning-gym's scorers, some of which run the model's
answer. Where reasoning-gym is not installed (scale/requirements-tasks.txt; .ci/run's extras tier
installs it) the tests that generate problems skip."""
import ast
import importlib.util
import re
import sys

import pytest

from conftest import ROOT, TINY_RUN, run_scale
from scale import config, gym, verifier

needs_gym = pytest.mark.skipif(
    importlib.util.find_spec("reasoning_gym") is None,
    reason="reasoning-gym is not installed (scale/requirements-tasks.txt; .ci/run's extras tier)")


def test_a_tasks_settings_are_read_as_json_values_and_rg_names_pass_the_flag():
    assert gym.parse_task("rg:chain_sum") == ("chain_sum", {})
    assert gym.parse_task("rg:basic_arithmetic:max_terms=3,operators=+-,allow_negation=false") == (
        "basic_arithmetic", {"max_terms": 3, "operators": "+-", "allow_negation": False})
    assert config.parse_args(["--task", "rg:gsm_symbolic:difficulty=0.5"]).task.startswith("rg:")
    with pytest.raises(SystemExit):
        config.parse_args(["--task", "gsm_symbolic"])  # neither built in nor rg:


def test_without_reasoning_gym_an_rg_task_is_one_line_naming_the_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # its import now fails
    result = run_scale(*TINY_RUN, "--task", "rg:chain_sum", "--out", str(tmp_path / "never"))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "pip install -r scale/requirements-tasks.txt" in result.stderr
    assert not (tmp_path / "never").exists()


def test_no_code_of_the_project_calls_a_task_librarys_scorer():
    sources = [*ROOT.glob("*.py"), *ROOT.glob("scale/**/*.py"), *ROOT.glob("analyses/**/*.py")]
    named = [path for path in sources for node in ast.walk(ast.parse(path.read_text()))
             if "score_answer" in (getattr(node, "attr", None), getattr(node, "id", None),
                                   getattr(node, "value", None), getattr(node, "name", None))]
    assert len(sources) > 20 and not named


@needs_gym
def test_the_splits_are_disjoint_fixed_across_seeds_and_numeric():
    train, test = gym.splits("rg:chain_sum:max_terms=3", 0, 50, "test")
    other_train, same_test = gym.splits("rg:chain_sum:max_terms=3", 1, 50, "test")
    _, dev = gym.splits("rg:chain_sum:max_terms=3", 0, 50, "dev")
    questions = {name: {p["question"] for p in problems} for name, problems
                 in (("train", train), ("test", test), ("dev", dev))}
    assert test == same_test and train != other_train and len(test) == len(dev) == 50
    assert not questions["train"] & (questions["test"] | questions["dev"])
    assert all(p["task"] == "math" and gym.NUMBER.fullmatch(p["answer"]) for p in train + test)
    right = [verifier.grade(p, f"So the answer is \\boxed{{{p['answer']}}}.")[0] for p in test[:5]]
    assert right == [1.0] * 5


@needs_gym
@pytest.mark.parametrize("task, message", [
    ("rg:string_insertion", "its answers are not plain numbers"),  # its scorer runs eval
    ("rg:spiral_matrix", "its answers are not plain numbers"),
    ("rg:no_such_task", "reasoning-gym has no task 'no_such_task'"),
    ("rg:chain_sum:no_such_setting=1", "reasoning-gym refused the settings"),
    ("rg:chain_sum:max_terms", "settings are NAME=VALUE"),
])
def test_a_task_the_grader_cannot_read_is_refused_in_one_line(task, message, tmp_path):
    result = run_scale(*TINY_RUN, "--task", task, "--out", str(tmp_path / "never"))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert message in result.stderr and not (tmp_path / "never").exists()


@needs_gym
def test_a_hostile_answer_that_reasoning_gyms_scorer_runs_runs_nothing_here(tmp_path):
    """string_insertion's own scorer evals the answer (shown: it makes a file); the same text graded
    here, as an rg problem's completion, is a wrong answer at most and makes nothing."""
    import reasoning_gym
    made, unmade = tmp_path / "made-by-its-scorer", tmp_path / "made-here"
    hostile = "__import__('pathlib').Path(r'{}').touch() or ['A']"
    dataset = reasoning_gym.create_dataset("string_insertion", seed=0, size=1)
    dataset.score_answer(hostile.format(made), dataset[0])
    assert made.exists()  # the hazard is real
    problem = gym.splits("rg:chain_sum", 0, 5, "test")[1][0]
    for completion in (hostile.format(unmade), f"\\boxed{{{hostile.format(unmade)}}}",
                       f"<answer>{hostile.format(unmade)}</answer>"):
        assert verifier.grade(problem, completion)[0] < 1.0
    assert not unmade.exists()


@needs_gym
def test_a_run_on_an_rg_task_trains_and_evaluates_its_problems(tmp_path):
    out = tmp_path / "run"
    result = run_scale(*TINY_RUN, "--task", "rg:chain_sum:max_terms=3", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    said = re.search(r"(\d+) training / (\d+) eval problems", result.stdout + result.stderr)
    assert gym.TRAIN_PROBLEMS // 2 <= int(said[1]) <= gym.TRAIN_PROBLEMS and said[2] == "3"
    assert (out / "summary.json").exists()
