"""Join comprehension targets split across lines (`for name,` / `value in ...`)."""
import re
import sys

for path in sys.argv[1:]:
    lines = open(path).read().split("\n")
    out, i, changed = [], 0, 0
    while i < len(lines):
        line = lines[i]
        if re.search(r"\bfor [\w, ]+,$", line) and i + 1 < len(lines) and re.match(
                r"^\s*[\w, ]+ in\b", lines[i + 1]):
            out.append(line + " " + lines[i + 1].lstrip())
            i += 2
            changed += 1
            continue
        out.append(line)
        i += 1
    if changed:
        open(path, "w").write("\n".join(out))
        print(path, changed)
