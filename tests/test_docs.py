"""Every command the docs give (README.md, scale/README.md, tests/EXERCISES.md, report/NOTES.md) runs from the
checkout as a user types it: each entry point starts as Python starts it (its --help, or a run where one is
seconds), and the flags the docs give es_grpo.py and scale.train parse. What cannot run here (a hub id, CUDA,
eight GPUs) is checked as far as that: its flags. A command the docs add without a check here fails."""
import importlib
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

import es_grpo
from conftest import ROOT, in_process

DOCS = ("README.md", "scale/README.md", "tests/EXERCISES.md", "report/NOTES.md")
EVAL_COMMANDS = ("reproduce", "sweep", "drift", "sparsity", "diversity", "forgetting", "curves", "verifier")
EXERCISE_COMMANDS = ("list", "make", "check")
PLACEHOLDERS = {"$M": "tiny", "$D": "", "$R": "", "$flags": "", "MODEL": "tiny", "LINE": "", "RUN": "runs/x",
                "S": "0", "T": "0.6", "LR": "1e-5"}


def documented_commands() -> list[tuple[str, str]]:
    """(document, command) for every `python ...` and `torchrun ...` the docs show, in code blocks (continued
    lines joined, comments dropped) and inline."""
    found = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                command = re.split(r"\s#\s|\s+#\s", line.strip())[0].strip()
                command = re.sub(r"^.*?\|\s*while read.*", "", command)
                found += [(doc, command)] if re.match(r"(python|torchrun) ", command) else []
        found += [(doc, c) for c in re.findall(r"`((?:python|torchrun) [^`]+)`", re.sub(r"```.*?```", "", text,
                                                                                         flags=re.S))]
    return found


def entry_point(command: str) -> tuple[str, ...] | None:
    """What a command starts: ("script", path[, subcommand]), ("module", name), ("torchrun", module), ("-c", code);
    None for the test suite itself (python -m pytest)."""
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
        return ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m", name, "--help"]
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
    """The flags a documented es_grpo.py or scale.train run gives, placeholders filled; None for other commands."""
    words = [PLACEHOLDERS.get(word, word) for word in command.split()]
    words = [("x" if before.startswith("--") else "") if word == "..." else word  # "--data ...": a value
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
    assert len(commands) > 40 and ("script", "es_grpo.py") in entries and ("module", "scale.bench") in entries
    assert {entry[0] for entry in entries} <= {"script", "module", "torchrun", "-c"}
    scripts = {entry[1] for entry in entries if entry[0] == "script"}
    assert scripts <= {"es_grpo.py", "eval.py", "tests/exercises.py", "tiny_model/pretrain.py"}, scripts


def test_every_documented_entry_point_starts_as_python_starts_it(tmp_path):
    """Each distinct script, module and python -c, as the interpreter starts it (runpy; sys.path[0] the script's
    folder, the working folder for -m, '' for -c), one after another in one fresh interpreter whose project modules
    are imported anew for each; torchrun beside it in its own. A script's subcommands (eval.py drift, ...) answer
    --help in this process, after the script itself started. A python -c that needs the hub (`datasets`) is
    compiled, not run. One interpreter, not one each: each paid its torch and transformers imports (45 s of CI's
    4 minutes for 13 of them)."""
    entries = sorted({entry_point(c) for _, c in documented_commands()} - {None})
    hub = [e for e in entries if e[0] == "-c" and "load_dataset" in e[1]]
    for entry in hub:
        compile(entry[1], "<docs>", "exec")
    subcommands = [e for e in entries if len(e) == 3 and e[1] == "eval.py"]
    for _, _, name in subcommands:
        eval_script = importlib.import_module("eval")
        assert in_process(eval_script.main, name, "--help").returncode == 0, name
    runnable = {e for e in entries if e not in hub and e not in subcommands and e[0] != "torchrun"}
    if any(e[1] == "eval.py" for e in subcommands):
        runnable.add(("script", "eval.py"))
    argvs = [fast_form(entry, tmp_path) for entry in sorted(runnable)]
    launches = [[sys.executable, "-c", ONE_INTERPRETER, json.dumps(argvs)]]
    launches += [[sys.executable, *fast_form(e, tmp_path)] for e in entries if e[0] == "torchrun"]

    def started(command):
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180,
                              env={**os.environ, "PYTHONPATH": ""})

    with ThreadPoolExecutor(2) as pool:
        shared, *torchruns = pool.map(started, launches)
    assert shared.returncode == 0, shared.stderr[-2000:]
    exits = json.loads(shared.stdout.splitlines()[-1])
    broken = [f"{' '.join(argv)}: exit {code}: {error[-300:]}" for argv, (code, error) in zip(argvs, exits)
              if code != 0]
    broken += [f"{' '.join(done.args[1:])}: exit {done.returncode}: {done.stderr.strip()[-300:]}"
               for done in torchruns if done.returncode != 0]
    assert not broken, "\n".join(broken)
    assert len(argvs) + len(torchruns) >= 12 and torchruns


# Runs each argv (json, argv[1]) as `python ARGV` would, in turn; prints [exit code, stderr's end] for each, as
# json, on its last line. The checkout's modules are dropped before each, so each imports them from its own
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
    """The flags of each es_grpo.py and scale.train run the docs show (a hub id or CUDA included: only parsed)."""
    from scale import config, train
    monkeypatch.setattr(sys, "argv", ["scale.train"])
    checked = 0
    for doc, command in documented_commands():
        flags = flags_of(command)
        if flags is None or "--help" in flags:
            continue
        if "--resume" in flags:  # its folder's config would be read: only what comes beside it is parsed
            at = flags.index("--resume")
            flags = flags[:at] + flags[at + 1 + (at + 1 < len(flags) and not flags[at + 1].startswith("--")):]
        parse = es_grpo.parse_args
        if "scale.train" in command:
            parser = es_grpo.dataclass_parser(train.ScaleArgs, "scale.train", allow_abbrev=False)
            _, flags = parser.parse_known_args(flags)
            parse = config.parse_args
        result = in_process(lambda argv: parse(argv), *flags)
        assert result.returncode == 0, f"{doc}: {command}\n{result.stderr}"
        checked += 1
    assert checked >= 10


def test_the_bench_starts_its_children_as_modules(monkeypatch):
    """scale.bench's memory and vllm parts run each configuration in a child started as `-m scale.bench` from
    the repository's root (started as a file, `import es_grpo` failed); one child started, the smallest. A
    child's refusal (measured in this process: a second child costs its imports) reaches the parent as an
    error with its message."""
    from scale import bench
    measured = bench.in_child("inference", "tiny")
    assert measured["rss_mb"] > 0 and measured["rows"] > 0
    refused = in_process(bench.main, "--child", "nope", "tiny")
    assert refused.returncode == 1 and "--child: no configuration nope tiny" in refused.stderr
    child = subprocess.CompletedProcess([], refused.returncode, refused.stdout, refused.stderr)
    monkeypatch.setattr(bench, "subprocess", SimpleNamespace(run=lambda *args, **kwargs: child))
    with pytest.raises(RuntimeError, match="child nope tiny exited 1: --child: no configuration nope tiny"):
        bench.in_child("nope", "tiny")


def test_the_readmes_verdict_table_says_only_what_report_md_shows():
    """Each row of the README's verdict table: its verdict is REPORT.md's for that claim, and every number it
    quotes appears in REPORT.md (so a report made again cannot leave the README behind)."""
    readme, report = (ROOT / "README.md").read_text(), (ROOT / "report" / "REPORT.md").read_text()
    table = readme[readme.index("| claim of the paper | verdict here |"):].split("\n\n")[0].splitlines()[2:]
    claims = report[report.index("## Claims"):].split("\n\n")[1].splitlines()[2:]
    assert len(table) == len(claims) == 6
    for row, claim in zip(table, claims):
        verdict, line = row.split(" | ")[1:3]
        assert f"**{verdict}**" in claim, row[:60]
        for number in re.findall(r"[+-]?\d+\.\d+", line):
            assert number in report, f"{number} (README: {row[:40]}...) is not in REPORT.md"
