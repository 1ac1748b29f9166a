"""Read a student's code (with `ast`, never running it) for calls of the library's own answer.

Each assignment asks for a function the library already has (`verify`, `ngram_lookup`, ...).
A solution that only forwards to it passes every check, since checks look at results alone, so
`grade` also parses the code the student wrote and gives 0 to the test cells of an exercise
whose library implementation it reaches. What counts as reaching it:

- importing it: `from specnb.core import verify`, `from specnb.core.verify import verify as v`,
  `from specnb.checks.verify import library_verify` (any name bound to the same object),
  `import specnb.core.verify as v` (Python binds the function here), `from specnb.core import *`;
- an attribute of that name on anything: `specnb.core.verify(...)`, `sc.verify`,
  `sys.modules["specnb.core"].verify`, `specnb.core.verify.__wrapped__`;
- the string forms: `getattr(x, "verify")`, `vars(m)["verify"]`; importing specnb through
  `importlib.import_module` / `__import__`, `sys.modules[...]` with a computed or `specnb` key;
  `exec` / `eval` / `compile` (code the grader cannot read is not taken on trust).

It does not look at what the code computes, and it accepts any other import: torch, the
student's own earlier functions, and library helpers that are not the answer (`specnb.core.sample`,
`CachedLM`). Which implementations an assignment forbids, and which test cells they void, is the
source notebook's metadata `specnb.write_yourself`: {"specnb.core.verify:verify": [grade ids]}.

Example: find_library_uses("from specnb.core import verify as v\\nv(p, q, x, b)",
                           {"verify": "specnb.core.verify:verify"})
         -> [LibraryUse("specnb.core.verify:verify", 1, "from specnb.core import verify as v")]
"""

import ast
import importlib
import sys
from typing import NamedTuple

DYNAMIC = "dynamic"  # the label of a use that hides which implementation it reaches


class LibraryUse(NamedTuple):
    target: str  # "module:attr" of the implementation, or DYNAMIC
    line: int  # 1-based line in the cell
    code: str  # the offending line, stripped


def resolve(target: str):
    """'specnb.core.verify:verify' -> the function object."""
    module_name, _, attr = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def names_of(targets) -> dict:
    """{name: target} for every name under which a specnb module holds one of `targets`.

    `specnb.checks.verify` imports `verify` as `library_verify`, so both names map to
    'specnb.core.verify:verify'.
    """
    importlib.import_module("specnb")
    importlib.import_module("specnb.checks")
    objects = {id(resolve(t)): t for t in targets}
    names = {}
    for target in targets:
        names[target.rpartition(":")[2].rpartition(".")[2]] = target
    for module_name, module in list(sys.modules.items()):
        if module is None or not (module_name == "specnb" or module_name.startswith("specnb.")):
            continue
        for name, value in list(vars(module).items()):
            if id(value) in objects and not name.startswith("__"):
                names.setdefault(name, objects[id(value)])
    return names


def python_source(cell_source: str) -> str:
    """A notebook cell as plain Python: IPython magics (`%time`, `!ls`) become calls."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(cell_source)
    except Exception:  # noqa: BLE001 - IPython missing or confused: parse the text as it is
        return cell_source


def _is_specnb(module_name) -> bool:
    return isinstance(module_name, str) and (module_name == "specnb"
                                             or module_name.startswith("specnb."))


def _import_target(module_name: str, attr: str | None, forbidden: dict):
    """The forbidden target an import binds, if any (imports the module in the grader)."""
    by_id = {id(resolve(t)): t for t in set(forbidden.values())}
    try:
        obj = importlib.import_module(module_name)
        if attr is None:  # `import a.b.c`: Python walks attributes from the top package
            obj = importlib.import_module(module_name.split(".")[0])
            for part in module_name.split(".")[1:]:
                obj = getattr(obj, part, None) or importlib.import_module(
                    f"{obj.__name__}.{part}")
        elif attr == "*":
            public = getattr(obj, "__all__", [n for n in vars(obj) if not n.startswith("_")])
            return next((by_id[id(getattr(obj, n, None))] for n in public
                         if id(getattr(obj, n, None)) in by_id), None)
        else:
            obj = getattr(obj, attr, None)
            if obj is None:
                obj = importlib.import_module(f"{module_name}.{attr}")
    except (ImportError, AttributeError):
        return None
    return by_id.get(id(obj))


def _string(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def find_library_uses(source: str, forbidden: dict) -> list:
    """Each place in `source` (one cell) that reaches an implementation in `forbidden`.

    `forbidden` maps names to targets (`names_of`). Code that does not parse gives [] (it
    fails when run, and its tests with it).
    """
    try:
        tree = ast.parse(python_source(source))
    except SyntaxError:
        return []
    lines = source.splitlines() or [""]
    uses = []

    def flag(target, node):
        line = getattr(node, "lineno", 1)
        text = lines[line - 1].strip() if line <= len(lines) else ""
        uses.append(LibraryUse(target, line, text))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_specnb(alias.name):
                    target = _import_target(alias.name, None, forbidden)
                    if target:
                        flag(target, node)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_specnb(node.module):
            for alias in node.names:
                target = _import_target(node.module, alias.name, forbidden)
                if target:
                    flag(target, node)
        elif isinstance(node, ast.Attribute) and node.attr in forbidden:
            flag(forbidden[node.attr], node)
        elif isinstance(node, ast.Subscript):
            key = _string(node.slice)
            if key in forbidden:
                flag(forbidden[key], node)
            elif (isinstance(node.value, ast.Attribute) and node.value.attr == "modules"
                  and (key is None or _is_specnb(key))):
                flag(DYNAMIC, node)  # sys.modules["specnb.core"] or sys.modules[name]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else None
            first = node.args[0] if node.args else None
            if name == "getattr" and len(node.args) >= 2 and _string(node.args[1]) in forbidden:
                flag(forbidden[_string(node.args[1])], node)
            elif name in ("import_module", "__import__") and first is not None and (
                    _string(first) is None or _is_specnb(_string(first))):
                flag(DYNAMIC, node)
            elif name in ("exec", "eval", "compile") and isinstance(func, ast.Name):
                flag(DYNAMIC, node)
    return sorted(set(uses), key=lambda use: use.line)


def explain(use: LibraryUse, cell_label: str) -> str:
    """One line for the grade report."""
    if use.target == DYNAMIC:
        what = "reaches specnb through a dynamic import, sys.modules or exec/eval"
    else:
        what = f"uses the library's own {use.target.replace(':', '.')}"
    return (f"0 points: your code {what} ({cell_label}, line {use.line}: `{use.code[:60]}`); "
            f"this exercise asks you to write it yourself")


__all__ = ["DYNAMIC", "LibraryUse", "explain", "find_library_uses", "names_of", "python_source",
           "resolve"]
