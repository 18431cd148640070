"""The course exercises (tests/exercises.py, tests/EXERCISES.md): the student copy still runs, each
exercise's tests fail on its holes, and the same tests pass on the reference."""
from pathlib import Path

import exercises
from exercises import CONTROLS, EXERCISES

from conftest import LANE_ENV, ROOT, command, later, ran


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


STUDENT: dict = {}  # the student copy's tests and --help, started as the session begins


def start_student_copy(root: Path):
    """Every hole made in a copy; each exercise's tests and the controls run on it, and its --help,
    in conftest.later's lane."""
    if STUDENT:
        return

    def started():
        copy = exercises.make(root / "student", list(EXERCISES))
        tests = [test for e in EXERCISES for test in e.tests]
        outcomes = exercises.run_tests(copy, [*tests, *CONTROLS], LANE_ENV)
        (logs := root / "logs").mkdir()
        return outcomes, ran(command(["es_grpo.py", "--help"], copy.parent, logs, PYTHONPATH=""),
                             logs)
    STUDENT.update(done=later(started))


def test_every_exercise_fails_on_the_student_copy_and_passes_on_the_reference(tmp_path, request):
    """Every hole made: each exercise's tests fail, each named with the hole's message; the rest of
    the copy runs (the controls), and `python es_grpo.py` runs from the copy's folder on its own."""
    start_student_copy(tmp_path)  # if the session did not start it
    outcomes, alone = STUDENT["done"].result()
    tests = [test for e in EXERCISES for test in e.tests]
    for exercise in EXERCISES:
        results = exercises.per_exercise(outcomes, exercise)
        assert results and all(o.startswith("failed: ")
                               for _, o in results), (exercise.title, results)
        assert any(f"exercise {exercise.number} (" in o
                   for _, o in results), (exercise.title, results)
    # the copy runs all but its holes
    assert all(outcomes[control] == ["passed"] for control in CONTROLS)
    assert alone.returncode == 0, alone.stderr[-1000:]
    collected = {item.nodeid.split("[")[0] for item in request.session.items}
    if not all(any(node == test or node.startswith(test + "::") for node in collected) for test
               in tests):
        reference = exercises.run_tests(None, tests)  # run alone: check the reference here
        assert all({o for _, o in exercises.per_exercise(reference, e)} == {"passed"}
                   for e in EXERCISES)
    # else these very tests run on the reference in this session of the suite, and fail it if they
    # fail


CHECKED: dict = {}  # `tests/exercises.py check` on one hole, started as the session begins


def start_check(root: Path):
    """`python tests/exercises.py check` on a copy with exercise 1's hole, in conftest.later's
    lane."""
    if CHECKED:
        return

    def started():
        copy = exercises.make(root / "student", [EXERCISES[0]])
        argv = [str(ROOT / "tests" / "exercises.py"), "check", str(copy), "--only", "1"]
        return copy, ran(command(argv, ROOT, root), root)
    CHECKED.update(done=later(started))


def test_check_names_each_failing_test_with_its_assertion_and_the_command_behind_it(tmp_path):
    """One exercise's hole: `check` prints the exercise's score, each failing test's id with its
    assertion's first line, and the pytest command that shows the rest; it exits 1."""
    start_check(tmp_path)  # if the session did not start it
    copy, checked = CHECKED["done"].result()
    assert checked.returncode == 1, checked.stderr[-2000:]
    said = checked.stdout.splitlines()
    assert (said[0].startswith("exercise 1 (the unbiased Pass@k estimator): 0/")
            and said[0].endswith("not yet"))
    failing = [line for line in said if line.startswith("  tests/test_pass_at_k.py::")]
    assert failing and all(" failed: " in line and "NotImplementedError" in line for line
                           in failing)
    assert said[-1].startswith(f"the tests, with their full output: ES_GRPO_FILE={copy.resolve()} "
                               f"-m pytest -q")
