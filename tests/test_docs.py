"""Every command the docs give (README.md, scale/README.md, tests/EXERCISES.md, report/NOTES.md)
runs from the checkout as a user types it: each entry point starts as Python starts it (its --help,
or a run where one is seconds), and the flags the docs give es_grpo.py and scale.train parse. What
cannot run here (a hub id, CUDA, eight GPUs) is checked as far as that: its flags. A command the
docs add without a check here fails."""
import ast
import importlib
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from types import SimpleNamespace

import pytest

import es_grpo
from conftest import ROOT, command, in_process, later, ran

DOCS = ("README.md", "scale/README.md", "tests/EXERCISES.md", "report/NOTES.md",
        "docs/real-model.md", "docs/reproduction.md")
EVAL_COMMANDS = ("reproduce", "sweep", "drift", "sparsity", "diversity", "forgetting", "curves",
                 "verifier")
EXERCISE_COMMANDS = ("list", "make", "check")
PLACEHOLDERS = {"$M": "tiny", "$D": "", "$R": "", "$flags": "", "MODEL": "tiny", "LINE": "",
                "RUN": "runs/x", "S": "0", "T": "0.6", "LR": "1e-5"}


def documented_commands() -> list[tuple[str, str]]:
    """(document, command) for every `python ...` and `torchrun ...` the docs show, in code blocks
    (continued lines joined, comments dropped) and inline."""
    found = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                command = re.split(r"\s#\s|\s+#\s", line.strip())[0].strip()
                command = re.sub(r"^.*?\|\s*while read.*", "", command)
                found += [(doc, command)] if re.match(r"(python|torchrun) ", command) else []
        found += [(doc, c) for c in re.findall(r"`((?:python|torchrun) [^`]+)`",
                                               re.sub(r"```.*?```", "", text, flags=re.S))]
    return found


def entry_point(command: str) -> tuple[str, ...] | None:
    """What a command starts: ("script", path[, subcommand]), ("module", name), ("torchrun",
    module), ("-c", code); None for the test suite itself (python -m pytest)."""
    words = command.split()
    if words[0] == "torchrun":
        return ("torchrun", words[words.index("-m") + 1])
    if words[1] == "-m":
        return None if words[2] == "pytest" else ("module", words[2])
    if words[1] == "-c":
        return ("-c", command.split("-c", 1)[1].strip().strip("\"'"))
    script, rest = words[1], words[2:]
    commands = {"eval.py": EVAL_COMMANDS, "tests/exercises.py": EXERCISE_COMMANDS}.get(script, ())
    return ("script", script, rest[0]) if rest and rest[0] in commands else ("script", script)


def fast_form(entry: tuple[str, ...], tmp) -> list[str]:
    """The argv (after the interpreter) that checks an entry point in seconds."""
    kind, name = entry[0], entry[1]
    if kind == "torchrun":
        return ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m", name,
                "--help"]
    if kind == "module":
        return ["-m", name] if name == "scale.memory" else ["-m", name, "--help"]
    if kind == "-c":
        return ["-c", name]
    if entry == ("script", "tests/exercises.py", "list"):
        return list(entry[1:])
    if entry == ("script", "tests/exercises.py", "make"):
        return [*entry[1:], "--out", str(tmp / "student"), "--only", "1"]
    return [*entry[1:], "--help"]


def flags_of(command: str) -> list[str] | None:
    """The flags a documented es_grpo.py or scale.train run gives, placeholders filled; None for
    other commands."""
    words = [PLACEHOLDERS.get(word, word) for word in command.split()]
    # "--data ...": a value
    words = [("x" if before.startswith("--") else "") if word == "..." else word
             for before, word in zip(["", *words], words)]
    words = [word for word in words if word]
    if words[:2] == ["python", "es_grpo.py"]:
        return words[2:]
    if "scale.train" in words:
        return words[words.index("scale.train") + 1:]
    return None


def test_the_docs_give_commands_and_each_has_a_check():
    commands = documented_commands()
    entries = {entry_point(c) for _, c in commands} - {None}
    assert len(commands) > 40 and ("script",
                                   "es_grpo.py") in entries and ("module", "scale.bench") in entries
    assert {entry[0] for entry in entries} <= {"script", "module", "torchrun", "-c"}
    scripts = {entry[1] for entry in entries if entry[0] == "script"}
    assert scripts <= {"es_grpo.py", "eval.py", "tests/exercises.py",
                       "tiny_model/pretrain.py"}, scripts


ENTRY_POINTS: dict = {}  # their launches, started as the session begins (conftest.py)


def entry_points() -> list[tuple[str, ...]]:
    return sorted({entry_point(c) for _, c in documented_commands()} - {None})


def start_entry_points(root: Path):
    """Every documented entry point that starts a process: the scripts, modules and python -c in
    one fresh interpreter, then each torchrun, run in conftest.later's lane: (their argvs, how each
    launch ended)."""
    if ENTRY_POINTS:
        return

    def started():
        entries = entry_points()
        subcommands = [e for e in entries if len(e) == 3 and e[1] == "eval.py"]
        runnable = {e for e in entries if e[0] != "torchrun" and e not in subcommands
                    and not (e[0] == "-c" and "load_dataset" in e[1])}
        if subcommands:
            runnable.add(("script", "eval.py"))
        argvs = [fast_form(entry, root) for entry in sorted(runnable)]
        launches = [["-c", ONE_INTERPRETER, json.dumps(argvs)]]
        launches += [fast_form(e, root) for e in entries if e[0] == "torchrun"]
        done = []
        for number, argv in enumerate(launches):
            (logs := root / f"launch{number}").mkdir()
            done.append(ran(command(argv, ROOT, logs, PYTHONPATH=""), logs))
        return argvs, done
    ENTRY_POINTS.update(done=later(started))


def test_every_documented_entry_point_starts_as_python_starts_it(tmp_path):
    """Each distinct script, module and python -c, as the interpreter starts it (runpy; sys.path[0]
    the script's folder, the working folder for -m, '' for -c), one after another in one fresh
    interpreter whose project modules are imported anew for each; each torchrun in its own. A
    script's subcommands (eval.py drift, ...) answer --help in this process, after the script itself
    started. A python -c that needs the hub (`datasets`) is compiled, not run. One interpreter, not
    one each: each paid its torch and transformers imports."""
    start_entry_points(tmp_path)  # if the session did not start them
    entries = entry_points()
    for entry in [e for e in entries if e[0] == "-c" and "load_dataset" in e[1]]:
        compile(entry[1], "<docs>", "exec")
    for _, _, name in [e for e in entries if len(e) == 3 and e[1] == "eval.py"]:
        eval_script = importlib.import_module("eval")
        assert in_process(eval_script.main, name, "--help").returncode == 0, name
    argvs, (shared, *torchruns) = ENTRY_POINTS["done"].result()
    assert shared.returncode == 0, shared.stderr[-2000:]
    exits = json.loads(shared.stdout.splitlines()[-1])
    broken = [f"{' '.join(argv)}: exit {code}: {error[-300:]}"
              for argv, (code, error) in zip(argvs, exits) if code != 0]
    broken += [f"{' '.join(done.args[1:])}: exit {done.returncode}: {done.stderr.strip()[-300:]}"
               for done in torchruns if done.returncode != 0]
    assert not broken, "\n".join(broken)
    assert len(argvs) + len(torchruns) >= 12 and torchruns


# Runs each argv (json, argv[1]) as `python ARGV` would, in turn; prints [exit code, stderr's end]
# for each, as
# json, on its last line. The checkout's modules are dropped before each, so each imports them from
# its own
# sys.path; installed packages (torch, transformers) stay imported.
ONE_INTERPRETER = """
import contextlib, io, json, os, runpy, sys, traceback
root, installed, exits = os.getcwd(), list(sys.path[1:]), []
for argv in json.loads(sys.argv[1]):
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        if where.startswith(root + os.sep) and not where.startswith(sys.prefix):
            del sys.modules[name]
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if argv[0] == "-m":
                sys.argv, sys.path[:] = [argv[1], *argv[2:]], [root, *installed]
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            elif argv[0] == "-c":
                sys.argv, sys.path[:] = ["-c"], ["", *installed]
                exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
            else:
                script = os.path.abspath(argv[0])
                sys.argv, sys.path[:] = argv, [os.path.dirname(script), *installed]
                runpy.run_path(script, run_name="__main__")
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
            if isinstance(exit.code, str):
                print(exit.code, file=err)
        except BaseException:
            code = 1
            traceback.print_exc(file=err)
    exits.append([code, err.getvalue()])
print(json.dumps(exits))
"""


def test_every_documented_run_gives_flags_that_parse(monkeypatch):
    """The flags of each es_grpo.py and scale.train run the docs show (a hub id or CUDA included:
    only parsed)."""
    from scale import config
    monkeypatch.setattr(sys, "argv", ["scale.train"])
    checked = 0
    for doc, shown in documented_commands():
        flags = flags_of(shown)
        if flags is None or "--help" in flags:
            continue
        # its folder's config would be read: only what comes beside it is parsed
        if "--resume" in flags:
            at = flags.index("--resume")
            flags = flags[:at] + flags[at + 1 + (at + 1 < len(flags)
                                                 and not flags[at + 1].startswith("--")):]
        parse = es_grpo.parse_args
        if "scale.train" in shown:
            parse = config.parse_args
        result = in_process(lambda argv: parse(argv), *flags)
        assert result.returncode == 0, f"{doc}: {shown}\n{result.stderr}"
        checked += 1
    assert checked >= 10


BENCH: dict = {}  # the bench's child, started as the session begins (conftest.py)


def start_bench_child(root=None):
    """scale.bench's smallest memory child, run in conftest.later's lane: it measures peak memory,
    not speed."""
    if not BENCH:
        from scale import bench
        BENCH["done"] = later(lambda: bench.in_child("inference", "tiny"))


def test_the_bench_starts_its_children_as_modules(monkeypatch):
    """scale.bench's memory and vllm parts run each configuration in a child started as `-m
    scale.bench` from the repository's root (started as a file, `import es_grpo` failed); one child
    started, the smallest. A child's refusal (measured in this process: a second child costs its
    imports) reaches the parent as an error with its message."""
    from scale import bench
    start_bench_child()  # if the session did not start it
    measured = BENCH["done"].result()
    assert measured["rss_mb"] > 0 and measured["rows"] > 0
    refused = in_process(bench.main, "--child", "nope", "tiny")
    assert refused.returncode == 1 and "--child: no configuration nope tiny" in refused.stderr
    child = subprocess.CompletedProcess([], refused.returncode, refused.stdout, refused.stderr)
    monkeypatch.setattr(bench.harness, "subprocess",
                        SimpleNamespace(run=lambda *args, **kwargs: child))
    with pytest.raises(RuntimeError,
                       match="child nope tiny exited 1: --child: no configuration nope tiny"):
        bench.in_child("nope", "tiny")


# the front door: a few screens, no sentence a paragraph long
README_BYTES, SENTENCE_WORDS = 12_000, 50


def prose(text: str) -> str:
    """A markdown file's prose: no code blocks, tables, headings, images or HTML comments."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith(("|", "#", "![", "<!--")))


def sentences(text: str) -> list[str]:
    """The prose's sentences: split after . ! ? before a capital, a backquote or a bracket, and at
    blank lines and list bullets."""
    parts = re.split(r"\n\s*\n|\n\s*[-*] |(?<=[.!?])\s+(?=[A-Z`(\[*])", prose(text))
    return [" ".join(part.split()) for part in parts if part.strip()]


def test_the_readme_is_a_front_door_of_a_few_screens():
    """README.md: at most README_BYTES, no sentence over SENTENCE_WORDS words, a picture, and what a
    teacher needs (the paper-to-function table, the exercises) in its first half."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= README_BYTES, f"README.md is {len(readme.encode())} bytes"
    long = [f"{len(s.split())} words: {s[:80]}..." for s in sentences(readme) if len(s.split())
            > SENTENCE_WORDS]
    assert not long, long
    assert re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", readme) and (ROOT / re.search(
        r"!\[[^\]]+\]\(([^)]+\.png)\)", readme).group(1)).is_file()
    half = len(readme) / 2
    assert (readme.index("| the paper | function |") < half
            and readme.index("tests/EXERCISES.md") < half)


def headings(path: Path) -> set[str]:
    """A markdown file's section titles, and their GitHub anchors."""
    titles = [line.lstrip("#").strip() for line in path.read_text().splitlines()
              if line.startswith("#")]
    slug = lambda title: re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")  # noqa: E731
    return set(titles) | {"#" + slug(title) for title in titles}


SECTION_POINTER = re.compile(r"([\w./-]+\.md)(?:'s)?,? \"([^\"]{3,90})\"")
TEXT_FILES = ("*.md", "*.py", "*.sh", "*.json")


def text_of(path: Path) -> str:
    """A file's text as its reader sees it: a Python file's strings (adjacent literals joined, as
    the parser joins them) and comments, so that a pointer split across source lines reads whole."""
    text = path.read_text(errors="ignore")
    if path.suffix != ".py":
        return text
    strings = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.JoinedStr):
            strings.append("".join(v.value if isinstance(v, ast.Constant) else "{}"
                                   for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.append(node.value)
    comments = [token.string.lstrip("# ")
                for token in tokenize.generate_tokens(io.StringIO(text).readline)
                if token.type == tokenize.COMMENT]
    return "\n".join([*strings, " ".join(comments)])


def pointers() -> list[tuple[str, str, str]]:
    """(where, file, target) for every markdown link to a local file (target: its #anchor or "") in
    the docs, and every pointer to a section by name (a file's name, a comma, the section's title in
    double quotes) anywhere in the repository's text, the dated archive (history as it was written)
    left out."""
    found = []
    for path in sorted(p for pattern in TEXT_FILES for p in ROOT.rglob(pattern)
                       if ".git" not in p.parts and "archive" not in p.parts and "runs" not
                       in p.parts):
        text, where = text_of(path), str(path.relative_to(ROOT))
        for file, title in SECTION_POINTER.findall(text):
            found.append((where, file, " ".join(title.split())))
        if path.suffix == ".md":
            for link in re.findall(r"\]\(([^)\s]+)\)", text):
                if not re.match(r"[a-z]+:", link):
                    file, _, anchor = link.partition("#")
                    found.append((where,
                                  str((path.parent / file).relative_to(ROOT)) if file else where,
                                  "#" + anchor if anchor else ""))
    return found


def test_every_link_and_section_pointer_resolves():
    """Every local link of the docs reaches a file (and its #anchor a section), and every pointer to
    a section by name in the repository names a section its file has (the file found from the
    repository's root, or from the pointing file's folder)."""
    dead, checked = [], 0
    for where, file, target in pointers():
        candidates = [ROOT / file, ROOT / Path(where).parent / file]
        path = next((p for p in candidates if p.is_file()), None)
        checked += 1
        if path is None:
            dead.append(f"{where}: {file} (no such file)")
        elif target and path.suffix == ".md" and target not in headings(path):
            dead.append(f"{where}: {file}, {target!r} (no such section)")
    assert checked > 50 and not dead, "\n".join(dead)


def numbers(text: str) -> list[str]:
    return re.findall(r"[+-]?\d+\.\d+", text)


def test_the_figures_the_docs_quote_are_their_files():
    """The README's default-run table is what `python es_grpo.py` printed for its run folder (every
    column the script prints), each results line's verdicts and numbers are the reports' it names,
    and EXERCISES.md's table of the schedules' ends is REPORT.md's (so a report made again cannot
    leave the docs behind)."""
    readme = (ROOT / "README.md").read_text()
    summary = json.loads((ROOT / "report" / "readme-runs" / "default-s0"
                          / "summary.json").read_text())
    table = es_grpo.markdown_table({row["name"]: row for row in summary["stages"]},
                                   es_grpo.TABLE_COLUMNS, "stage")
    assert table in readme
    reports = {"tiny": ROOT / "report" / "report.json",
               "real": ROOT / "report" / "smollm2-add-cpu" / "report.json"}
    verdicts = {name: {claim["claim"]: claim["verdict"] for claim
                       in json.loads(path.read_text())["claims"]}
                for name, path in reports.items()}
    results = readme[readme.index("## Results"):].split("\n## ")[0]
    rows = [line for line in results.splitlines() if re.match(r"\| [1-6]\. ", line)]
    assert len(rows) == 6
    for row in rows:
        number, tiny, real = int(row[2]), *row.split(" | ")[1:3]
        assert (tiny, real.rstrip(" |")) == (verdicts["tiny"][number],
                                             verdicts["real"][number]), row
    texts = {name: (path.parent / "REPORT.md").read_text() for name, path in reports.items()}
    ends = texts["tiny"].split("## Models at the end of each schedule")[1].split("\n## ")[0]
    models = {line.split(" | ")[0].strip("| "): line for line in ends.splitlines()
              if line.startswith("| ")}
    exercise = (ROOT / "tests" / "EXERCISES.md").read_text()
    quoted = [line for line in exercise.splitlines() if re.match(r"\| (base|GRPO|ES)", line)
              and "±" in line]
    assert len(quoted) == 4
    for line in quoted:  # EXERCISES.md's table of the schedules' ends: REPORT.md's cells
        cells = line.strip("| ").split(" | ")
        assert all(cell in models[cells[0].split(" (")[0]] for cell in cells[1:]), line
    prose_part = "\n".join(line for line in results.splitlines() if not line.startswith("|"))
    missing = [n for n in numbers(prose_part) if not any(n in text for text in texts.values())]
    assert not missing, f"README's results quote {missing}, which no REPORT.md shows"


def exercise_sections() -> dict[int, str]:
    """tests/EXERCISES.md's paragraphs of each exercise, by number (its bold heading on)."""
    parts = re.split(r"^\*\*(\d+)\. ", (ROOT / "tests" / "EXERCISES.md").read_text(), flags=re.M)
    return {int(number): text for number, text in zip(parts[1::2], parts[2::2])}


def source_of_test(node_id: str) -> str:
    """A test's source, its decorators (the cases of a parametrised test) included."""
    import exercises
    test = exercises.test_function(node_id)
    start = min([test.lineno, *(d.lineno for d in test.decorator_list)])
    path = ROOT / node_id.split("::")[0]
    return "\n".join(path.read_text().splitlines()[start - 1:test.end_lineno])


def test_the_exercises_guide_tells_each_exercise_as_exercises_py_does():
    """tests/EXERCISES.md against tests/exercises.py: a section per exercise, titled alike; a hole's
    names its functions, says `check` passes its counts of tests and cases, names each of its tests
    and no other; each size it gives in its goal and expectation (n = N) is a call's first argument
    in those tests, each input it quotes is in their source, and each flag it quotes, es_grpo.py's.
    """
    import exercises
    sections = exercise_sections()
    assert sorted(sections) == [e.number for e in exercises.EXERCISES]
    for e in exercises.EXERCISES:
        heading, rest = sections[e.number].split("**", 1)
        assert heading.rstrip(".").lower() == e.title.lower(), (e.number, heading)
        if not e.tests:
            continue
        told = rest.split("Questions:")[0]
        assert re.findall(r"`(\w+)`", told.split("Goal:")[0]) == list(e.functions), e.number
        counts = re.findall(r"`check` passes (\d+) tests?, (\d+) cases", told)
        assert counts == [(str(len(e.tests)), str(exercises.cases(e)))], (e.number, counts)
        named = set(re.findall(r"`(test_\w+)`", told))
        assert named == {test.split("::")[1] for test in e.tests}, (e.number, named)
        sources = "\n".join(source_of_test(test) for test in e.tests)
        for size in re.findall(r"\bn = (\d+)", told):  # a call's first argument, as pass_at_k's n
            assert re.search(rf"\w\({size}\b", sources), (e.number, f"n = {size}")
        for quoted in re.findall(r"`([^`]+)`", told.split("Expected:")[1]):
            if quoted.startswith("--"):
                es_grpo.parse_args([quoted])
            elif not quoted.startswith(("test_", "check")):
                assert quoted in sources, (e.number, quoted)


def table_rows(text: str) -> list[dict[str, str]]:
    """The rows of a text's first markdown table, each {column: cell}."""
    lines = ("| " + text.split("\n\n| ", 1)[1].split("\n\n")[0]).splitlines()
    cells = [[cell.strip() for cell in line.strip("| ").split(" | ")] for line in lines]
    return [dict(zip(cells[0], row)) for row in cells[2:]]


def test_the_experiments_quote_one_evaluation_of_the_base_alike():
    """Exercises 7, 9 and 11 evaluate the base model alike (dev, 100 problems, 64 samples at 0.6,
    seed 0): exercise 7's row at 0.6 and the base rows of 9 and 11 give the same Pass@K."""
    sections = exercise_sections()
    seven = next(row for row in table_rows(sections[7]) if row["temperature"].startswith("0.6"))
    for number in (9, 11):
        base = next(row for row in table_rows(sections[number])
                    if row.get("variant", row.get("population")) == "(base model)")
        assert {k: base[k] for k in ("Pass@1", "Pass@16", "Pass@64")} == {
            k: seven[k] for k in ("Pass@1", "Pass@16", "Pass@64")}, number
