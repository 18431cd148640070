"""The course exercises (tests/exercises.py, tests/EXERCISES.md): the handout holds no answer and
runs alone wherever it is moved, each exercise's tests fail on its holes, a hole filled from the
reference passes its exercise, and the same tests pass on the reference."""
import ast
import importlib.util
import shutil
import sys
import textwrap
from pathlib import Path

import exercises
import pytest
import torch
from exercises import COINCIDENCES, CONTROLS, EXERCISES

from conftest import ROOT, command, in_process, later, ran
from scale import es

REFERENCE = (ROOT / "es_grpo.py").read_text()


def test_a_hole_keeps_the_contract_and_only_the_chosen_functions_change():
    first = exercises.with_holes(REFERENCE, [EXERCISES[0]])
    before, after = (exercises.functions_of(ast.parse(source)) for source in (REFERENCE, first))
    assert set(before) == set(after)
    assert {name for name in before if ast.dump(before[name]) != ast.dump(after[name])} == {
        "pass_at_k"}
    hole = after["pass_at_k"]
    assert ast.get_docstring(hole) == ast.get_docstring(before["pass_at_k"])  # the contract
    assert [type(s) for s in exercises.body_of(hole)] == [ast.Raise]
    assert "exercise 1 (the unbiased Pass@k estimator)" in ast.unparse(hole)
    holed = exercises.functions_of(ast.parse(exercises.with_holes(REFERENCE, list(EXERCISES))))
    raised = {name: node.body[-1].exc for name, node in holed.items()
              if isinstance(node.body[-1], ast.Raise) and isinstance(node.body[-1].exc, ast.Call)}
    assert {name for name, call in raised.items() if ast.unparse(call.func) == "NotImplementedError"
            and str(call.args[0].value).startswith("exercise ")} == {
        name for e in EXERCISES for name in e.functions}


def reference_body(name: str) -> str:
    """The reference's body of function `name`, after its docstring, dedented."""
    node = exercises.functions_of(ast.parse(REFERENCE))[name]
    first = exercises.body_of(node)[0].lineno
    return textwrap.dedent("\n".join(REFERENCE.splitlines()[first - 1:node.end_lineno]))


def test_the_handout_holds_no_answer_no_link_and_never_replaces_a_student_s_work(tmp_path):
    """Every file of the handout is read: none holds a statement of a hole's body beyond the
    listed coincidences (one each), a body planted in a document or in bytecode is found, and a
    second `make` into the folder is refused, the student's file kept."""
    out = tmp_path / "handout"
    exercises.make(out, list(EXERCISES))
    made = list(out.rglob("*"))
    assert not [path for path in made if path.is_symlink()]
    assert not [path for path in made if {".git", "__pycache__"} & set(path.parts)]
    assert (sorted(path.relative_to(out) for path in made if path.is_file())
            == sorted(exercises.project_files(out)))
    assert (out / "tiny_model" / "model.safetensors").stat().st_size > 1_000_000
    held = exercises.holdings(out, list(EXERCISES))
    assert exercises.leaks(out, list(EXERCISES)) == []
    assert {key: held.get(key) for key in COINCIDENCES} == dict.fromkeys(COINCIDENCES, 1)
    (out / "docs" / "planted.md").write_text(f"```\n{reference_body('pass_at_k')}\n```\n")
    (out / "tests" / "__pycache__").mkdir()
    (out / "tests" / "__pycache__" / "x.pyc").write_bytes(reference_body("js_succ").encode())
    assert exercises.leaks(out, list(EXERCISES)) == ["docs/planted.md: pass_at_k",
                                                     "tests/__pycache__/x.pyc: js_succ"]
    student = (out / "es_grpo.py").read_text()
    again = in_process(exercises.main, "make", "--out", str(out))
    assert again.returncode == 2 and str(out) in again.stderr and len(
        again.stderr.splitlines()) == 1
    assert (out / "es_grpo.py").read_text() == student
    assert in_process(exercises.main, "check", "--only", "13").returncode == 2


def test_the_handout_s_copy_of_es_update_calls_the_student_s_and_steps_the_same(tmp_path,
                                                                              monkeypatch):
    """scale/es.py's Update.redrawn, in the handout, calls es_grpo.es_update: the same
    master as the reference's, bit for bit; with another noise source it names exercise 5."""
    exercises.make(tmp_path / "handout", [EXERCISES[4]])
    spec = importlib.util.spec_from_file_location("handout_es",
                                                  tmp_path / "handout" / "scale" / "es.py")
    handout = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "handout_es", handout)  # its dataclasses look it up
    spec.loader.exec_module(handout)
    seeds, z = [3, -3, 5], torch.tensor([1.0, -0.5, 0.25])
    masters = []
    for update in (es.Update(), handout.Update()):
        params = [torch.zeros(3, 2), torch.zeros(4)]
        master = [torch.full((3, 2), 0.5), torch.full((4,), -1.0)]
        update.redrawn(params, master, seeds, z, 0.1, None)
        masters.append(master)
    assert all(torch.equal(a, b) for a, b in zip(*masters))
    with pytest.raises(NotImplementedError, match="exercise 5"):
        handout.Update(es.NoiseTable()).redrawn([], [], seeds, z, 0.1, None)


STUDENT: dict = {}  # the moved handout's check and --help, started as the session begins


def start_student_copy(root: Path):
    """A handout with every hole, moved after `make`: `python tests/exercises.py check` and
    `python es_grpo.py --help` run in it, in conftest.later's lane."""
    if STUDENT:
        return

    def started():
        exercises.make(root / "made", list(EXERCISES))
        (root / "elsewhere").mkdir()
        moved = Path(shutil.move(root / "made", root / "elsewhere" / "handout"))
        runs = []
        for name, argv in (("check", ["tests/exercises.py", "check"]),
                           ("help", ["es_grpo.py", "--help"])):
            (logs := root / name).mkdir()
            runs.append(ran(command(argv, moved, logs, PYTHONPATH="", ES_GRPO_FILE=""), logs))
        return moved, *runs
    STUDENT.update(done=later(started))


def scores(said: list[str]) -> dict[str, list[str]]:
    """{a score line of `check`: the failing cases' lines below it}."""
    found: dict[str, list[str]] = {}
    for line in said:
        if line.startswith("  "):
            found[list(found)[-1]].append(line)
        elif ": " in line and " tests pass: " in line:
            found[line] = []
    return found


def test_every_exercise_fails_on_the_student_copy_and_passes_on_the_reference(tmp_path, request):
    """In a handout moved after `make`, `check` scores each exercise 0 of all its cases (as many as
    `list` counts), names each failing case with its assertion's first line, one of them the hole's
    message, and the pytest command behind it, in the handout; the rest of the copy runs (the
    controls), and `python es_grpo.py` runs there on its own. Nothing names this checkout."""
    start_student_copy(tmp_path)  # if the session did not start it
    moved, checked, alone = STUDENT["done"].result()
    assert checked.returncode == 1, checked.stderr[-2000:]
    said = checked.stdout.splitlines()
    found = scores(said)
    for exercise in EXERCISES[:6]:
        line = next(line for line in found if line.startswith(f"exercise {exercise.number} ("))
        assert line.endswith(f": 0/{exercises.cases(exercise)} tests pass: not yet"), line
        failing = found[line]
        assert len(failing) == exercises.cases(exercise) and all(
            " failed: NotImplementedError: exercise " in case for case in failing), failing
        assert any(f"exercise {exercise.number} (" in case for case in failing), failing
    controls = len(CONTROLS)
    assert (f"the rest of es_grpo.py (data, decoding): {controls}/{controls} tests pass: done"
            in found)
    assert all(f"exercise {e.number} ({e.title}): an experiment" in checked.stdout
               for e in EXERCISES[6:])
    assert said[-1].startswith(f"the tests, with their full output, from {moved}: "
                               f"ES_GRPO_FILE={moved / 'es_grpo.py'} python -m pytest -q")
    assert str(ROOT) not in checked.stdout + checked.stderr
    assert alone.returncode == 0, alone.stderr[-1000:]
    tests = [test for e in EXERCISES for test in e.tests]
    collected = {item.nodeid.split("[")[0] for item in request.session.items}
    if not all(any(node == test or node.startswith(test + "::") for node in collected) for test
               in tests):
        reference = exercises.run_tests(None, tests)  # run alone: check the reference here
        assert all({o for _, o in exercises.per_exercise(reference, e)} == {"passed"}
                   for e in EXERCISES if e.tests)
    # else these very tests run on the reference in this session of the suite, and fail it if they
    # fail


FILLED: dict = {}  # `check --only 1` in a handout whose exercise 1 is filled from the reference


def start_filled_check(root: Path):
    """A handout with every hole, then pass_at_k's body copied in from the reference: `python
    tests/exercises.py check --only 1` in it, in conftest.later's lane."""
    if FILLED:
        return

    def started():
        copy = exercises.make(root / "handout", list(EXERCISES))
        copy.write_text(exercises.with_bodies(copy.read_text(),
                                              {"pass_at_k": reference_body("pass_at_k")}, "copy"))
        argv = ["tests/exercises.py", "check", "--only", "1"]
        return ran(command(argv, copy.parent, root, PYTHONPATH="", ES_GRPO_FILE=""), root)
    FILLED.update(done=later(started))


def test_exercise_1_filled_from_the_reference_passes_check(tmp_path):
    """Filling one hole in from the reference is what passes its exercise: every case, exit 0."""
    start_filled_check(tmp_path)  # if the session did not start it
    checked = FILLED["done"].result()
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    cases = exercises.cases(EXERCISES[0])
    assert checked.stdout.splitlines()[0] == (f"exercise 1 (the unbiased Pass@k estimator): "
                                              f"{cases}/{cases} tests pass: done")
