import builtins
import random
import threading
import time
from fractions import Fraction

import pytest

import es_grpo
from scale import verifier
from conftest import GSM8K
from es_grpo import countdown_reward, parse_expression
from scale.verifier import math_reward, plain_value


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


MATH_CASES = [
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
    ("\\boxed{\\text{(C)}}", "\\text{(C)}", 1.0),
    ("\\boxed{12345678901}", "12345678902", 0.1),  # exact for rationals, however long
    ("\\boxed{\\pi}", "3.14159", 0.1),  # math-verify rounds to 6 digits: 3.141593
    ("\\boxed{\\frac{1}{0}}", "1", 0.1),
    ("\\boxed{2^{100000}}", "1", 0.1),  # past MAX_BITS for this file's parser: math-verify's, exact
    ("\\boxed{(-\\infty, 3)}", "3", 0.1),
    # no bare last number that sits inside a fraction, an exponent or an equation
    ("The answer is $\\frac{3}{4}$.", "4", 0.1),
    ("so $x = \\frac{7}{2}$", "2", 0.1),
    ("\\boxed{1}", "2x + z = 1", 0.1),
    ("$x^{2}$", "2", 0.1),
    ("3/4", "4", 0.1),
    ("x = 2y + 3", "3", 0.1),
    ("AZYUK2A", "2", 0.0),  # a digit inside a word is no answer
    # answers as chat models write them
    ("\\boxed{(3,2)}", "(p,q)=(3,2)", 1.0),
    ("\\boxed{[-2,7)}", "[-2,7)", 1.0),
    ("\\boxed{[-2,7]}", "[-2,7)", 0.1),
    ("\\boxed{\\cfrac{1}{2}}", "0.5", 1.0),
    ("\\boxed{.4}", "0.4", 1.0),
    ("\\boxed{14{,}916}", "14916", 1.0),
    ("\\boxed{28 percent}", "28\\%", 1.0),
    ("\\boxed{\\text{E}}", "$E$", 1.0),
    ("\\boxed{1} and \\boxed{2}", "\\{1, 2\\}", 1.0),  # boxes joined by "and" are read together
    ("The final answer is 12,000,023. I hope it is correct.", "12000023", 1.0),
    ("Final Answer: The largest $n$ is 34.", "34", 1.0),  # the plain answer after all LaTeX
    ("0.2 x 50 = $10.00", "10", 1.0),  # a $ without its pair is a dollar
    ("Answer $ \n 9 \n $", "9", 0.0),  # a pair of $ is LaTeX, and this one holds no answer
    ("so 1 000 in all", "1000", 1.0),
    ("Soucis : 2,74 $ a..", "2.74", 1.0),  # a decimal comma in text; in LaTeX 1,2 is a list
]


@pytest.mark.parametrize("completion, answer, expected", MATH_CASES)
def test_math_reward(completion, answer, expected):
    """scale/verifier.py's grader, which every run scale/assembly.py builds grades with: answers as
    chat models write them."""
    assert math_reward(completion, answer) == expected


# es_grpo.math_grade: the last \boxed{}, else the last number; by value, else math-verify
REFERENCE_CASES = [
    ("so the answer is \\boxed{42}.", "Natalia sold ... #### 42", 1.0, "42"),
    ("\\boxed{\\frac{1}{2}} no wait \\boxed{7}", "7", 1.0, "7"),
    ("3 + 4 = 7.0", "7", 1.0, "7"),
    ("-5 degrees", "#### -5", 1.0, "-5"),
    ("the answer is 41", "#### 42", 0.1, "41"),
    ("48 + 24 = 72 clips... wait, 48 + 48 = 96", "72", 0.1, "96"),
    ("\\boxed{forty-two}", "42", 0.1, "f*o*r*t*y-o*t*w"),  # math-verify: letters are symbols
    ("\\boxed{ }", "42", 0.0, ""),
    ("I do not know", "42", 0.0, ""),
    ("", "42", 0.0, ""),
    ("\\boxed{0.75}", "\\frac34", 1.0, "3/4"),
    ("\\boxed{\\dfrac{3}{4}}", "0.75", 1.0, "3/4"),
    ("\\boxed{\\frac{3}{2}}", "\\frac{1}{2}", 0.1, "3/2"),
    ("\\boxed{2^{10}}", "1024", 1.0, "2**10"),  # math-verify's key keeps a power
    ("\\boxed{x = 5}", "5", 1.0, "Eq(x,5)"),
    ("\\boxed{12345678901}", "12345678902", 0.1, "12345678901"),
    ("0123", "0123", 1.0, "123"),  # the tiny model's sort answers: by value
]


@pytest.mark.parametrize("completion, answer, expected, key", REFERENCE_CASES)
def test_the_reference_grader_reads_the_final_answer_by_value(completion, answer, expected, key):
    assert es_grpo.math_grade(completion, answer) == (expected, key)


@pytest.mark.parametrize("completion, answer, expected, key", REFERENCE_CASES)
def test_the_full_grader_agrees_where_the_reference_reads_an_answer(
        completion, answer, expected, key):
    """Where a completion ends in a boxed answer or a bare number, scale's grader rewards as the
    reference."""
    assert math_reward(completion, answer) == expected


def test_the_reference_and_the_worker_grade_every_math_case_alike():
    """es_grpo.py's own latex_compare (math-verify under its timer) and scale/verifier.py's worker
    give every case of this file the same reward and the same Maj@K key through the full grader."""
    cases = MATH_CASES + REFERENCE_CASES
    graded = {name: [verifier.math_grade(completion, answer, latex) for completion, answer,
                     *_ in cases]
              for name, latex in (("es_grpo", es_grpo.latex_compare),
                        ("worker", verifier.MATH_VERIFY.compare))}
    assert graded["es_grpo"] == graded["worker"]


def test_the_assembly_gives_every_run_the_full_grader_and_es_grpo_keeps_its_own():
    """The grader is a Context hook: es_grpo.py's own (the reference) where it runs alone,
    scale/verifier.py's (prose read, bounded in any thread) in every Context scale/assembly.py
    builds; no global is swapped."""
    from scale import assembly
    from scale.config import Args
    problem = {"task": "math", "answer": "12000023"}
    prose = "The final answer is 12,000,023. I hope it is correct."
    alone, assembled = es_grpo.Context(Args(), None, None), assembly.context(Args(), None, None)
    # declines 12,000,023
    assert alone.grade is es_grpo.grade and alone.grade(problem, prose)[0] == 0.0
    assert assembled.grade is verifier.grade and assembled.grade(problem, prose)[0] == 1.0
    # nothing of es_grpo changed by building the assembly
    assert es_grpo.grade(problem, prose)[0] == 0.0


def test_majority_votes_on_the_parsed_answer():
    """Maj@K's key is the answer's canonical value: 0.5, \\frac12 and 1/2 vote together, 0.25
    apart."""
    keys = [verifier.math_grade(text, "0.5")[1] for text in
            ("\\boxed{\\frac12}", "\\boxed{0.5}", "so it is 1/2.", "$\\dfrac{1}{2}$",
             "\\boxed{0.25}")]
    assert len(set(keys[:4])) == 1 and keys[4] != keys[0]


# verbatim GSM8K lines (train split, first records): annotations <<...>>, thousands separators, $


@pytest.mark.parametrize("record, completion, expected", [
    (GSM8K[0], "In May she sold 48/2 = 24, so 48 + 24 = 72 in all. \\boxed{72}", 1.0),
    # a long chain of thought
    (GSM8K[0], "Let me think step by step. " * 200 + "48 + 24 = 72", 1.0),
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
    """MAX_EXPR_CHARS (256 characters), MAX_DEPTH (32 parentheses), MAX_NUMBER_CHARS (64 digits),
    MAX_BITS (a power's base bits x exponent) bound the project's own parser: at the limit an answer
    has its value, one past it has none. MAX_ANSWER_CHARS bounds a boxed answer."""
    bounds = es_grpo.MAX_EXPR_CHARS, es_grpo.MAX_DEPTH, es_grpo.MAX_NUMBER_CHARS, es_grpo.MAX_BITS
    assert bounds == (256, 32, 64, 4096) and es_grpo.MAX_ANSWER_CHARS == 512
    ones = "1 " + "+1" * 127  # 128 ones: 256 characters
    assert len(ones) == 256 and countdown_reward(ones, [1] * 128, 128) == 1.0
    # 257 inside, stripped ends
    assert countdown_reward(" " + ones.replace(" ", "  "), [1] * 128, 128) == 0.0
    assert countdown_reward("(" * 32 + "1" + ")" * 32, [1], 1) == 1.0
    assert countdown_reward("(" * 33 + "1" + ")" * 33, [1], 1) == 0.0
    assert countdown_reward("9" * 64 + "-" + "9" * 63 + "9", [int("9" * 64)] * 2, 0) == 1.0
    assert countdown_reward("9" * 65 + "-1", [int("9" * 65), 1], int("9" * 65) - 1) == 0.0
    assert plain_value("(" * 32 + "7" + ")"
                       * 32) == 7 and plain_value("(" * 33 + "7" + ")" * 33) is None
    # 2 bits x 2048 = MAX_BITS
    assert plain_value("2^2048") == 2**2048 and plain_value("2^2049") is None
    assert plain_value("2^0.5") is None  # a power that is not whole: not this parser's
    assert math_reward("\\boxed{" + " " * 510 + "7}", "7") == 1.0  # 511 characters of answer
    # its closing brace is past the bound
    assert math_reward("\\boxed{" + " " * 512 + "7}", "7") == 0.0
    # past MAX_BITS: math-verify, exact
    assert math_reward("\\boxed{2^{2049}}", "2^{2048} \\cdot 2") == 1.0


def test_parse_expression_returns_literals_and_exact_value():
    value, literals = parse_expression("(10-4)/4")
    assert value == 1.5 and literals == [10, 4, 4]
    assert parse_expression("((((1))))")[0] == 1
    # signs: math
    assert parse_expression("-3") is None and parse_expression("-3", plain_math=True)[0] == -3
    assert parse_expression("2(3)") is None and parse_expression("2(3)", plain_math=True)[0] == 6
    assert (parse_expression("1.5") is None
            and parse_expression("1.5", plain_math=True)[0] == Fraction(3, 2))
    assert parse_expression(".5", plain_math=True)[0] == Fraction(1, 2)


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
    "1e999999", "nan", "inf", "0x10", "1_000", "2^99999999", "(10^64)^64", "1.5^99999",
    "-" * 250 + "1",
]  # and plain math: what stays in this process (LaTeX goes to the worker: HOSTILE_MATH)


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


HOSTILE_MATH = {  # LaTeX answers that are slow or huge to read: each is killed at the bound
    "tower": "\\boxed{10^{10^{10}}}",
    "factorials": "\\boxed{99!!!!}",
    "power tower": "$2^{2^{2^{2^{2^{2}}}}}$",
    "fractions 1000 deep": "$" + "\\frac{1}{" * 1000 + "2" + "}" * 1000 + "$",
    "sqrt chain": "$" + "\\sqrt{" * 300 + "2" + "}" * 300 + "$",
    "100 KB": "Let $x = 1$. " * 8000 + "\\boxed{6}",
    "matrix": "\\boxed{\\begin{pmatrix}" + "\\\\".join(["&".join(["x^{99}"] * 40)] * 40)
    + "\\end{pmatrix}}", "unbalanced": "$\\frac{1}{2" + "}" * 300 + "{" * 300 + "$",
    "signs": "\\boxed{" + "-" * 250 + "1}", "text": "\\boxed{" + "\\text{" * 100 + "}" * 100 + "}",
}


@pytest.fixture(params=["es_grpo", "worker"])
def bounded(request, monkeypatch) -> tuple:
    """The LaTeX reader math_grade is given, and its bound: es_grpo.py's latex_compare (math-verify
    as the field calls it, each call under its own SIGALRM timer of MATH_SECONDS, whole seconds:
    here 1) or scale/verifier.py's worker (a process killed past MATH_SECONDS, here 0.3 s; started
    here: its start is not an answer's); the bound on one answer: two timed calls (the answer's
    parse and verify; the reference's is short) or the kill."""
    if request.param == "worker":
        monkeypatch.setattr(es_grpo, "MATH_SECONDS", 0.3)
        verifier.MATH_VERIFY.compare("1", "$1$")
        return verifier.MATH_VERIFY.compare, 0.3
    monkeypatch.setattr(es_grpo, "MATH_SECONDS", 1)
    return es_grpo.latex_compare, 2.0


@pytest.mark.parametrize("name", HOSTILE_MATH)
def test_hostile_math_answers_end_within_the_bound(name, bounded):
    """Every call returns a reward within its bound (see bounded) of wall time, whatever the
    LaTeX."""
    latex, bound = bounded
    start = time.monotonic()
    reward = verifier.math_grade(HOSTILE_MATH[name], "6", latex)[0]
    elapsed = time.monotonic() - start
    assert reward in (0.0, 0.1, 1.0) and elapsed < bound + 0.3, f"{elapsed:.2f} s"


def test_off_the_main_thread_es_grpo_refuses_and_the_worker_is_bounded(monkeypatch):
    """math-verify's timer (SIGALRM) reaches the main thread only: es_grpo.py's own latex_compare
    refuses at once in a thread, in one line naming it and scale.verifier; the worker's kill bounds
    the call there."""
    monkeypatch.setattr(es_grpo, "MATH_SECONDS", 0.3)
    said = []

    def in_thread():
        try:
            said.append(es_grpo.math_grade(HOSTILE_MATH["tower"], "1"))
        except RuntimeError as refusal:
            said.append(str(refusal))
    thread = threading.Thread(target=in_thread, name="scorer-1")
    start = time.monotonic()
    thread.start()
    thread.join(timeout=60)
    assert time.monotonic() - start < 0.3 and len(said) == 1 and "\n" not in said[0]
    assert "not in scorer-1" in said[0] and "scale.verifier" in said[0]
    verifier.MATH_VERIFY.compare("1", "$1$")  # a started worker: its start is not this answer's
    rewards = []
    thread = threading.Thread(
        target=lambda: rewards.append(math_reward(HOSTILE_MATH["tower"], "1")))
    start = time.monotonic()
    thread.start()
    thread.join(timeout=60)
    assert rewards == [0.1] and time.monotonic() - start < 0.3 + 0.3
    assert math_reward("\\boxed{\\frac{1}{2}}", "0.5") == 1.0  # a new worker serves the next answer


def test_the_workers_eval_runs_no_text_but_sympy_literals(monkeypatch):
    """The guard the worker puts on eval and exec: sympy's parse_expr may run a number token's
    literal, and nothing else; sympy's own code (imports, generated functions) runs as before."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    monkeypatch.setattr(builtins, "eval", verifier.literals_only(builtins.eval))
    monkeypatch.setattr(builtins, "exec", verifier.literals_only(builtins.exec))
    ran = []
    with pytest.raises(PermissionError):
        parse_expr("ran.append(1)", local_dict={"ran": ran})
    with pytest.raises(PermissionError):
        parse_expr("__import__('os').getpid()")
    assert ran == []
    assert sympy.Number("12") == 12 and sympy.Number("0.25") == sympy.Float("0.25")
    # relations: sympy's generated code
    assert es_grpo.latex_compare("x \\leq 5", "$5 \\geq x$", bounded=False)[1]


def test_what_reaches_sympys_eval_is_a_literal(monkeypatch):
    """On every math answer of these tests, hostile ones included, what math-verify's LaTeX path
    hands to Python's eval (sympy's parse_expr, through sympy.Number(text)) is a literal such as
    "Integer (12 )"."""
    from sympy.parsing import sympy_parser

    seen, real = [], sympy_parser.eval_expr
    monkeypatch.setattr(sympy_parser, "eval_expr", lambda code,
                        *scopes: (seen.append(code), real(code, *scopes))[1])
    cheap = [text
             for name, text in HOSTILE_MATH.items() if name in ("unbalanced", "matrix",
                                                                "sqrt chain")]
    cheap += [HOSTILE_MATH[name] for name in ("text", "signs")]
    answers = [(c, a) for c, a, _ in MATH_CASES] + [(text, "6") for text in cheap]
    for completion, answer in answers:
        es_grpo.latex_compare(answer, completion, bounded=False)
    assert seen and all(isinstance(code,
                                   str) and verifier.SYMPY_LITERAL.fullmatch(code) for code
                                   in seen), [
        code for code in seen if not (isinstance(code,
                                                 str)
                                                 and verifier.SYMPY_LITERAL.fullmatch(code))][:3]


def test_the_verifier_command_reads_math_verifys_tables_as_literals(tmp_path):
    """eval.py verifier: each parametrize row of a test file is a case; other settings are left
    out."""
    import eval as cli
    from conftest import in_process

    (tmp_path / "test_cases.py").write_text(
        'import pytest\n@pytest.mark.parametrize("gold,pred,expected", [\n'
        '    ("$\\\\frac{1}{2}$", "so $\\\\boxed{0.5}$", 1),\n    ("$4$", "The answer is '
        '$\\\\frac{3}{4}$.", 0),\n'
        '    ("$1$", "$2$", 1),\n])\ndef test_a(gold, pred, expected): pass\n'
        '@pytest.mark.parametrize("gold,pred,expected,precision", [("$1$", "$1.01$", 1, 1)])\n'
        'def test_b(gold, pred, expected, precision): pass\n')
    result = in_process(cli.main, "verifier", str(tmp_path))
    assert result.returncode == 0
    assert result.stdout.startswith("2 of 3 cases agree (66.7%), 0 false positives; 1 left out")
    assert "test_cases.py:5: expected 1, reward 0.1" in result.stdout


LATEX_TRAPS = [  # wrong answers whose text holds the right number inside LaTeX or a longer word
    ("$\\frac{1+\\sqrt{5}}{2}$", "2"), ("$-[0,1)$", "1"), ("$\\sqrt{2} \\cdot 2$", "2"),
    ("so x^2", "2"),
    ("it is 10^{10}", "10"), ("It is 1,234.", "234"), ("AZYUK2A", "2"), ("$x = 5 + y$", "5"),
    ("\\( 3 \\cdot 4 \\)", "4"), ("the interval [0, 1)", "1"), ("\\frac{3}{4}", "4"),
    ("e^{-2}", "-2"), ("\\[ 3 \\cdot\n4", "4"), ("\\(1\\) and \\[x +\n2", "2")]


@pytest.mark.parametrize("completion, answer", LATEX_TRAPS)
def test_the_reference_never_reads_a_number_from_inside_latex(completion, answer):
    """es_grpo.math_grade's fallback (no \\boxed{}) takes the last number only where it stands
    alone: these wrong answers are never scored right (math-verify's own tests' cases of this kind,
    and more)."""
    assert es_grpo.math_grade(completion, answer)[0] < 1.0


@pytest.mark.parametrize("completion, answer", [
    ("32 + 22 = 54", "54"), ("The answer is 41.", "41"), ("**42**", "42"), ("Answer $$ 9 $$", "9"),
    ("The answer is \\boxed{}, which is 156.", "156"), ("So she has -7!", "-7"), ("$54$", "54"),
    ("The answer is\n42", "42"), ("\\(x\\) is\n42", "42")])
def test_the_reference_reads_a_plain_final_number_as_the_model_meant_it(completion, answer):
    assert es_grpo.math_grade(completion, answer)[0] == 1.0
