"""Math answers checked in any thread or process, each call bounded in time: math-verify in a worker process.

es_grpo.latex_compare calls math-verify as the field does, bounded by math-verify's own timeout, which is
signal.alarm: it works on the main thread only, and off it es_grpo refuses in one line. Here math-verify runs
in a worker process that is killed past es_grpo.MATH_SECONDS, wherever the call comes from (a thread, a
torchrun rank, a notebook's executor); the next call starts a new worker (about 1 s). The worker also guards
Python's eval and exec, so that sympy's parse_expr, the one way from text to code that math-verify's LaTeX
path still reaches, runs nothing but a literal. install() makes it es_grpo's LATEX hook; scale.train, eval.py
and scale.bench install it.
"""
from __future__ import annotations

import inspect
import json
import re
import select
import subprocess
import sys
import threading

import es_grpo
from es_grpo import MAX_ANSWER_CHARS, BadInput, math_verify_compare

SYMPY_LITERAL = re.compile(r"from sympy import \*|[A-Za-z_]\w* ?|"  # what sympy's parse_expr runs
                           r"(?:Integer|Float|Rational|Symbol) ?\( ?(?:[0-9]+|'[\w.]*') ?\) ?")


def literals_only(python_eval):
    """eval or exec, refusing in sympy's parse_expr (the one way from text to Python: latex2sympy reads a
    number token by sympy.Number(text)) anything but "from sympy import *", a name, and a literal such as
    "Integer (12 )". sympy's own generated code, and imports, run as before."""
    def guarded(source, *scopes):
        parsing = sys._getframe(1).f_globals.get("__name__") == "sympy.parsing.sympy_parser"
        if parsing and not (isinstance(source, str) and SYMPY_LITERAL.fullmatch(source)):
            raise PermissionError(f"the math verifier runs no text but sympy literals: {source!r:.80}")
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
    math_verify_compare("1", "$1$")
    builtins.eval, builtins.exec = literals_only(builtins.eval), literals_only(builtins.exec)
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            answer = math_verify_compare(*json.loads(line))
        except Exception:  # a failed parse, MemoryError, RecursionError: no answer
            answer = False, False, ""
        print(json.dumps(answer), flush=True)


class MathVerifier:
    """math-verify behind a pipe: es_grpo.latex_compare's contract. compare() answers within
    es_grpo.MATH_SECONDS or kills the worker, answers "not found", and starts a new one on the next call;
    one call at a time, any thread."""
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
        source = "\n".join(inspect.getsource(f) for f in (literals_only, math_verify_compare, math_verify_worker))
        head = f"import re\nimport sys\nSYMPY_LITERAL = re.compile({SYMPY_LITERAL.pattern!r})\n"
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


def install():
    """es_grpo's LATEX hook <- the worker: every math answer of this process, in any thread, is bounded."""
    es_grpo.LATEX = MATH_VERIFY.compare
