"""The house's rules, in one place: the repository's layers import one way, no module edits another,
one assembly makes a run's hooks (scale/assembly.py), es_grpo.py keeps the reference file's limits,
the analyses package its layers and short functions, and every line of Python is at most 100
characters, none joining two string literals."""
import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_imports_run_one_way():
    """Each module of analyses/ imports only from layers below it (analyses/__init__.py draws them);
    eval.py, the entry point, may import any; nothing imports eval.py."""
    root = ROOT
    layers = [["statistics"], ["verdicts"], ["evaluation"],
              ["weights", "diversity", "forgetting", "paths", "training", "verifier_cases"],
              ["reproduction.reuse"], ["reproduction.plan", "reproduction.pilot"],
              ["reproduction.evidence"], ["reproduction.matching"], ["reproduction.es_claims"],
              ["reproduction.claims"],
              ["figures", "reproduction.scaling", "reproduction.parts", "reproduction.costs",
               "reproduction.montecarlo"],
              ["reproduction.report"], ["reproduction.trajectories"]]
    rank = {f"analyses.{name}": i for i, names in enumerate(layers) for name in names}
    modules = {f"analyses.{'.'.join(path.relative_to(root / 'analyses').with_suffix('').parts)}":
               path for path in (root / "analyses").rglob("*.py") if path.name != "__init__.py"}
    assert modules.keys() == rank.keys()  # a new module takes its place in the layers
    upward = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            # from analyses.x import f, or from analyses(.reproduction) import x
            if isinstance(node, ast.ImportFrom):
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                targets = [alias.name for alias
                           in node.names] if isinstance(node, ast.Import) else []
            for imported in targets:
                if imported == "eval" or (imported in rank and rank[imported] >= rank[name]):
                    upward.append(f"{name} imports {imported}")
    assert not upward, upward


def test_each_function_of_the_package_is_short_and_eval_py_thin():
    root = ROOT
    long = [f"{path.name}:{node.name} {node.end_lineno - node.lineno + 1} lines"
            for path in [root / "eval.py", *(root / "analyses").rglob("*.py")]
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 50]
    sizes = {path.name: len(path.read_text().splitlines()) for path
             in (root / "analyses").rglob("*.py")}
    assert not long and max(sizes.values()) <= 400 and len(
        (root / "eval.py").read_text().splitlines()) <= 250, (long, sizes)


# --------------------------------------------------------------------------- the repository's
# layers

ASSEMBLY = "scale.assembly"
# What analyses/ and eval.py may import of scale/ besides its assembly and settings, each with its
# reason.
SCALE_FOR_ANALYSES = {
    "scale.assembly": "a run's hooks, as python -m scale.train builds them",
    "scale.config": "the settings and problems of a run",
    "scale.verifier": "analyses/verifier_cases.py checks the grader itself on math-verify's cases",
    "scale.runs": "a replay's CheckedFolder is a run folder that checks what it is given",
    "scale.chunks": "diversity's rollouts joined as the rollout layer joins its chunks",
}
# Module attributes a module may assign, each with its reason.
EDITS_ALLOWED = {("scale.verifier",
                  "builtins"): "the math-verify worker, a process of its own, disarms "
                                                  "its own eval and exec"}
HOOK_MAKERS = {"Context", "FastRollout", "PopulationScorer", "ResumableFolder", "Torchrun",
               "NoiseTable", "Update"}
OURS = ("es_grpo", "eval", "scale", "analyses", "tiny_model")


def sources() -> dict[str, str]:
    """Every Python module of the repository outside tests/ and report/, by its dotted name."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[0] in OURS or len(parts) == 1:
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return found


def imports(source: str) -> list[str]:
    """Every module a source imports, at its top or inside a function: `from a.b import c` gives
    a.b.c where c is a module, else a.b."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            named = [f"{node.module}.{alias.name}" for alias in node.names]
            is_module = [(ROOT / Path(*name.split("."))).with_suffix(".py").exists() for name
                         in named]
            found += [name for name, module in zip(named, is_module) if module]
            found += [node.module] if not all(is_module) else []
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.split(".")[0] in OURS]


def broken_layer_rules(modules: dict[str, str]) -> list[str]:
    broken = []
    for name, source in modules.items():
        for imported in imports(source):
            top, package = imported.split(".")[0], ".".join(imported.split(".")[:2])
            if name == "es_grpo" and not imported.startswith("tiny_model.tasks"):
                broken.append(f"es_grpo.py imports {imported}: it stands alone beside tiny_model/")
            elif name.startswith("scale") and top in ("analyses", "eval"):
                broken.append(f"{name} imports {imported}: scale/ never reaches the analyses")
            elif name.startswith("tiny_model") and top not in ("tiny_model", "es_grpo"):
                broken.append(f"{name} imports {imported}: tiny_model/ is data and its builder")
            elif (name.startswith("analyses") or name == "eval") and top == "scale" \
                    and package not in SCALE_FOR_ANALYSES:
                broken.append(f"{name} imports {imported}: analyses reach scale/ through "
                              f"{ASSEMBLY}")
            elif top == "eval" and name != "eval":
                broken.append(f"{name} imports eval.py: the entry point is imported by nothing")
    return broken


def bound_modules(tree: ast.AST) -> set[str]:
    """The names a source binds to modules: `import x`, `import x.y as z`, `from scale import
    verifier`."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            bound |= {alias.asname or alias.name for alias in node.names
                      if (ROOT / Path(*node.module.split("."), f"{alias.name}.py")).exists()}
    return bound


def attribute_edits(name: str, source: str) -> list[str]:
    """Assignments to another module's attributes: `es_grpo.score = ...`, `setattr(es_grpo,
    ...)`."""
    tree = ast.parse(source)
    modules, edits = bound_modules(tree), []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        targets = [t for target in targets for t in getattr(target, "elts", [target])]
        edits += [f"{name}:{node.lineno}: {ast.unparse(t)} assigned" for t in targets
                  if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) in modules
                  and (name, t.value.id) not in EDITS_ALLOWED]
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" and node.args \
                and getattr(node.args[0], "id", None) in modules:
            edits.append(f"{name}:{node.lineno}: setattr on the module {node.args[0].id}")
    return edits


def hooks_made_outside_the_assembly(name: str, source: str) -> list[str]:
    if name in (ASSEMBLY, "es_grpo"):
        return []
    return [f"{name}:{node.lineno}: {ast.unparse(node.func)}(...)" for node
            in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in HOOK_MAKERS]


def test_the_layers_run_one_way_across_the_repository():
    """es_grpo.py imports nothing of the repository but tiny_model/tasks.py; tiny_model/ nothing but
    itself and es_grpo.py; scale/ never imports analyses/ or eval.py; analyses/ and eval.py reach
    scale/ through its assembly and settings (and SCALE_FOR_ANALYSES' exceptions, each with its
    reason); nothing imports eval.py."""
    assert not broken_layer_rules(sources())


def test_no_module_edits_another_and_only_the_assembly_makes_a_runs_hooks():
    """Outside tests/, no module assigns an attribute of another module, and a run's hooks (Context,
    FastRollout, PopulationScorer, ResumableFolder, Torchrun) are made only by scale/assembly.py and
    es_grpo.py's own run."""
    modules = sources()
    assert not [edit for name, source in modules.items() for edit in attribute_edits(name, source)]
    assert not [made for name, source in modules.items()
                for made in hooks_made_outside_the_assembly(name, source)]


def test_the_rules_fail_on_planted_breaks():
    """Each rule catches what it forbids: `import analyses` planted in scale/, scale's decoder
    imported by an analysis, an attribute of es_grpo assigned or set, a Context built outside the
    assembly."""
    layers = broken_layer_rules({"scale.train": "import torch\nfrom analyses import statistics\n",
                                 "analyses.weights": "from scale.decode import FastRollout\n",
                                 "es_grpo": "from scale import verifier\n"})
    assert [line.split(":")[0] for line in layers] == [
        "scale.train imports analyses.statistics", "analyses.weights imports scale.decode",
        "es_grpo.py imports scale.verifier"]
    assert attribute_edits("scale.bench", "import es_grpo\nes_grpo.score = None\n")
    assert attribute_edits("scale.bench", "from scale import verifier\nverifier.grade, x = 1, 2\n")
    assert attribute_edits("scale.bench", "import es_grpo\nsetattr(es_grpo, 'score', None)\n")
    assert not attribute_edits("scale.bench", "import es_grpo\nrun = object()\nrun.grade = None\n")
    assert hooks_made_outside_the_assembly("scale.bench",
                                           "import es_grpo\nes_grpo.Context(1, 2, 3)\n")
    assert not hooks_made_outside_the_assembly(ASSEMBLY,
                                               "import es_grpo\nes_grpo.Context(1, 2, 3)\n")


# --------------------------------------------------------------------------- the reference file's
# limits

# es_grpo.py may shrink, not grow
REFERENCE_LINES, WIDTH, FUNCTION_LINES, PARAMETERS = 961, 100, 40, 8


def test_es_grpo_py_keeps_the_reference_files_limits():
    """At most 961 lines (the ratchet: it may shrink, not grow), functions of at most 40 lines and 8
    parameters (settings travel in one object). Its stand-alone run: tests/test_cli.py."""
    source = (ROOT / "es_grpo.py").read_text()
    broken = ([f"es_grpo.py: {len(source.splitlines())} lines"]
              * (len(source.splitlines()) > REFERENCE_LINES))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            count = (len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg)
                     + bool(a.kwarg))
            length = node.end_lineno - node.lineno + 1
            if length > FUNCTION_LINES or count > PARAMETERS:
                broken.append(f"es_grpo.py:{node.lineno}: {node.name}: {length} lines, {count} "
                              f"parameters")
    assert not broken


def python_files() -> list[Path]:
    return sorted(path for path in ROOT.rglob("*.py")
                  if path.relative_to(ROOT).parts[0] in (*OURS, "tests") or path.parent == ROOT)


def test_every_line_of_python_is_at_most_100_characters():
    long = [f"{path.relative_to(ROOT)}:{number}" for path in python_files()
            for number, line in enumerate(path.read_text().splitlines(), 1) if len(line) > WIDTH]
    assert not long, f"{len(long)} lines over {WIDTH} characters, the first: {long[:5]}"


def literals_joined_on_one_line(source: str) -> list[int]:
    """Lines where one string literal ends and the next begins ("a " "b"): a string split to fit a
    width and joined again, which reads as two. (Python 3.11's tokens: an f-string is one.)"""
    tokens = [token for token in tokenize.generate_tokens(io.StringIO(source).readline)
              if token.type not in (tokenize.NL, tokenize.COMMENT)]
    return [first.start[0] for first, second in zip(tokens, tokens[1:])
            if first.type == second.type == tokenize.STRING and first.end[0] == second.start[0]]


def test_no_string_literal_is_split_and_joined_on_one_line():
    joined = [f"{path.relative_to(ROOT)}:{line}" for path in python_files()
              for line in literals_joined_on_one_line(path.read_text())]
    assert not joined, f"{len(joined)} lines join two literals, the first: {joined[:5]}"
    assert literals_joined_on_one_line('x = (f"a {1} " "b"\n     "c")\n') == [1]


def test_no_module_of_scale_or_analyses_is_over_400_lines():
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines())
             for folder in ("scale", "analyses") for path in (ROOT / folder).rglob("*.py")}
    assert not {name: size for name, size in sizes.items() if size > 400}
