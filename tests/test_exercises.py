"""The course exercises (tests/exercises.py, tests/EXERCISES.md): the student copy still runs, each
exercise's tests fail on its holes, and the same tests pass on the reference."""
import os
import subprocess
import sys

import exercises
from exercises import CONTROLS, EXERCISES

from conftest import ROOT


def test_a_hole_keeps_the_contract_and_only_the_chosen_functions_change():
    source = (ROOT / "es_grpo.py").read_text()
    first = exercises.with_holes(source, [EXERCISES[0]])
    compile(first, "es_grpo.py", "exec")
    assert (first.count("raise NotImplementedError(")
            == source.count("raise NotImplementedError(") + 1)
    assert "exercise 1 (" in first
    # the docstring stays: the contract
    assert '"""Unbiased Pass@k from n samples with c correct' in first
    assert "np.prod(1.0 - k / np.arange" not in first and "np.prod(1.0 - k / np.arange" in source
    every = exercises.with_holes(source, list(EXERCISES))
    assert (every.count("raise NotImplementedError('exercise")
            + every.count('raise NotImplementedError("exercise')
            == sum(len(e.functions) for e in EXERCISES))


def test_every_exercise_fails_on_the_student_copy_and_passes_on_the_reference(tmp_path, request):
    """Every hole made: each exercise's tests fail, each named with the hole's message; the rest of
    the copy runs (the controls), and `python es_grpo.py` runs from the copy's folder on its own."""
    copy = exercises.make(tmp_path / "student", list(EXERCISES))
    tests = [test for e in EXERCISES for test in e.tests]
    outcomes = exercises.run_tests(copy, [*tests, *CONTROLS])
    for exercise in EXERCISES:
        results = exercises.per_exercise(outcomes, exercise)
        assert results and all(o.startswith("failed: ")
                               for _, o in results), (exercise.title, results)
        assert any(f"exercise {exercise.number} (" in o
                   for _, o in results), (exercise.title, results)
    # the copy runs all but its holes
    assert all(outcomes[control] == ["passed"] for control in CONTROLS)
    alone = subprocess.run([sys.executable, "es_grpo.py", "--help"], cwd=copy.parent,
                           capture_output=True,
                           text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert alone.returncode == 0, alone.stderr[-1000:]
    collected = {item.nodeid.split("[")[0] for item in request.session.items}
    if not all(any(node == test or node.startswith(test + "::") for node in collected) for test
               in tests):
        reference = exercises.run_tests(None, tests)  # run alone: check the reference here
        assert all({o for _, o in exercises.per_exercise(reference, e)} == {"passed"}
                   for e in EXERCISES)
    # else these very tests run on the reference in this session of the suite, and fail it if they
    # fail


def test_check_names_each_failing_test_with_its_assertion_and_the_command_behind_it(
        tmp_path, capsys):
    """One exercise's hole: `check` prints the exercise's score, each failing test's id with its
    assertion's first line, and the pytest command that shows the rest."""
    copy = exercises.make(tmp_path / "student", [EXERCISES[0]])
    assert not exercises.check(copy, [EXERCISES[0]])
    said = capsys.readouterr().out.splitlines()
    assert (said[0].startswith("exercise 1 (the unbiased Pass@k estimator): 0/")
            and said[0].endswith("not yet"))
    failing = [line for line in said if line.startswith("  tests/test_pass_at_k.py::")]
    assert failing and all(" failed: " in line and "NotImplementedError" in line for line
                           in failing)
    assert said[-1].startswith(f"the tests, with their full output: ES_GRPO_FILE={copy.resolve()} "
                               f"-m pytest -q")
