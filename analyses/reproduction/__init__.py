"""`eval.py reproduce`: the plan of runs, the evidence gathered from them, the claims judged on it,
and the report written from both (see analyses/__init__.py for the order)."""
