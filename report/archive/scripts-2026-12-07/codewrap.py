"""Break code lines over WIDTH at commas (or before 'and'/'or'/'if'/'else'/'for'/operators) inside
brackets, continuing aligned after the innermost open bracket, the project's style; split plain
strings inside brackets at a space into implicitly joined pieces. Each file's AST is checked
unchanged."""
import ast
import io
import sys
import tokenize

WIDTH = 100
OPEN, CLOSE = "([{", ")]}"
BEFORE = {"and", "or", "if", "else", "for", "+", "-", "*", "/", "//", "%", "|", "&", "==", "!=",
          "<", ">", "<=", ">="}


def tokens_by_line(source):
    """line number -> [(token, stack of open bracket columns before it)]"""
    stack, by_line = [], {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        by_line.setdefault(tok.start[0], []).append((tok, [c for _, c in stack]))
        if tok.type == tokenize.OP and tok.string in OPEN:
            stack.append((tok.string, tok.start))
        elif tok.type == tokenize.OP and tok.string in CLOSE and stack:
            stack.pop()
    # convert bracket starts to (line, col)
    return by_line


def is_subscript(lines, at):
    """Whether the bracket at (line, col) opens a subscript: a [ right after a name, ) or ]."""
    line, col = at
    text = lines[line - 1]
    if text[col] != "[" or col == 0:
        return False
    before = text[:col].rstrip()
    return (col > 0 and text[col - 1] not in " ([{," and bool(before)
            and (before[-1].isalnum() or before[-1] in ")]_"))


def in_for_target(toks, i):
    """Whether token i stands between a `for` and its `in` at its own bracket depth."""
    depth = len(toks[i][1])
    for tok, stack in reversed(toks[:i]):
        if len(stack) == depth and tok.type == tokenize.NAME and tok.string in ("for", "in"):
            return tok.string == "for"
        if len(stack) < depth:
            return False
    return False


def break_once(line, toks, lineno):
    """One break of `line` (a physical line) into two, or None. toks: (token, stack) on this line,
    where each stack entry is (line, col) of an open bracket."""
    best = None
    for i, (tok, stack) in enumerate(toks):
        if tok.start[0] != lineno or tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            continue
        if not stack:
            continue
        col = tok.start[1]
        prev = toks[i - 1][0] if i else None
        ok = False
        if (prev is not None and prev.type == tokenize.OP and prev.string == ","
                and prev.start[0] == lineno):
            ok, rank = not in_for_target(toks, i), 2
        elif (tok.string in BEFORE and prev is not None and prev.string not in OPEN + ","
              and col > 0):
            ok, rank = True, 3 if tok.string == "for" else 1  # a comprehension's clause: first
        if not ok or col > WIDTH or col < 8:
            continue
        # the continuation's indent: after the innermost open bracket (on this line or above)
        bline, bcol = stack[-1]
        if any(is_subscript(source_lines, b) for b in stack):
            continue
        indent = bcol + 1 if bline == lineno else None
        if indent is None:
            indent = len(line) - len(line.lstrip())
            # bracket opened above: this line is a continuation; keep its indent
            if bline != lineno:
                pass
        if col <= indent or indent > 64:
            continue
        if len(line[:col].rstrip()) <= WIDTH:
            cand = (rank, -len(stack), col, indent)  # commas first, the shallowest, the rightmost
            best = cand if best is None or cand > best else best
    if best is None:
        stripped = line.lstrip()
        if stripped.startswith(("def ", "async def ", "class ")) and "(" in line and \
                not line[line.index("(") + 1:].startswith("\n"):
            at, pad = line.index("(") + 1, len(line) - len(stripped) + 8
            if pad + len(line[at:].lstrip()) <= WIDTH:
                return [line[:at], " " * pad + line[at:].lstrip()]
        return None
    _, _, col, indent = best
    first, rest = line[:col].rstrip(), line[col:].lstrip()
    return [first, " " * indent + rest]


def split_string(line, toks, lineno):
    """Split the string token crossing WIDTH at a space, when inside brackets; None if not
    possible."""
    for tok, stack in toks:
        if tok.type != tokenize.STRING or tok.start[0] != lineno or tok.end[0] != lineno:
            continue
        if tok.end[1] <= WIDTH or not stack:
            continue
        text = tok.string
        prefix = ""
        while text[0] in "rRbBfFuU":
            prefix, text = prefix + text[0], text[1:]
        if text[:3] in ('"""', "'''") or "b" in prefix.lower():
            return None
        quote = text[0]
        body = text[1:-1]
        start = tok.start[1] + len(prefix) + 1
        # room in the body on this line (the closing quote needs a column)
        limit = WIDTH - 1 - start
        depth, cut = 0, None
        for j, ch in enumerate(body):
            if ch == "{" and "f" in prefix.lower():
                depth += 1
            elif ch == "}" and "f" in prefix.lower():
                depth -= 1
            elif ch == " " and depth == 0 and j + 1 <= limit and j > 10:
                if j > 0 and body[j - 1] == "\\":
                    continue
                cut = j + 1
        if cut is None or "\\" in body[cut - 2:cut]:
            return None
        piece_prefix = prefix
        if "f" in prefix.lower():
            # each piece needs the f prefix only if it has braces; keep it on both (harmless)
            pass
        first = line[:tok.start[1]] + f"{prefix}{quote}{body[:cut]}{quote}"
        rest = f"{piece_prefix}{quote}{body[cut:]}{quote}" + line[tok.end[1]:]
        return [first.rstrip(), " " * tok.start[1] + rest]
    return None


def wrap_file(path):
    source = open(path).read()
    original = strip(ast.parse(source))
    for _ in range(400):
        lines = source.splitlines()
        by_line = tokens_by_line(source)
        # bracket stacks as (line, col)
        changed = False
        for n, line in enumerate(lines, 1):
            if len(line) <= WIDTH or n not in by_line:
                continue
            toks = by_line[n]
            if any(t.type == tokenize.STRING and t.start[0] != t.end[0] for t, _ in toks):
                continue
            global source_lines
            source_lines = lines
            new = (break_once(line, toks, n) or split_string(line, toks,
                                                             n) or parenthesize(line, toks, n))
            if new:
                after = lines[n:]
                merged = merge(new[1], after[0]) if after and len(new) > 1 else None
                tries = ([[new[0], merged], after[1:]],) if merged is not None else ()
                for head, tail in (*tries, [new, after]):
                    candidate = "\n".join(lines[:n - 1] + head + tail) + "\n"
                    try:
                        if strip(ast.parse(candidate)) == original:
                            source, changed = candidate, True
                            break
                    except SyntaxError:
                        pass
                if changed:
                    break
        if not changed:
            break
    open(path, "w").write(source)


def parenthesize(line, toks, lineno):
    """A statement with no bracket to break in: its expression put in parentheses (assert's
    condition, return's, raise's or an assignment's value), to be broken on the next pass."""
    import re
    if any(stack for tok, stack in toks) or line.rstrip().endswith(("\\", ":")):
        return None
    m = re.match(r"^(\s*)(assert |return |raise |from [\w.]+ import |[\w.]+(?:, [\w.]+)* = )", line)
    if not m:
        return None
    start = m.end()
    end = len(line)
    depth = 0
    for tok, _ in toks:
        if tok.type == tokenize.COMMENT:
            end = min(end, tok.start[1])
        if tok.type == tokenize.OP and tok.string in OPEN:
            depth += 1
        elif tok.type == tokenize.OP and tok.string in CLOSE:
            depth -= 1
        elif tok.type == tokenize.OP and tok.string == "," and depth == 0 and tok.start[1] > start \
                and m.group(2) == "assert ":
            end = min(end, tok.start[1])
    code = line[start:end].rstrip()
    return [line[:start] + "(" + code + ")" + line[start + len(code):]]


def merge(rest, following):
    """rest and the next line as one line, where the next continues at rest's indent and both
    fit."""
    indent = len(rest) - len(rest.lstrip())
    if len(following) - len(following.lstrip()) != indent or "#" in rest or not following.strip():
        return None
    if not rest.rstrip().endswith((",", '"', "'")):
        return None
    joined = rest.rstrip() + " " + following.strip()
    return joined if len(joined) <= WIDTH else None


def fixstack(toks, source):
    return toks


def strip(tree):
    return ast.dump(tree)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        wrap_file(p)
