"""Speed and memory of es_grpo.py against their physical limits and against TRL:
`python -m scale.bench` (__main__.py, the command; --help lists the parts). harness.py times and
starts children; the parts are in tiny.py, grading.py, engine.py, real.py and tasks.py, by name in
parts.py. Each builds what it measures with scale/assembly.py, as a run with its settings would."""
from scale.bench.harness import in_child
from scale.bench.parts import COMPARISONS, PARTS, REAL, TABLES, child, measure

__all__ = ["COMPARISONS", "PARTS", "REAL", "TABLES", "child", "in_child", "main", "measure"]


def __getattr__(name: str):
    # main lives in __main__.py, imported on first use: importing it here would put it in
    # sys.modules before `python -m scale.bench` runs it as __main__ (runpy warns of a double
    # import)
    if name == "main":
        from scale.bench.__main__ import main
        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
