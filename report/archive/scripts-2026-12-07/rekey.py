"""Re-key a report's saved analyses after a change that moved code without changing what it
measures.

    python rekey.py OLD_COMMIT_DIGESTS.json REPORT_FOLDER [REPORT_FOLDER ...]

A saved analysis is re-keyed only where its key's code digest is the one the old code gave (so it
was valid before the change) and every other part of its key is unchanged; its result and its "made"
time are kept, and a "rekeyed" note names the change."""
import importlib
import json
import sys
from pathlib import Path

from analyses.reproduction.reuse import code_of

FUNCTIONS = {"population_counts": "analyses.diversity", "drifts": "analyses.weights",
             "heldout_base": "analyses.forgetting", "heldout_counts": "analyses.forgetting",
             "sparse_over_seeds": "analyses.weights", "sparsity_analysis": "analyses.weights"}
NOTE = ("re-keyed on 2026-12-07 (issue 63: the analyses' decoding context moved into "
        "scale/assembly.py "
        "and the grader became a Context hook; the tiny report's analyses measured again with the "
        "new " "code gave the same results: report/NOTES.md)")


def main(old_path, folders):
    old = json.loads(Path(old_path).read_text())
    new = {name: code_of(getattr(importlib.import_module(module), name))
           for name, module in FUNCTIONS.items()}
    for folder in folders:
        for path in sorted(Path(folder, "analyses", "reused").glob("*.json")):
            saved = json.loads(path.read_text())
            name, code = saved["key"]["function"], saved["key"]["code"]
            if code == new[name]:
                print(f"{path}: already under the new key")
                continue
            if code != old[name]:
                raise SystemExit(f"{path}: its key is not the old code's ({code} != {old[name]}): "
                                 f"not re-keyed")
            saved["key"]["code"], saved["rekeyed"] = new[name], NOTE
            path.write_text(json.dumps(saved, default=float))
            print(f"{path}: {name} {code} -> {new[name]}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
