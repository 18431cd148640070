import builtins
import random
import time
from fractions import Fraction

import pytest

import es_grpo
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
    ("\\boxed{forty-two}", "42", 0.1),  # an answer where it belongs, but not the reference's
    ("\\boxed{ }", "42", 0.0),
    ("I do not know", "42", 0.0),
    ("", "42", 0.0),
    # answers of the paper's hard setting (MATH-500, AMC, AIME), by value
    ("\\boxed{\\frac{3}{2}}", "\\frac{1}{2}", 0.1),  # both end in 2
    ("\\boxed{5\\sqrt{3}}", "2\\sqrt{3}", 0.1),
    ("\\boxed{5\\sqrt{3}}", "5\\sqrt3", 1.0),
    ("\\boxed{0.75}", "\\frac34", 1.0),
    ("\\boxed{\\dfrac{3}{4}}", "0.75", 1.0),
    ("\\boxed{-\\frac{1}{2}}", "-0.5", 1.0),
    ("\\boxed{\\frac{1}{2}}", "-\\frac{1}{2}", 0.1),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{1}{2}\\sqrt{3}", 1.0),
    ("\\boxed{2^{10}}", "1024", 1.0),
    ("\\boxed{x = 5}", "5", 1.0),
    ("\\boxed{\\$18.00}", "18", 1.0),
    ("\\boxed{90^\\circ}", "90", 1.0),
    ("\\boxed{\\text{(C)}}", "\\text{(C)}", 1.0),  # not a number: compared as written
    ("\\boxed{12345678901}", "12345678902", 0.1),  # exact for rationals, however long
    ("\\boxed{\\pi}", "3.14159", 0.1),  # irrationals agree to 1e-9 or not at all
    ("\\boxed{\\frac{1}{0}}", "1", 0.1),
    ("\\boxed{2^{100000}}", "1", 0.1),  # a power past MAX_BITS has no value: never computed
    ("\\boxed{(-\\infty, 3)}", "3", 0.1),
])
def test_math_reward(completion, answer, expected):
    assert math_reward(completion, answer) == expected


# verbatim GSM8K lines (train split, first records): annotations <<...>>, thousands separators, $
GSM8K = [
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                 "How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
               "altogether in April and May.\n#### 72"},
    {"question": "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
                 "How much did she earn?",
     "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = "
               "$<<0.2*50=10>>10.\n#### 10"},
    {"question": "A company spends $1,200 a month. How much in a year?",
     "answer": "12 * 1,200 = $<<12*1200=14400>>14,400\n#### 14,400"},
]


@pytest.mark.parametrize("record, completion, expected", [
    (GSM8K[0], "In May she sold 48/2 = 24, so 48 + 24 = 72 in all. \\boxed{72}", 1.0),
    (GSM8K[0], "Let me think step by step. " * 200 + "48 + 24 = 72", 1.0),  # a long chain of thought
    (GSM8K[0], "48 + 24 = 72 clips... wait, 48 + 48 = 96", 0.1),  # the last number is the answer
    (GSM8K[1], "0.2 x 50 = $10.00", 1.0),
    (GSM8K[1], "She earned $\\boxed{10}$.", 1.0),
    (GSM8K[2], "So \\boxed{\\$14,400}", 1.0),
    (GSM8K[2], "12 x 1,200 = 14,400 dollars", 1.0),
    (GSM8K[2], "#### 14400", 1.0),
    (GSM8K[2], "\\boxed{1,440}", 0.1),
])
def test_verbatim_gsm8k_answers(record, completion, expected):
    assert math_reward(completion, record["answer"]) == expected


def test_the_verifier_bounds_hold_exactly_at_their_stated_limits():
    """MAX_EXPR_CHARS (256 characters), MAX_DEPTH (32 parentheses), MAX_NUMBER_CHARS (64 digits), MAX_BITS
    (a power's base bits x exponent): at the limit an answer has its value, one past it has none."""
    bounds = es_grpo.MAX_EXPR_CHARS, es_grpo.MAX_DEPTH, es_grpo.MAX_NUMBER_CHARS, es_grpo.MAX_BITS
    assert bounds == (256, 32, 64, 4096)
    ones = "1 " + "+1" * 127  # 128 ones: 256 characters
    assert len(ones) == 256 and countdown_reward(ones, [1] * 128, 128) == 1.0
    assert countdown_reward(" " + ones.replace(" ", "  "), [1] * 128, 128) == 0.0  # 257 inside, stripped ends
    assert countdown_reward("(" * 32 + "1" + ")" * 32, [1], 1) == 1.0
    assert countdown_reward("(" * 33 + "1" + ")" * 33, [1], 1) == 0.0
    assert countdown_reward("9" * 64 + "-" + "9" * 63 + "9", [int("9" * 64)] * 2, 0) == 1.0
    assert countdown_reward("9" * 65 + "-1", [int("9" * 65), 1], int("9" * 65) - 1) == 0.0
    assert math_reward("\\boxed{" + "(" * 32 + "7" + ")" * 32 + "}", "7") == 1.0
    assert math_reward("\\boxed{" + "(" * 33 + "7" + ")" * 33 + "}", "7") == 0.1
    assert math_reward("\\boxed{" + " " * 254 + "7}", "7") == 1.0  # 255 characters of answer
    assert math_reward("\\boxed{" + " " * 256 + "7}", "7") == 0.0  # its closing brace is past the bound
    assert math_reward("\\boxed{2^{2048}}", "2^{2047} \\cdot 2") == 1.0  # 2 bits x 2048 = MAX_BITS: computed
    assert math_reward("\\boxed{2^{2049}}", "2^{2048} \\cdot 2") == 0.1  # one past: no value, texts differ


def test_parse_expression_returns_literals_and_exact_value():
    value, literals = parse_expression("(10-4)/4")
    assert value == 1.5 and literals == [10, 4, 4]
    assert parse_expression("((((1))))")[0] == 1
    assert parse_expression("-3") is None and parse_expression("-3", latex=True)[0] == -3  # signs: math only
    assert parse_expression("2(3)") is None and parse_expression("2(3)", latex=True)[0] == 6
    assert parse_expression("1.5") is None and parse_expression("1.5", latex=True)[0] == Fraction(3, 2)


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
    "\\boxed{" + "2^" * 60 + "2}", "\\boxed{" + "\\sqrt{" * 40 + "2" + "}" * 40 + "}",
    "\\boxed{" + "\\frac{1}{" * 30 + "3" + "}" * 30 + "}", "\\boxed{(10^{64})^{64}}", "\\boxed{1.5^{99999}}",
    "\\boxed{" + "-" * 250 + "1}", "\\boxed{" + "\\text{" * 100 + "}" * 100 + "}",
]


@pytest.mark.parametrize("completion", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_completions_are_cheap_and_never_execute(completion, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the verifier must not run model text")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    start = time.process_time()  # CPU time: a busy machine must not fail it
    rewards = [countdown_reward(completion, [1, 2, 3], 6), math_reward(completion, "6")]
    elapsed = time.process_time() - start
    assert all(r in (0.0, 0.1, 1.0) for r in rewards)
    assert elapsed < 0.1, f"{elapsed:.3f}s of CPU: a hostile completion must not be expensive"
