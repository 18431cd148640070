import builtins
import random
import time

import pytest

from es_grpo import countdown_reward, math_reward, parse_expression


@pytest.mark.parametrize("completion, numbers, target, expected", [
    ("(3+5)*7", [3, 5, 7], 56, 1.0),
    ("7*(5+3)", [3, 5, 7], 56, 1.0),
    (" (3 + 5) * 7 \nmore text", [3, 5, 7], 56, 1.0),
    ("think... <answer>(3+5)*7</answer>", [3, 5, 7], 56, 1.0),
    ("<answer>1+1</answer> then <answer>(3+5)*7</answer>", [3, 5, 7], 56, 1.0),
    ("8/4*2", [8, 4, 2], 4, 1.0),
    ("6/4*2", [6, 4, 2], 3, 1.0),  # exact rationals: 6/4 = 3/2
    ("(3+5)*7", [3, 5, 7], 57, 0.1),  # wrong value
    ("(3+3)*7", [3, 5, 7], 42, 0.1),  # number reused, one missing
    ("3+5", [3, 5, 7], 8, 0.1),  # number missing
    ("(3+5)*7+7", [3, 5, 7], 63, 0.1),  # number used twice
    ("7/(5-5)+3", [3, 5, 7, 5], 3, 0.1),  # division by zero
    ("3+*5", [3, 5], 8, 0.0),
    ("(3+5", [3, 5], 8, 0.0),
    ("3+5)", [3, 5], 8, 0.0),
    ("-3+11", [3, 11], 8, 0.0),  # no unary minus
    ("", [3, 5], 8, 0.0),
    ("2**3", [2, 3], 8, 0.0),
    ("３+5", [3, 5], 8, 0.0),  # full-width digit
    ("٣+5", [3, 5], 8, 0.0),  # Arabic-Indic digit
    ("__import__('os').system('true')", [1], 1, 0.0),
])
def test_countdown_reward(completion, numbers, target, expected):
    assert countdown_reward(completion, numbers, target) == expected


@pytest.mark.parametrize("completion, answer, expected", [
    ("so the answer is \\boxed{42}.", "Natalia sold ... #### 42", 1.0),
    ("\\boxed{\\frac{1}{2}} no wait \\boxed{7}", "7", 1.0),
    ("she has 1,234 apples", "#### 1234", 1.0),
    ("3 + 4 = 7.0", "7", 1.0),
    ("-5 degrees", "#### -5", 1.0),
    ("the answer is 41", "#### 42", 0.1),
    ("\\boxed{forty-two}", "42", 0.0),
    ("I do not know", "42", 0.0),
    ("", "42", 0.0),
])
def test_math_reward(completion, answer, expected):
    assert math_reward(completion, answer) == expected


def test_parse_expression_returns_literals_and_exact_value():
    value, literals = parse_expression("(10-4)/4")
    assert value == 1.5 and literals == [10, 4, 4]
    assert parse_expression("((((1))))")[0] == 1


HOSTILE = [
    "9" * 100_000,
    "(" * 50_000 + "1" + ")" * 50_000,
    "(" * 20 + "1" + ")" * 20,  # within the nesting bound
    "9" * 60 + "*" + "9" * 60,
    "*".join(["999999999"] * 25),
    "/".join(["7"] * 120),
    "2**999999999",
    "1" + "+1" * 50_000,
    "<answer>" * 10_000 + "</answer>" * 10_000,
    "\\boxed{" * 50_000,
    "\\boxed{" + "1" * 100_000 + "}",
    "".join(chr(random.Random(0).randrange(0x10FFFF) % 0xD800) for _ in range(100_000)),
    "1e999999", "nan", "inf", "0x10", "1_000",
]


@pytest.mark.parametrize("completion", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_completions_are_cheap_and_never_execute(completion, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the verifier must not run model text")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    start = time.perf_counter()
    rewards = [countdown_reward(completion, [1, 2, 3], 6), math_reward(completion, "6")]
    elapsed = time.perf_counter() - start
    assert all(r in (0.0, 0.1, 1.0) for r in rewards)
    assert elapsed < 0.1, f"{elapsed:.3f}s: a hostile completion must not be expensive"
