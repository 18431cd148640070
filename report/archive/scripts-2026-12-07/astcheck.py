"""Prints the .py files whose syntax tree, docstrings aside, differs from HEAD's."""
import ast
import subprocess


def strip(src):
    tree = ast.parse(src)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value,
                               ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:]
    return ast.dump(tree)


files = subprocess.run(["git", "diff", "--name-only", "HEAD"], capture_output=True,
                       text=True).stdout.split()
head = {f: subprocess.run(["git", "show", f"HEAD:{f}"], capture_output=True,
                          text=True).stdout for f in files}
bad = [f for f in files if f.endswith(".py") and head[f] and strip(open(f).read())
       != strip(head[f])]
print("syntax trees changed (docstrings aside):", bad or "none",
      f"({len(files)} files differ from HEAD)")
