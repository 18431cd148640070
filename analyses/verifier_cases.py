"""scale/verifier.py's math reward on math-verify's own test cases: references as datasets give
them, predictions as completions (python eval.py verifier Math-Verify/tests)."""
from __future__ import annotations

import ast
import contextlib
import re
from pathlib import Path

import es_grpo
from scale import verifier

# what es_grpo uses
VERIFY_DEFAULTS = {"precision": 6, "strict": True, "allow_set_relation_comp": False}


def verifier_cases(folder: Path) -> list[dict]:
    """The (gold, pred, expected) rows of the pytest.mark.parametrize tables in math-verify's test
    files, read as literals (ast.literal_eval: nothing in them runs)."""
    rows = []
    for path in sorted(folder.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "parametrize"
                    and isinstance(node.args[0], ast.Constant)):
                continue
            names = [name.strip() for name in node.args[0].value.split(",")]
            for element in node.args[1].elts if names[:3] == ["gold", "pred", "expected"] else []:
                with contextlib.suppress(ValueError):
                    rows.append({"where": f"{path.name}:{element.lineno}",
                                 **dict(zip(names, ast.literal_eval(element)))})
    return rows


def plain_reference(gold: str) -> str:
    """A gold answer as a dataset gives it: without its $...$, and a single \\boxed{} opened."""
    gold = gold.strip()
    gold = gold[1:-1].strip() if len(gold) > 1 and gold[0] == gold[-1] == "$" else gold
    single = gold.startswith("\\boxed{") and gold.count("\\boxed{") == 1
    return es_grpo.boxed(gold) if single else gold


def check_cases(tests: Path) -> dict[str, list[str]]:
    """scale/verifier.py's math reward (scale.train's and eval.py's) on math-verify's own test cases
    in the folder `tests`: references as datasets give them, predictions as completions. A case
    counts as agreeing when reward 1.0 matches its expected outcome. Printed, and returned by kind:
    agree, disagree, left out."""
    if not tests.is_dir():
        raise es_grpo.BadInput(f"{tests}: no such folder (a Math-Verify checkout's tests/)")
    rows, results = verifier_cases(tests), {"agree": [], "disagree": [], "left out": []}
    for row in rows:
        settings = {k: row[k] for k in VERIFY_DEFAULTS if k in row and row[k] != VERIFY_DEFAULTS[k]}
        prose = re.findall(r"\b[A-Za-z]{3,}\b", re.sub(r"\$[^$]*\$|\\\\\w+", " ", row["gold"]))
        if settings or len(prose) > 6:
            why = (f"other settings {settings}" if settings
                   else "its gold is a worked solution, not an answer")
            results["left out"].append(f"{row['where']}: {why}")
            continue
        reward = verifier.math_reward(row["pred"], plain_reference(row["gold"]))
        kind = "agree" if (reward == 1.0) == bool(row["expected"]) else "disagree"
        results[kind].append(f"{row['where']}: expected {row['expected']}, reward {reward}, "
                             f"gold {row['gold'][:60]!r}, pred {row['pred'][-60:]!r}")
    scored = len(results["agree"]) + len(results["disagree"])
    false_positives = sum("expected 0, reward 1.0" in line for line in results["disagree"])
    print(f"{len(results['agree'])} of {scored} cases agree "
          f"({len(results['agree']) / max(scored, 1):.1%}), "
          f"{false_positives} false positives; {len(results['left out'])} left out")
    for kind in ("disagree", "left out"):
        print(f"\n{kind}:\n" + "\n".join(results[kind]))
    return results
