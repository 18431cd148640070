"""Math answers read as chat models write them, and checked in any thread or process, bounded in
time.

es_grpo.math_grade reads a final answer where the prompt asks for it (the last \\boxed{}) or the
last number. math_grade here reads what chat models write besides: the plain answer after all the
LaTeX of a text, boxes joined by "and", thousands separators, decimal commas, a $ that is a dollar.
grade() is es_grpo.grade with it: the grader scale/assembly.py gives every run, analysis and
benchmark (tests/test_verifier.py's MATH_CASES are its contract).


es_grpo.latex_compare calls math-verify as the field does, bounded by math-verify's own timeout,
which is signal.alarm: it works on the main thread only, and off it es_grpo refuses in one line.
Here math-verify runs in a worker process that is killed past es_grpo.MATH_SECONDS, wherever the
call comes from (a thread, a torchrun rank, a notebook's executor); the next call starts a new
worker. The worker also guards Python's eval and exec, so that sympy's parse_expr, the one way from
text to code that math-verify's LaTeX path still reaches, runs nothing but a literal. math_grade
reads LaTeX through it unless told otherwise.
"""
from __future__ import annotations

import functools
import inspect
import json
import re
import select
import subprocess
import sys
import threading
from fractions import Fraction

import es_grpo
from es_grpo import (MAX_ANSWER_CHARS, MAX_EXPR_CHARS, BadInput, box_at, boxed, latex_compare,
                     parse_expression)

LATEX_MARK = re.compile(r"[\\${}]")  # text after the last of these is plain
PLAIN_SPAN = re.compile(r"[-+(.0-9][ \t0-9.,+\-*/^()×÷]*")  # a run of plain arithmetic, one line
THOUSANDS = re.compile(r"(?<=[0-9])(?:,|\{,\}|,?\\!|\s)(?=[0-9]{3}(?![0-9]))")  # 14,916 14{,}916
JOINER = re.compile(r"^[\s$]*$|,|;|\band\b|\\quad")  # what ties one boxed answer to the next
DECIMAL_COMMA = re.compile(r"-?(?:0,[0-9]+|[0-9]+,(?:[0-9]{1,2}|[0-9]{4,}))")  # 0,5 1,22 not 1,234


def grade(problem: dict, completion: str) -> tuple[float, str]:
    """es_grpo.grade's contract, with math read by math_grade: Context's grade hook for scale/."""
    if problem["task"] == "countdown":
        return es_grpo.grade(problem, completion)
    return math_grade(completion, problem["answer"])


def math_grade(completion: str, answer: str, latex=None) -> tuple[float, str]:
    """(reward, Maj@K key) of a math completion, es_grpo.math_grade's contract. Its final answer:
    the last \\boxed{...} (math-verify reads several joined by "and" together), else the plain
    answer after all its LaTeX, else math-verify's last LaTeX answer. Equal to the reference (a
    GSM8K solution's "#### 1,234", a boxed solution, a MATH-style answer) by value: \\frac12 = 0.5.
    latex: es_grpo.latex_compare's contract (None: MATH_VERIFY's worker, bounded in any thread)."""
    latex = latex or MATH_VERIFY.compare
    reference = answer.rsplit("####", 1)[-1].strip()
    theirs = plain_value(boxed(reference) if reference.count("\\boxed{") == 1 else reference)
    text = completion.rsplit("####", 1)[-1]
    span = boxed(text)
    if span == "":
        return 0.0, ""
    if span is not None:
        mine = plain_value(span, decimal_comma=False)
        if mine is not None and theirs is not None and text.count("\\boxed{") == 1:
            return (1.0 if mine == theirs else 0.1), str(mine)
        found, equal, key = latex(reference, joined_boxes(text))
        return (1.0 if equal else 0.1), key or "".join(span.split())
    span = plain_answer(text)
    if span is None and LATEX_MARK.search(text[-MAX_ANSWER_CHARS:]):
        found, equal, key = latex(reference, text[-MAX_ANSWER_CHARS:])
        if found:
            return (1.0 if equal else 0.1), key
        if text.count("$") % 2:  # no LaTeX was read, and a $ without its pair is a dollar
            span = plain_answer(text.replace("$", ""))
    if span is None:
        return 0.0, ""
    mine, written = plain_value(span), "".join(span.split())
    if theirs is not None:  # a number: only a plain answer of that value equals it
        return (1.0 if mine == theirs else 0.1), written if mine is None else str(mine)
    found, equal, key = latex(reference, f"${span if mine is None else exact_latex(mine)}$")
    return (1.0 if equal else 0.1), key or written


def math_reward(completion: str, answer: str) -> float:
    return math_grade(completion, answer)[0]


def joined_boxes(text: str) -> str:
    """The last \\boxed{...} with the boxes that a short joiner ties to it: "\\boxed{1} and
    \\boxed{2}", "\\boxed{1}, \\boxed{2}" (but "\\boxed{1/2} no wait \\boxed{7}" is 7)."""
    last = text.rfind("\\boxed{")
    text = text[max(0, last - 2 * MAX_ANSWER_CHARS):last + MAX_ANSWER_CHARS + len("\\boxed{}")]
    boxes = [(box.start(), box_at(text, box.start())[1]) for box in re.finditer(r"\\boxed\{", text)]
    first, end = boxes[-1]
    for start, stop in reversed(boxes[:-1]):
        gap = text[stop:first]
        if stop < 0 or len(gap) > 40 or any(c.isdigit() for c in gap) or not JOINER.search(gap):
            break
        first = start
    return text[first:end]


@functools.lru_cache(maxsize=4096)  # a reference is read once for all its samples
def plain_value(answer: str, decimal_comma: bool = True) -> Fraction | None:
    """The value of an answer that is plain arithmetic as a whole: 1,234, 1 000, -.5, 3/4, 2^10, and
    with decimal_comma 0,5 (in LaTeX, 1,2 is a list)."""
    answer = answer.strip().rstrip(".").replace("×", "*").replace("÷", "/")
    if decimal_comma and DECIMAL_COMMA.fullmatch(answer):
        answer = answer.replace(",", ".")
    parsed = parse_expression(THOUSANDS.sub("", answer), plain_math=True)
    return parsed and parsed[0]


def plain_answer(text: str) -> str | None:
    """The last plain answer of a text: the last run of arithmetic after its last LaTeX mark and its
    last =, standing alone (2 in AZYUK2A is none); a run that continues an expression (+ 3 in 2y +
    3) gives the expression. A number inside a fraction, an exponent or an equation is never taken
    alone."""
    tail = LATEX_MARK.split(text[-MAX_EXPR_CHARS:])[-1].rsplit("=", 1)[-1]
    runs = [run for run in PLAIN_SPAN.finditer(tail) if any(c.isdigit() for c in run[0])
            and (tail[:run.start()][-1:] or " ") in " \n\t:("]
    if not runs:
        return None
    before = tail[:runs[-1].start()].rstrip()[-1:]
    if runs[-1][0][0] in "+-" and (before.isalnum() or before == ")"):
        return tail.strip()
    return runs[-1][0].strip().rstrip(".,")


def exact_latex(value: Fraction) -> str:
    sign, value = "-" * (value < 0), abs(value)
    fraction = f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    return sign + (fraction if value.denominator > 1 else str(value))

SYMPY_LITERAL = re.compile(r"from sympy import \*|[A-Za-z_]\w* ?|"  # what sympy's parse_expr runs
                           r"(?:Integer|Float|Rational|Symbol) ?\( ?(?:[0-9]+|'[\w.]*') ?\) ?")


def literals_only(python_eval):
    """eval or exec, refusing in sympy's parse_expr (the one way from text to Python: latex2sympy
    reads a number token by sympy.Number(text)) anything but "from sympy import *", a name, and a
    literal such as "Integer (12 )". sympy's own generated code, and imports, run as before."""
    def guarded(source, *scopes):
        parsing = sys._getframe(1).f_globals.get("__name__") == "sympy.parsing.sympy_parser"
        if parsing and not (isinstance(source, str) and SYMPY_LITERAL.fullmatch(source)):
            raise PermissionError(f"the math verifier runs no text but sympy literals: "
                                  f"{source!r:.80}")
        return python_eval(source, *scopes)
    return guarded


def math_verify_worker():  # one JSON request a line in, one answer a line out
    import builtins
    import json
    import logging
    import resource
    import sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a huge power fails, not the host
    logging.disable(logging.WARNING)
    import sympy.physics.units  # noqa: F401 (verify imports it, and its import parses text)
    latex_compare("1", "$1$", bounded=False)
    builtins.eval, builtins.exec = literals_only(builtins.eval), literals_only(builtins.exec)
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            answer = latex_compare(*json.loads(line), bounded=False)
        except Exception:  # a failed parse, MemoryError, RecursionError: no answer
            answer = False, False, ""
        print(json.dumps(answer), flush=True)


class MathVerifier:
    """math-verify behind a pipe: es_grpo.latex_compare's contract. compare() answers within
    es_grpo.MATH_SECONDS or kills the worker, answers "not found", and starts a new one on the next
    call; one call at a time, any thread."""
    START_SECONDS = 120  # importing sympy and math-verify, once per worker

    def __init__(self):
        self.process, self.lock = None, threading.Lock()

    def compare(self, reference: str, prediction: str) -> tuple[bool, bool, str]:
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self.start()
            try:
                request = [reference[:MAX_ANSWER_CHARS], prediction[-4 * MAX_ANSWER_CHARS:]]
                self.process.stdin.write(json.dumps(request) + "\n")
                self.process.stdin.flush()
                found, equal, key = json.loads(self.read_line(es_grpo.MATH_SECONDS))
                return found, equal, key
            except (OSError, ValueError, TimeoutError):  # slow, dead or garbled: replaced
                self.stop()
                return False, False, ""

    def start(self):
        source = "\n".join(inspect.getsource(f)
                           for f in (literals_only, latex_compare, math_verify_worker))
        head = (f"import re\nimport sys\nimport threading\nMAX_ANSWER_CHARS = {MAX_ANSWER_CHARS}\n"
                f"SYMPY_LITERAL = re.compile({SYMPY_LITERAL.pattern!r})\n")
        program = f"{head}{source}\nmath_verify_worker()"
        self.process = subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        try:
            ready = self.read_line(self.START_SECONDS) == "ready\n"
        except (OSError, TimeoutError):
            ready = False
        if not ready:
            self.stop()
            raise BadInput("math answers need math-verify: pip install -r requirements.txt")

    def read_line(self, seconds: float) -> str:
        if not select.select([self.process.stdout], [], [], seconds)[0]:
            raise TimeoutError(f"math-verify took over {seconds} s")
        line = self.process.stdout.readline()
        if not line:
            raise OSError("the math-verify worker ended")
        return line

    def stop(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


MATH_VERIFY = MathVerifier()  # started on the first LaTeX answer, one per process

