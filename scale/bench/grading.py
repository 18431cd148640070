"""The grader's cost (part verifier): seconds per 1,000 completions of each kind, and its share of a
GRPO step and an ES iteration. It times scale.verifier.grade, the grade hook scale/assembly.py gives
every run."""
from __future__ import annotations

import statistics
import time

import es_grpo
from scale import verifier
from scale.bench.harness import es_runner, grpo_runner, timed, tiny_setup


def verifier_corpus(count: int) -> dict[str, list[tuple]]:
    """count (problem, completion) pairs of each kind, half right: Countdown, GSM8K-style (plain and
    boxed numbers against "#### N") and MATH-style (LaTeX against MATH answers, read by
    math-verify)."""
    countdown = es_grpo.generate_problems("countdown", count, seed=3)
    math_answers = [("\\frac{3}{4}", "0.75", "\\frac{4}{3}"), ("(3,2)", "(3, 2)", "(2,3)"),
                    ("[-2,7)", "[-2, 7)", "[-2,7]"), ("5\\sqrt{3}", "5\\sqrt3", "3\\sqrt{5}"),
                    ("\\text{(C)}", "\\text{(C)}", "\\text{(B)}")]
    corpus = {"Countdown": [], "GSM8K-style": [], "MATH-style": []}
    for i in range(count):
        problem, right = countdown[i], i % 2 == 0
        corpus["Countdown"].append(
            (problem, f"<answer>{problem['solution'] if right else '1+2'}</answer>"))
        value = 100 + i
        text = (f"She pays {value // 2} + {value - value // 2} = {value} dollars." if i % 4 < 2 else
                f"So the total is $\\boxed{{{value:,}}}$.")
        corpus["GSM8K-style"].append(
            ({"task": "math", "answer": f"... #### {value if right else value + 1}"}, text))
        reference, good, bad = math_answers[i % len(math_answers)]
        corpus["MATH-style"].append(
            ({"task": "math", "answer": reference},
             f"Hence the answer is $\\boxed{{{good if right else bad}}}$ (step {i})."))
    return corpus


def bench_verifier(repeats: int) -> list[str]:
    """Verifier seconds per 1,000 completions of each kind, and its share of a GRPO step and an ES
    iteration."""
    verifier.MATH_VERIFY.compare("1", "$1$")  # a started worker: its start is once a process
    lines = ["| verifier, per 1,000 completions | seconds |", "|---|---|"]
    for kind, pairs in verifier_corpus(1000).items():
        grade_all = lambda pairs=pairs: [verifier.grade(p, c) for p, c in pairs]  # noqa: E731
        seconds = statistics.median(timed(grade_all) for _ in range(repeats))
        lines.append(f"| {kind} | {seconds:.3f} |")
    model, tokenizer, args, problems = tiny_setup()
    spent = [0.0]

    def timed_grade(problem: dict, completion: str) -> tuple[float, str]:
        """The runs' grade hook (scale.verifier.grade), its seconds added to spent."""
        tick = time.perf_counter()
        result = verifier.grade(problem, completion)
        spent[0] += time.perf_counter() - tick
        return result
    lines += ["",
              "| the verifier's share (tiny default, Countdown) | verifier s | step s | share |",
              "|---|---|---|---|"]
    steps = {"GRPO step": grpo_runner(model, tokenizer, args, problems, grade=timed_grade),
             "ES iteration": es_runner(model, tokenizer, args, problems, grade=timed_grade)}
    for name, step in steps.items():
        step()  # warm-up
        shares = []
        for _ in range(repeats):
            spent[0] = 0.0
            total = timed(step)
            shares.append((spent[0], total))
        grading, total = (statistics.median(x) for x in zip(*shares))
        lines.append(f"| {name} | {grading:.4f} | {total:.3f} | {grading / total:.1%} |")
    return lines
