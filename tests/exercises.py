"""Course exercises on es_grpo.py: hand out a copy with holes, and let students check their own work
(tests/EXERCISES.md says what each exercise asks and what a student should see).

    python tests/exercises.py list                         # the exercises and the tests of each
    python tests/exercises.py make --out student           # student/es_grpo.py, every hole made
    python tests/exercises.py make --out student --only 1,4  # only these exercises' holes
    python tests/exercises.py check student/es_grpo.py     # each exercise's tests, run on the copy

A hole keeps the function's signature and docstring (its contract) and replaces its body by `raise
NotImplementedError("exercise N: ...")`; the copy still imports and runs everything else. `check`
runs the project's own tests on the copy (ES_GRPO_FILE tells tests/conftest.py which file to import
as es_grpo): they check behaviour, never source, so passing them shows nothing of the reference's
code.
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


@dataclass(frozen=True)
class Exercise:
    number: int
    title: str
    functions: tuple[str, ...]  # the holes, in es_grpo.py
    # pytest node ids (a file, or file::function): they check the holes' behaviour
    tests: tuple[str, ...]


EXERCISES = (
    Exercise(1, "the unbiased Pass@k estimator", ("pass_at_k",),
             ("tests/test_pass_at_k.py::test_pass_at_k_matches_enumeration_of_subsets",
              "tests/test_pass_at_k.py::test_pass_at_k_large_n_is_stable_and_monotone",
              "tests/test_pass_at_k.py::test_pass_at_k_rejects_impossible_arguments")),
    Exercise(2, "the Countdown verifier", ("countdown_reward",),
             ("tests/test_verifier.py::test_countdown_reward",)),
    Exercise(3, "GRPO's group advantages and clipped loss", ("group_advantages", "grpo_loss"),
             ("tests/test_grpo.py::test_group_advantages_with_and_without_std",
              "tests/test_grpo.py::test_grpo_loss_equals_hand_computation",
              "tests/test_grpo.py::test_kl_is_zero_when_policy_equals_reference")),
    Exercise(4, "ES noise from a seed, mirrored for antithetic sampling", ("noise",),
             ("tests/test_es.py::test_noise_is_regenerable_and_independent_per_tensor",
              "tests/test_es.py::test_perturb_then_restore_gives_identical_weights",
              "tests/test_es.py::test_a_negative_seed_mirrors_the_noise")),
    Exercise(5, "the ES update with z-scored rewards", ("zscore", "es_update"),
             ("tests/test_es.py::test_es_update_equals_direct_computation",
              "tests/test_es.py::test_antithetic_pairs_update_by_reward_differences",
              "tests/test_es.py::test_equal_rewards_give_zero_update_and_no_nan",
              "tests/test_es.py::test_es_without_zscore_steps_along_centred_raw_rewards")),
    Exercise(6, "JS_succ, the population's verifier-projected diversity", ("js_succ",),
             ("tests/test_es.py::test_js_succ_on_hand_built_success_rates",
              "tests/test_diversity.py::"
              "test_js_pol_estimator_matches_exact_value_and_bounds_js_succ")),
)
# tests of none of the holes: the copy must still import and run the rest (data, model, decoding)
CONTROLS = ("tests/test_data.py::test_loads_countdown_and_math_files_recognising_the_task",
            "tests/test_rollout.py::test_rollout_logprobs_match_a_full_forward_pass")


def chosen(only: str) -> list[Exercise]:
    numbers = {int(n) for n in only.split(",")} if only else {e.number for e in EXERCISES}
    unknown = numbers - {e.number for e in EXERCISES}
    if unknown:
        raise SystemExit(f"--only: no exercise {sorted(unknown)} (there are {len(EXERCISES)})")
    return [e for e in EXERCISES if e.number in numbers]


def with_holes(source: str, exercises: list[Exercise]) -> str:
    """source with each exercise function's body (after its docstring) replaced by a
    NotImplementedError."""
    lines = source.splitlines(keepends=True)
    holes = {name: e for e in exercises for name in e.functions}
    found = {node.name: node for node in ast.parse(source).body
             if isinstance(node, ast.FunctionDef)}
    missing = set(holes) - set(found)
    if missing:
        raise SystemExit(f"es_grpo.py has no function {sorted(missing)}: update tests/exercises.py")
    # from the bottom: line numbers stay valid
    for name in sorted(holes, key=lambda n: -found[n].lineno):
        node, exercise = found[name], holes[name]
        has_docstring = (isinstance(node.body[0], ast.Expr)
                         and isinstance(node.body[0].value, ast.Constant))
        first = (node.body[1 if has_docstring else 0].lineno if len(node.body) > has_docstring
                 else None)
        if first is None:
            raise SystemExit(f"{name}: nothing to make a hole of")
        indent = " " * node.body[0].col_offset
        message = (f"exercise {exercise.number} ({exercise.title}): implement {name}; see "
                   f"tests/EXERCISES.md")
        lines[first - 1:node.end_lineno] = [f"{indent}raise NotImplementedError({message!r})\n"]
    return "".join(lines)


def make(out: Path, exercises: list[Exercise]) -> Path:
    """out/es_grpo.py with the holes, and out/tiny_model beside it (a link to this repository's,
    else a copy), so that `python es_grpo.py` runs from out/ on its own."""
    out.mkdir(parents=True, exist_ok=True)
    copy = out / "es_grpo.py"
    copy.write_text(with_holes((ROOT / "es_grpo.py").read_text(), exercises))
    beside = out / "tiny_model"
    if not beside.exists():
        try:
            beside.symlink_to(ROOT / "tiny_model", target_is_directory=True)
        except OSError:  # no symbolic links here: a copy
            shutil.copytree(ROOT / "tiny_model", beside,
                            ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def pytest_command(copy: Path | None, node_ids: list[str]) -> list[str]:
    """What `check` runs, from the repository's root, with ES_GRPO_FILE=copy in the environment."""
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *node_ids]


def run_tests(copy: Path | None, node_ids: list[str],
              environ: dict | None = None) -> dict[str, list[str]]:
    """{node id without parameters: outcomes ("passed", "failed", "skipped"; a failure as "failed:
    the assertion's first line")} of the tests, run in a fresh interpreter on `copy` as es_grpo
    (None: the reference), in `environ` (None: this process's environment)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "junit.xml"
        env = {name: value for name, value in (environ or os.environ).items()
               if name != "ES_GRPO_FILE"}
        if copy is not None:
            env["ES_GRPO_FILE"] = str(Path(copy).resolve())
        result = subprocess.run([*pytest_command(copy, node_ids), f"--junitxml={report}"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        # e.g. the copy does not import
        if not report.exists() or "<testcase" not in report.read_text():
            said = (result.stdout + result.stderr).strip().splitlines()
            raise SystemExit(f"the tests could not run on {copy or 'es_grpo.py'}:\n"
                             + "\n".join(said[-15:]))
        outcomes: dict[str, list[str]] = {}
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            path = case.get("classname", "").replace(".", "/") + ".py"
            failure = (case.find("failure") if case.find("failure") is not None
                       else case.find("error"))
            said = "" if failure is None else (failure.get("message")
                                               or "").strip().splitlines()[:1]
            outcome = (f"failed: {said[0] if said else 'see the pytest command'}" if failure is
                       not None
                       else "skipped" if case.find("skipped") is not None else "passed")
            outcomes.setdefault(f"{path}::{case.get('name', '')}", []).append(outcome)
        return outcomes


def per_exercise(outcomes: dict[str, list[str]], exercise: Exercise) -> list[tuple[str, str]]:
    """(test id, outcome) of each of the exercise's tests (a parametrised test: each case)."""
    def ours(node):
        bare = node.split("[")[0]
        return any(bare == test or bare.startswith(test + "::") or bare.split("::")[0] == test
                   for test in exercise.tests)
    return [(node, outcome) for node, results in outcomes.items() if ours(node)
            for outcome in results]


def check(copy: Path, exercises: list[Exercise]) -> bool:
    tests = [test for e in exercises for test in e.tests]
    outcomes = run_tests(copy, tests)
    ok = True
    for e in exercises:
        results = per_exercise(outcomes, e)
        passed = sum(outcome == "passed" for _, outcome in results)
        ok &= bool(results) and passed == len(results)
        mark = "done" if results and passed == len(results) else "not yet"
        print(f"exercise {e.number} ({e.title}): {passed}/{len(results)} tests pass: {mark}")
        for node, outcome in results:
            if outcome.startswith("failed"):
                print(f"  {node} {outcome}")
    if not ok:
        print(f"\nthe tests, with their full output: ES_GRPO_FILE={Path(copy).resolve()} "
              + " ".join(pytest_command(copy, tests)[1:]))
    return ok


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tests/exercises.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the exercises, their holes and their tests")
    maker = commands.add_parser("make", help="a copy of es_grpo.py with the exercises' holes")
    maker.add_argument("--out", required=True, help="folder for the copy (its es_grpo.py)")
    maker.add_argument("--only", default="", help="comma-separated exercise numbers (default: all)")
    checker = commands.add_parser("check", help="run each exercise's tests on a copy")
    checker.add_argument("file", help="the student's es_grpo.py")
    checker.add_argument("--only", default="",
                         help="comma-separated exercise numbers (default: all)")
    args = parser.parse_args(argv)
    if args.command == "list":
        for e in EXERCISES:
            print(f"{e.number}. {e.title}: {', '.join(e.functions)}\n   tests: {' '.join(e.tests)}")
    elif args.command == "make":
        copy = make(Path(args.out), chosen(args.only))
        print(f"wrote {copy}: check it with  python tests/exercises.py check {copy}")
    elif not check(Path(args.file), chosen(args.only)):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
