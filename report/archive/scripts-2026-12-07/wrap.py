"""Wrap lines over WIDTH: comments and docstrings reflowed, code by ruff format --range (AST
kept)."""
import ast
import io
import re
import subprocess
import sys
import textwrap
import tokenize

WIDTH = 100
COMMANDS = ("|", "python ", "torchrun", "bash ", "pip ", "$ ")  # a table row or a command line
ITEM = re.compile(r"^(\s*)([-*] |\d+\. |\| |>>> |\$ )")


def fill(text, first_prefix, later_prefix):
    return textwrap.wrap(text, WIDTH, initial_indent=first_prefix, subsequent_indent=later_prefix,
                         break_long_words=False, break_on_hyphens=False)


def docstring_ranges(source):
    ranges = []
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value,
                               ast.Constant) and isinstance(body[0].value.value, str):
            ranges.append((body[0].lineno, body[0].end_lineno))
    return ranges


def reflow_docstrings(lines, source):
    """lines: list of str (no newline). Returns new lines."""
    out_edits = {}  # start line index -> (end index exclusive, new lines)
    for start, end in docstring_ranges(source):
        s, e = start - 1, end  # indices [s, e)
        if any(l.rstrip().endswith("\\") for l in lines[s:e]):
            continue
        i = s
        while i < e:
            if len(lines[i]) <= WIDTH:
                i += 1
                continue
            # paragraph containing i: go back while same indent, nonblank, not an item start
            indent = len(lines[i]) - len(lines[i].lstrip())
            first = i
            while first > s and lines[first - 1].strip() and not ITEM.match(lines[first]) \
                    and len(lines[first - 1]) - len(lines[first - 1].lstrip()) == indent \
                    and first - 1 != s:
                first -= 1
            if first - 1 == s and lines[s].strip() and not ITEM.match(lines[first]):
                # the opening line belongs to this paragraph if its text indent matches
                if len(lines[s]) - len(lines[s].lstrip()) == indent:
                    first = s
            last = i + 1
            while last < e and lines[last].strip() and not ITEM.match(lines[last]) \
                    and len(lines[last]) - len(lines[last].lstrip()) == indent \
                    and not lines[last].strip().startswith('"""'):
                last += 1
            base = min((len(l) - len(l.lstrip()) for l in lines[s + 1:e] if l.strip()),
                       default=indent)
            block = lines[first:last]
            if indent > base or any("  " in l.strip()
                                    or l.strip().startswith(COMMANDS)
                                    for l in block):
                i = last
                continue
            m = ITEM.match(lines[first])
            pad = " " * indent
            later = pad + (" " * len(m.group(2)) if m and m.group(2) in ("- ", "* ") else "")
            text = " ".join(l.strip() for l in lines[first:last])
            new = fill(text, pad, later)
            # items' continuation lines are indented deeper in the source: keep those with the item
            if any(len(n) > WIDTH for n in new):
                i = last
                continue
            out_edits[first] = (last, new)
            i = last
    result, i = [], 0
    while i < len(lines):
        if i in out_edits:
            last, new = out_edits[i]
            result += new
            i = last
        else:
            result.append(lines[i])
            i += 1
    return result


def wrap_comments(lines, source):
    comments = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.start[1]
    except tokenize.TokenError:
        return lines
    result = []
    for n, line in enumerate(lines, 1):
        col = comments.get(n)
        if len(line) <= WIDTH or col is None or re.search(r"noqa|type:|pragma|fmt:", line[col:]):
            result.append(line)
            continue
        code, comment = line[:col].rstrip(), line[col:].lstrip("#").strip()
        indent = " " * (len(line) - len(line.lstrip()))
        if not code:
            result += fill(comment, indent + "# ", indent + "# ")
        elif len(code) <= WIDTH:
            result += fill(comment, indent + "# ", indent + "# ") + [code]
        else:
            result.append(line)
    return result


def code_lines_over(path):
    source = open(path).read()
    lines = source.splitlines()
    strings = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            strings |= set(range(tok.start[0], tok.end[0] + 1))
    return [n for n, l in enumerate(lines, 1) if len(l) > WIDTH and n not in strings]


def main(paths):
    for path in paths:
        source = open(path).read()
        before = ast.dump(ast.parse(source))
        lines = source.splitlines()
        lines = reflow_docstrings(lines, source)
        text = "\n".join(lines) + "\n"
        lines = wrap_comments(text.splitlines(), text)
        text = "\n".join(lines) + "\n"
        open(path, "w").write(text)
        after = open(path).read()
        tree_after = ast.parse(after)
        for node in ast.walk(tree_after):  # docstrings may differ: compare without them
            pass
        if strip_docs(ast.parse(source)) != strip_docs(tree_after):
            print(f"{path}: AST CHANGED", file=sys.stderr)


def strip_docs(tree):
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value,
                               ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:]
    return ast.dump(tree)


if __name__ == "__main__":
    main(sys.argv[1:])
