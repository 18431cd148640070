"""Course exercises on es_grpo.py: a handout with holes that a student works in alone, and a check
of their work (tests/EXERCISES.md says what each exercise asks and what a student should see).

    python tests/exercises.py list                          # every exercise: minutes, tests
    python tests/exercises.py make --out student            # student/: the project, all holes
    python tests/exercises.py make --out student-1 --only 1 # only these exercises' holes
    cd student && python tests/exercises.py check           # each exercise's tests, on student/
    python tests/exercises.py check student/es_grpo.py      # the same, from this checkout

`make` copies the project (its tracked files; no git history, no bytecode, no links) and replaces
each hole's body by `raise NotImplementedError("exercise N: ...")`, keeping the signature and the
docstring (the contract): the copy still imports and runs everything else. A function of the
machinery that repeats a hole's arithmetic (a Copy) gets a body that calls the student's function
instead. Then `make` reads back every file it wrote and stops if one still holds a statement of a
hole's reference body. `check` runs the project's own tests on a copy (ES_GRPO_FILE tells
tests/conftest.py which file to import as es_grpo), from the folder this script lies in: they check
behaviour, never source, so passing them shows nothing of the reference's code.
"""
from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# not the project's, where a folder is no git checkout: caches, and what runs write at the root
UNCOPIED_PARTS = {".git", "__pycache__", ".pytest_cache", ".ruff_cache"}
UNCOPIED_TOP = {"runs", "evals", "models", "student"}
# a hole's statement shorter than this (spaces aside) is any code's: `return 0.0`,
# `set_weights(params, master)`
SHORTEST_TELLING = 28


@dataclass(frozen=True)
class Copy:
    """A function of the machinery that repeats a hole's arithmetic: the handout replaces its body
    (after the docstring) by `instead`, which calls the student's function."""
    path: str
    function: str  # a module's function, or Class.method
    instead: str


@dataclass(frozen=True)
class Exercise:
    number: int
    title: str
    # the machine's minutes on a 2-core CPU: `check`'s for a hole, the commands' for an
    # experiment (tests/EXERCISES.md says how each was measured)
    minutes: float
    functions: tuple[str, ...] = ()  # the holes, in es_grpo.py; none: an experiment
    # pytest node ids (a file, or file::function): they check the holes' behaviour
    tests: tuple[str, ...] = ()
    copies: tuple[Copy, ...] = ()


# scale/es.py's update where eps are not summed as drawn: es_update's arithmetic, measuring its
# step; the handout's calls the student's es_update (the same arithmetic, bit for bit)
REDRAWN = Copy("scale/es.py", "Update.redrawn", """\
if self.source is not PER_TENSOR:
    raise NotImplementedError("exercise 5: the handout's es_update draws noise() only")
self.step_norm = None  # es_grpo.es_update does not measure its step
es_grpo.es_update(params, master, seeds, z, alpha, drawn)""")
EXERCISES = (
    Exercise(1, "the unbiased Pass@k estimator", 0.1, ("pass_at_k",),
             ("tests/test_pass_at_k.py::test_pass_at_k_matches_enumeration_of_subsets",
              "tests/test_pass_at_k.py::test_pass_at_k_large_n_is_stable_and_monotone",
              "tests/test_pass_at_k.py::test_pass_at_k_rejects_impossible_arguments")),
    Exercise(2, "the Countdown verifier", 0.1, ("countdown_reward",),
             ("tests/test_verifier.py::test_countdown_reward",)),
    Exercise(3, "GRPO's group advantages and clipped loss", 0.1,
             ("group_advantages", "grpo_loss"),
             ("tests/test_grpo.py::test_group_advantages_with_and_without_std",
              "tests/test_grpo.py::test_grpo_loss_equals_hand_computation",
              "tests/test_grpo.py::test_kl_is_zero_when_policy_equals_reference")),
    Exercise(4, "ES noise from a seed, mirrored for antithetic sampling", 0.1, ("noise",),
             ("tests/test_es.py::test_noise_is_regenerable_and_independent_per_tensor",
              "tests/test_es.py::test_perturb_then_restore_gives_identical_weights",
              "tests/test_es.py::test_a_negative_seed_mirrors_the_noise")),
    Exercise(5, "the ES update with z-scored rewards", 0.1, ("zscore", "es_update"),
             ("tests/test_es.py::test_es_update_equals_direct_computation",
              "tests/test_es.py::test_antithetic_pairs_update_by_reward_differences",
              "tests/test_es.py::test_equal_rewards_give_zero_update_and_no_nan",
              "tests/test_es.py::test_es_without_zscore_steps_along_centred_raw_rewards"),
             (REDRAWN,)),
    Exercise(6, "JS_succ, the population's verifier-projected diversity", 0.1, ("js_succ",),
             ("tests/test_es.py::test_js_succ_on_hand_built_success_rates",
              "tests/test_diversity.py::"
              "test_js_pol_estimator_matches_exact_value_and_bounds_js_succ")),
    Exercise(7, "evaluation temperature", 0.5),
    Exercise(8, "GRPO's learning rate and the speed of entropy collapse", 4),
    Exercise(9, "z-scoring off", 6),
    Exercise(10, "sigma against JS diversity and Pass@K", 0.5),
    Exercise(11, "population size at equal compute", 4),
    Exercise(12, "the GRPO->ES schedule", 225),
)
# tests of none of the holes: the copy must still import and run the rest (data, model, decoding)
CONTROLS = ("tests/test_data.py::test_loads_countdown_and_math_files_recognising_the_task",
            "tests/test_rollout.py::test_rollout_logprobs_match_a_full_forward_pass")
# (file, hole): the file holds one statement of the hole's body, for a purpose of its own
COINCIDENCES = {
    ("scale/es.py", "zscore"): "affine's test for equal rewards, zscore's guard",
    ("scale/es.py", "noise"): "NoiseTable's mirror, the contract's -seed gives -eps",
    ("scale/es.py", "es_update"): "Update's master += alpha / N * (a A + b B)",
}


def refuse(message: str):
    """Bad input: one line naming it, exit 2."""
    print(f"tests/exercises.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def chosen(only: str) -> list[Exercise]:
    numbers = {e.number for e in EXERCISES}
    try:
        asked = {int(n) for n in only.split(",")} if only else numbers
    except ValueError:
        refuse(f"--only {only!r}: give exercise numbers, e.g. 1,4")
    if asked - numbers:
        refuse(f"--only: no exercise {sorted(asked - numbers)} (they are 1 to {len(EXERCISES)})")
    return [e for e in EXERCISES if e.number in asked]


def functions_of(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """A module's functions and its classes' methods, by name (Class.method)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            found |= {f"{node.name}.{f.name}": f for f in node.body
                      if isinstance(f, ast.FunctionDef)}
    return found


def body_of(node: ast.FunctionDef) -> list[ast.stmt]:
    """A function's statements after its docstring."""
    first = node.body[0]
    documented = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                  and isinstance(first.value.value, str))
    if len(node.body) <= documented:
        raise SystemExit(f"{node.name}: nothing to make a hole of")
    return node.body[int(documented):]


def with_bodies(source: str, bodies: dict[str, str], where: str) -> str:
    """source with each named function's body (after its docstring) replaced by bodies[name]."""
    lines = source.splitlines(keepends=True)
    found = functions_of(ast.parse(source))
    if set(bodies) - set(found):
        raise SystemExit(f"{where} has no function {sorted(set(bodies) - set(found))}: update "
                         f"tests/exercises.py")
    for name in sorted(bodies, key=lambda n: -found[n].lineno):  # from the bottom: lines stay
        body = body_of(found[name])
        indent = " " * body[0].col_offset
        lines[body[0].lineno - 1:found[name].end_lineno] = [
            f"{indent}{line}\n" for line in bodies[name].splitlines()]
    return "".join(lines)


def with_holes(source: str, exercises: list[Exercise]) -> str:
    """es_grpo.py's source with each exercise function's body replaced by a NotImplementedError."""
    def hole(exercise: Exercise, name: str) -> str:
        message = (f"exercise {exercise.number} ({exercise.title}): implement {name}; see "
                   f"tests/EXERCISES.md")
        return f"raise NotImplementedError({message!r})"
    return with_bodies(source, {name: hole(e, name) for e in exercises for name in e.functions},
                       "es_grpo.py")


def project_files(out: Path) -> list[Path]:
    """The project's files, relative to ROOT: git's tracked ones in a checkout, else every file but
    caches and runs; none inside out (the folder being made)."""
    names = None
    if (ROOT / ".git").exists():
        try:
            listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"],
                                    capture_output=True, text=True, check=True)
            names = [Path(name) for name in listed.stdout.split("\0") if name]
        except (OSError, subprocess.CalledProcessError):
            names = None  # no git here: the folder as it is
    if names is None:
        names = [path.relative_to(ROOT) for path in ROOT.rglob("*")]
        names = [name for name in names if not UNCOPIED_PARTS & set(name.parts)
                 and name.parts[0] not in UNCOPIED_TOP and name.suffix != ".pyc"]
    inside = out.resolve()
    return [name for name in names if (ROOT / name).is_file()
            and not (ROOT / name).resolve().is_relative_to(inside)]


def make(out: Path, exercises: list[Exercise]) -> Path:
    """out/: the project, each exercise's holes made in its es_grpo.py and its copies replaced, so
    that `python es_grpo.py` and `python tests/exercises.py check` run in out/ alone; refused where
    out/ exists with files (a student's work is never overwritten). Its es_grpo.py."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        refuse(f"--out {out}: exists and is not an empty folder; name a new one")
    files = project_files(out)
    for name in files:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, out / name)  # a link's target, copied: no link out of out/
    copy = out / "es_grpo.py"
    copy.write_text(with_holes((ROOT / "es_grpo.py").read_text(), exercises))
    for path in sorted({c.path for e in exercises for c in e.copies}):
        bodies = {c.function: c.instead for e in exercises for c in e.copies if c.path == path}
        (out / path).write_text(with_bodies((out / path).read_text(), bodies, path))
    held = leaks(out, exercises)
    if held:
        raise SystemExit(f"{out}: still holds the reference's {held[:5]}: add a Copy, or a "
                         f"COINCIDENCES entry, in tests/exercises.py")
    return copy


def telling_statements(source: str, node: ast.FunctionDef) -> set[str]:
    """The statements of a function's body (a compound one: its first line), spaces removed,
    of at least SHORTEST_TELLING characters."""
    lines, told = source.splitlines(), set()
    for statement in [s for top in body_of(node) for s in ast.walk(top)
                      if isinstance(s, ast.stmt)]:
        text = (lines[statement.lineno - 1].split("#")[0] if hasattr(statement, "body")
                else ast.get_source_segment(source, statement))
        told |= {"".join(text.split())} if len("".join(text.split())) >= SHORTEST_TELLING else set()
    return told


def holdings(out: Path, exercises: list[Exercise]) -> dict[tuple[str, str], int]:
    """{(file, hole): how many statements of the hole's reference body (this checkout's es_grpo.py)
    the file holds} for each file under out, bytecode and data included, and each hole, where the
    file holds any; statements that out/es_grpo.py holds do not count (they are not the answer)."""
    source = (ROOT / "es_grpo.py").read_text()
    found = functions_of(ast.parse(source))
    holed = "".join((out / "es_grpo.py").read_text().split())
    telling = {name: {s for s in telling_statements(source, found[name]) if s not in holed}
               for e in exercises for name in e.functions}
    held = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file() and not p.is_symlink()):
        text = b"".join(path.read_bytes().split())
        for hole, statements in telling.items():
            count = sum(s.encode() in text for s in statements)
            held |= {(path.relative_to(out).as_posix(), hole): count} if count else {}
    return held


def leaks(out: Path, exercises: list[Exercise]) -> list[str]:
    """'FILE: HOLE' for each file under out that holds a statement of a hole's reference body,
    beyond what COINCIDENCES allows (one statement)."""
    return [f"{name}: {hole}" for (name, hole), count in holdings(out, exercises).items()
            if count > ((name, hole) in COINCIDENCES)]


def test_function(node_id: str) -> ast.FunctionDef:
    """The test function a node id (file::function) names, from its file's source."""
    path, name = node_id.split("::")
    found = functions_of(ast.parse((ROOT / path).read_text()))
    if name not in found:
        raise SystemExit(f"{node_id}: no such test: update tests/exercises.py")
    return found[name]


def cases(exercise: Exercise) -> int:
    """How many cases its tests run: a test parametrised over a list written in its decorator
    runs one per item."""
    def count(test: ast.FunctionDef) -> int:
        lists = [d.args[1] for d in test.decorator_list if isinstance(d, ast.Call)
                 and ast.unparse(d.func).endswith("parametrize") and len(d.args) > 1]
        if any(not isinstance(values, (ast.List, ast.Tuple)) for values in lists):
            raise SystemExit(f"{test.name}: parametrised by a name: count its cases here")
        product = 1
        for values in lists:
            product *= len(values.elts)
        return product
    return sum(count(test_function(node_id)) for node_id in exercise.tests)


def pytest_command(node_ids: list[str]) -> list[str]:
    """What `check` runs, from ROOT, with ES_GRPO_FILE=the copy in the environment."""
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *node_ids]


def run_tests(copy: Path | None, node_ids: list[str],
              environ: dict | None = None) -> dict[str, list[str]]:
    """{node id without parameters: outcomes ("passed", "failed", "skipped"; a failure as "failed:
    the assertion's first line")} of the tests, run from ROOT in a fresh interpreter on `copy` as
    es_grpo (None: ROOT's es_grpo.py), in `environ` (None: this process's environment)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "junit.xml"
        env = {name: value for name, value in (environ or os.environ).items()
               if name != "ES_GRPO_FILE"}
        if copy is not None:
            env["ES_GRPO_FILE"] = str(Path(copy).resolve())
        result = subprocess.run([*pytest_command(node_ids), f"--junitxml={report}"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        # e.g. the copy does not import
        if not report.exists() or "<testcase" not in report.read_text():
            said = (result.stdout + result.stderr).strip().splitlines()
            raise SystemExit(f"the tests could not run on {copy or 'es_grpo.py'}:\n"
                             + "\n".join(said[-15:]))
        outcomes: dict[str, list[str]] = {}
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            path = case.get("classname", "").replace(".", "/") + ".py"
            outcomes.setdefault(f"{path}::{case.get('name', '')}", []).append(outcome_of(case))
        return outcomes


def outcome_of(case: ElementTree.Element) -> str:
    failure = case.find("failure") if case.find("failure") is not None else case.find("error")
    if failure is not None:
        said = (failure.get("message") or "").strip().splitlines()[:1]
        return f"failed: {said[0] if said else 'see the pytest command'}"
    return "skipped" if case.find("skipped") is not None else "passed"


def per_exercise(outcomes: dict[str, list[str]], tests) -> list[tuple[str, str]]:
    """(test id, outcome) of each of these tests (an Exercise: its tests; a parametrised test: each
    case)."""
    tests = tests.tests if isinstance(tests, Exercise) else tests

    def ours(node):
        bare = node.split("[")[0]
        return any(bare == test or bare.startswith(test + "::") or bare.split("::")[0] == test
                   for test in tests)
    return [(node, outcome) for node, results in outcomes.items() if ours(node)
            for outcome in results]


def report(name: str, results: list[tuple[str, str]]) -> bool:
    """Prints a score line, and each failing test's id with its assertion's first line."""
    passed = sum(outcome == "passed" for _, outcome in results)
    done = bool(results) and passed == len(results)
    print(f"{name}: {passed}/{len(results)} tests pass: {'done' if done else 'not yet'}")
    for node, outcome in results:
        if outcome.startswith("failed"):
            print(f"  {node} {outcome}")
    return done


def check(copy: Path, exercises: list[Exercise]) -> bool:
    """Each exercise's tests on copy, and the controls (the rest of es_grpo.py); an experiment
    has none."""
    tests = [test for e in exercises for test in e.tests]
    outcomes = run_tests(copy, [*tests, *CONTROLS]) if tests else {}
    ok = True
    for e in exercises:
        if not e.tests:
            print(f"exercise {e.number} ({e.title}): an experiment, nothing to check (its "
                  f"command: tests/EXERCISES.md)")
            continue
        ok &= report(f"exercise {e.number} ({e.title})", per_exercise(outcomes, e))
    if tests:
        ok &= report("the rest of es_grpo.py (data, decoding)", per_exercise(outcomes, CONTROLS))
    if not ok:
        print(f"\nthe tests, with their full output, from {ROOT}: "
              f"ES_GRPO_FILE={Path(copy).resolve()} python "
              + " ".join(pytest_command([*tests, *CONTROLS])[1:]))
    return ok


def listed(e: Exercise) -> str:
    if not e.tests:
        return f"{e.number}. {e.title}: an experiment, about {e.minutes:g} min on 2 cores"
    tests = f"{len(e.tests)} test{'s' * (len(e.tests) != 1)}, {cases(e)} cases"
    return (f"{e.number}. {e.title}: {', '.join(e.functions)}, about {e.minutes:g} min to check"
            f"\n   {tests}: {' '.join(e.tests)}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tests/exercises.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every exercise: its holes, its tests, its minutes")
    maker = commands.add_parser("make", help="a handout: the project with the exercises' holes")
    maker.add_argument("--out", required=True, help="a new folder for the handout")
    maker.add_argument("--only", default="", help="comma-separated exercise numbers (default: all)")
    checker = commands.add_parser("check", help="run each exercise's tests on a copy")
    checker.add_argument("file", nargs="?", default=str(ROOT / "es_grpo.py"),
                         help="the student's es_grpo.py (default: %(default)s)")
    checker.add_argument("--only", default="",
                         help="comma-separated exercise numbers (default: all)")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(listed(e) for e in EXERCISES))
    elif args.command == "make":
        copy = make(Path(args.out), chosen(args.only))
        print(f"wrote {copy.parent}: a student checks their work there with  python "
              f"tests/exercises.py check")
    elif not Path(args.file).is_file():
        refuse(f"{args.file}: no such file")
    elif not check(Path(args.file), chosen(args.only)):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
