"""Seeded fuzzing of the verifiers: every call returns a reward in {0, 0.1, 1}, never raises, stays
cheap, and never runs model text. 30,000 completions per verifier in this process by default
(--fuzz-count N), and a thirtieth of that with LaTeX, which math-verify reads in its worker; -s
prints the worst times."""
import builtins
import gc
import random
import time

import es_grpo
from scale import verifier
from es_grpo import countdown_reward, math_grade
from scale.verifier import math_reward

ODD = ["０", "٣", "𝟑", "³", "½", "−", "×", "÷", "O", "l", "ⅰ",
       "\u200b", "\x00", "🙂", "\\", "{", "}", "e", "E", ".", ",", "_"]
OPERATORS = ["+", "-", "*", "/", "**", "//", "%", "^", "(", ")", " ", "=", "==", "<<", "@"]
LIMIT_S = 0.01  # the limit per verifier call
TAGS = ["<answer>", "</answer>", "####", "\n", "x = ", "="]
LATEX_TAGS = ["\\boxed{", "}", "{", "\\frac{", "\\frac", "\\sqrt{", "\\pi", "^{", "\\text{", "$",
              "\\left(", "\\cdot",
              "\\begin{pmatrix}", "&", "\\\\", "\\infty", "\\cup", "!", "\\in", "\\le"]
# what makes text LaTeX: without it, math_reward stays in this process
PLAIN = str.maketrans("", "", "\\${}")


def number(rng):
    kind = rng.random()
    if kind < 0.6:
        return str(rng.choice([0, 1, 2, 3, 5, 7, 8, 12, 20, 24, 100]))
    if kind < 0.9:
        return str(rng.randint(0, 10**rng.randint(1, 30)))
    return "9" * rng.randint(50, 5000)


def completion(rng, tags=TAGS):
    kind = rng.random()
    if kind < 0.05:
        return rng.choice(["", " ", "(" * 10_000, ")" * 10_000, "1" * 100_000, "<answer>" * 5000,
                           "\\boxed{" * 5000,
                           "(" * 5000 + "1" + ")" * 5000, "+".join(["1"] * 20_000)])
    if kind < 0.25:
        return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randint(0, 300)))
    parts = []
    depth = 0
    for _ in range(rng.randint(1, 80)):
        roll = rng.random()
        if roll < 0.4:
            parts.append(number(rng))
        elif roll < 0.8:
            op = rng.choice(OPERATORS)
            depth += {"(": 1, ")": -1}.get(op, 0)
            parts.append(op)
        elif roll < 0.9:
            parts.append(rng.choice(ODD))
        else:
            parts.append(rng.choice(tags))
    if rng.random() < 0.3:
        parts.append(")" * max(depth, 0))
    text = "".join(parts)
    if rng.random() < 0.1:
        text = "<answer>" + text + "</answer>"
    return text


def cpu_seconds(call):
    """CPU time of this thread for one call: what the verifier costs, not the OS's scheduling."""
    start = time.thread_time()
    value = call()
    return value, time.thread_time() - start


def test_fuzzed_completions(request, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the verifier must not run model text")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    count, rng, worst, seen, retimed = (request.config.getoption("--fuzz-count"), random.Random(0),
                                        0.0, set(), 0)
    gc.collect()
    gc.disable()  # a collection of other tests' objects is not the verifier's cost
    try:
        for _ in range(count):
            text = completion(rng).translate(PLAIN)
            numbers = [rng.choice([1, 2, 3, 5, 7, 8, 12]) for _ in range(rng.randint(1, 4))]
            target, reference = (rng.randint(-5, 100),
                                 rng.choice(["#### 24", "7", "-3", "1,000", "0.5", "3/4"]))
            # the reference grader reads plain references by value
            plain = reference.replace("1,000", "1000")
            for call in (lambda: countdown_reward(text, numbers, target),
                         lambda: math_reward(text, reference), lambda: math_grade(text, plain)[0]):
                value, seconds = cpu_seconds(call)
                if seconds >= LIMIT_S:
                    # A hostile input is slow every time; a virtual machine's stall (measured: one
                    # call of 97 ms that took 0.02 ms on every rerun) is not. The best of three
                    # reruns is the call's cost.
                    retimed += 1
                    seconds = min(cpu_seconds(call)[1] for _ in range(3))
                worst = max(worst, seconds)
                assert value in (0.0, 0.1, 1.0), text[:200]
                seen.add(value)
    finally:
        gc.enable()
    print(f"\nfuzz: {count} completions x 3 verifiers, worst call {worst * 1e3:.2f} ms "
          f"({retimed} calls over {LIMIT_S * 1e3:.0f} ms on first timing, retimed), rewards seen "
          f"{sorted(seen)}")
    assert seen >= {0.0, 0.1}
    assert worst < LIMIT_S, f"worst verifier call took {worst * 1e3:.1f} ms"


def test_fuzzed_latex_completions(request, monkeypatch):
    """LaTeX completions, read by math-verify in its worker: a reward in {0, 0.1, 1} from every
    call, each within MATH_SECONDS (here 0.5 s) of wall time; a call that finds its worker killed
    also waits for a new one to start (about 1 s)."""
    monkeypatch.setattr(es_grpo, "MATH_SECONDS", 0.5)
    count, rng, worst, seen, restarts = (request.config.getoption("--fuzz-count") // 30,
                                         random.Random(1), 0.0, set(), 0)
    verifier.MATH_VERIFY.compare("1", "$1$")
    for _ in range(count):
        text = completion(rng, TAGS + LATEX_TAGS)
        reference = rng.choice(["#### 24", "7", "0.5", "\\frac{1}{2}", "2\\sqrt{3}", "\\text{(C)}",
                                "(3,2)", "[-2,7)"])
        running = verifier.MATH_VERIFY.process is not None
        start = time.monotonic()
        value = (math_reward if rng.random() < 0.5 else lambda
                 *pair: verifier.math_grade(*pair)[0])(text, reference)
        seconds = time.monotonic() - start
        restarts += not running
        if running:
            worst = max(worst, seconds)
        assert value in (0.0, 0.1, 1.0), text[:200]
        seen.add(value)
    print(f"\nfuzz: {count} LaTeX completions, worst call {worst:.2f} s, {restarts} calls waited "
          f"for a new worker, rewards seen {sorted(seen)}")
    assert seen >= {0.0, 0.1} and worst < 0.5 + 0.3, f"worst call took {worst:.2f} s"
