"""Each measurement that reproduce saves carries a version by hand (analyses.evaluation.versioned):
its saved results are keyed by it, not by its code, so a refactor measures nothing again. Here each
one runs on a small fixture (the tiny model and copies of it moved by seeded noise) and its result
must equal the one kept in tests/golden/NAME.json at the same version: a number that moves without
a bump fails. After a bump, `ES_GRPO_GOLDEN=write python -m pytest -q tests/test_golden.py` writes
the new results; it never overwrites one kept at the function's own version."""
import json
import math
import os
from pathlib import Path

import pytest
import torch

import es_grpo
from analyses import diversity, forgetting, weights
from scale.config import Args

GOLDEN = Path(__file__).parent / "golden"
ARGS = Args(eval_samples=4, eval_problems=2, heldout_problems=2, max_new_tokens=8,
            eval_temperature=1.0)
MOVED = {"es": (1, 0.02), "grpo": (2, 0.05), "null": (3, 0.02)}  # model -> (seed, noise scale)


def measure(name: str, models: dict):
    """The saved measurement NAME on the fixture's models, as JSON would give it back."""
    es, grpo, null = models["es"], models["grpo"], models["null"]
    held = forgetting.HeldOut("tiny", 2)
    cases = {
        "population_counts": lambda: diversity.population_counts(
            "tiny", diversity.Population(2, [1e-3], 2), 0, ARGS),
        "heldout_base": lambda: forgetting.heldout_base(held, ARGS),
        "heldout_counts": lambda: [forgetting.heldout_counts(
            forgetting.HeldOut("tiny", 2, ["add", "sort"]), es, seed, ARGS) for seed in (None, 0)],
        "drifts": lambda: weights.drifts("tiny", [es, grpo], ARGS),
        "drift_analysis": lambda: weights.drift_analysis("tiny", [es, grpo], ARGS),
        "sparsity_analysis": lambda: weights.sparsity_analysis(
            "tiny", es, weights.SparsityMasks([0.5], null=null), ARGS),
        "sparse_over_seeds": lambda: weights.sparse_over_seeds("tiny", [es], [null], ARGS)}
    text = json.dumps(cases[name](), default=float)
    for role, folder in models.items():  # this session's paths, by role
        text = text.replace(json.dumps(folder)[1:-1], role.upper())
    return json.loads(text)


def versioned_functions() -> dict:
    return {name: function for module in (diversity, forgetting, weights)
            for name, function in vars(module).items()
            if callable(function) and hasattr(function, "version")
            and function.__module__ == module.__name__}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    """The tiny model moved by seeded Gaussian noise of a given scale, one folder a role."""
    folders = {}
    for role, (seed, scale) in MOVED.items():
        model, tokenizer = es_grpo.load_model("")
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for param in model.parameters():
                param.add_(torch.randn(param.shape, generator=generator) * scale)
        folder = tmp_path_factory.mktemp("golden") / role
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[role] = str(folder)
    return folders


def same(measured, kept, where="result") -> list[str]:
    """Where measured and kept differ: floats beyond rounding (another CPU's), anything else at
    all."""
    if isinstance(kept, dict) and isinstance(measured, dict):
        return ([f"{where}: keys {sorted(measured)} against {sorted(kept)}"]
                if measured.keys() != kept.keys()
                else [d for k in kept for d in same(measured[k], kept[k], f"{where}.{k}")])
    if isinstance(kept, list) and isinstance(measured, list):
        return ([f"{where}: {len(measured)} items against {len(kept)}"]
                if len(measured) != len(kept)
                else [d for i, (m, k) in enumerate(zip(measured, kept))
                      for d in same(m, k, f"{where}[{i}]")])
    if isinstance(kept, float) and isinstance(measured, (int, float)):
        close = (math.isnan(kept) and math.isnan(measured)
                 or math.isclose(measured, kept, rel_tol=1e-5, abs_tol=1e-9))
        return [] if close else [f"{where}: {measured!r} against {kept!r}"]
    return [] if measured == kept else [f"{where}: {measured!r} against {kept!r}"]


def test_every_saved_measurement_has_a_golden_result():
    assert set(versioned_functions()) == {path.stem for path in GOLDEN.glob("*.json")}


@pytest.mark.parametrize("name", sorted(versioned_functions()))
def test_a_measurements_numbers_move_only_with_its_version(name, models):
    version, path = versioned_functions()[name].version, GOLDEN / f"{name}.json"
    kept = json.loads(path.read_text()) if path.exists() else None
    measured = measure(name, models)
    if os.environ.get("ES_GRPO_GOLDEN") == "write" and (kept is None
                                                         or kept["version"] != version):
        path.write_text(json.dumps({"version": version, "result": measured}, indent=1) + "\n")
        return
    assert kept is not None and kept["version"] == version, (
        f"{name} is at version {version}, {path.name} at "
        f"{kept and kept['version']}: write it (this module's docstring)")
    moved = same(measured, kept["result"])
    assert not moved, f"{name}'s numbers moved at version {version} (bump it): {moved[:3]}"


def test_the_comparison_finds_a_moved_number_and_forgives_rounding():
    kept = {"a": [1, 0.5, float("nan")], "b": "ES"}
    assert same({"a": [1, 0.5 * (1 + 1e-7), float("nan")], "b": "ES"}, kept) == []
    assert same({"a": [1, 0.51, float("nan")], "b": "ES"}, kept) == [
        "result.a[1]: 0.51 against 0.5"]
    assert same({"a": [2, 0.5, float("nan")], "b": "ES"}, kept) == ["result.a[0]: 2 against 1"]
