"""Read a student's code (with `ast`, never running it) for calls of the library's own answer.

Each assignment asks for a function the library already has (`verify`, `ngram_lookup`, ...).
A solution that only forwards to it passes every check, since checks look at results alone, so
`grade` also parses the code the student wrote and gives 0 to the test cells of an exercise
whose library implementation it reaches. What counts as reaching it:

- importing it: `from specnb.core import verify`, `from specnb.core.verify import verify as v`,
  `from specnb.course.checks.verify import library_verify` (any name bound to the same object),
  `import specnb.core.verify as v` (Python binds the function here), `from specnb.core import *`;
- an attribute of that name on anything: `specnb.core.verify(...)`, `sc.verify`,
  `sys.modules["specnb.core"].verify`, `specnb.core.verify.__wrapped__`;
- the string forms: `getattr(x, "verify")`, `vars(m)["verify"]`, the string "verify" anywhere;
  importing specnb through `importlib.import_module` / `__import__`, `sys.modules[...]` with a
  computed or `specnb` key;
- what hides the name: `getattr` / `vars(...)[...]` / `__dict__[...]` with a computed name,
  `operator.attrgetter`, a function's `__closure__` / `__globals__`, and any mention of `exec`,
  `eval`, `compile`, `__import__`, `import_module`, `runpy` (called, renamed, imported or named in
  `getattr`: code the grader cannot read is not taken on trust);
- inside magics: `%time ...`, `%%capture` and `%%time` cells are read like code; other cell
  magics (`%%writefile`, `%%script`, ...), `%run` and `run_cell` hide their code and count too.

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

    `specnb.course.checks.verify` imports `verify` as `library_verify`, so both names map to
    'specnb.core.verify:verify'.
    """
    importlib.import_module("specnb")
    importlib.import_module("specnb.course.checks")
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


# Names whose mere mention lets code reach a function without naming it.
HIDING_NAMES = {"exec", "eval", "compile", "__import__", "import_module", "attrgetter",
                "__closure__", "__globals__", "cell_contents", "run_cell", "run_module",
                "run_path", "spec_from_file_location", "__builtins__"}
HIDING_MODULES = {"runpy", "builtins", "importlib"}
# IPython magics: `%time code` / `%%capture` run code we can read; these touch no code at all.
READABLE_MAGICS = {"time", "timeit", "capture", "prun"}
HARMLESS_MAGICS = {"system", "matplotlib", "config", "load_ext", "autoreload", "precision", "who",
                   "whos", "pip", "env", "pwd", "ls", "history"}


def _called_name(node):
    func = node.func if isinstance(node, ast.Call) else None
    return func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None


def _magic(node):
    """(name, body) for IPython's `run_line_magic(name, line)` / `run_cell_magic(name, args,
    body)` calls (what `%...` and `%%...` become); `("system", None)` for `!cmd`; else None."""
    if not isinstance(node, ast.Call):
        return None
    called = _called_name(node)
    if called == "run_line_magic" and node.args:
        return _string(node.args[0]), _string(node.args[1]) if len(node.args) > 1 else None
    if called == "run_cell_magic" and node.args:
        return _string(node.args[0]), _string(node.args[2]) if len(node.args) > 2 else None
    if called in ("system", "getoutput") and isinstance(node.func, ast.Attribute):
        return "system", None
    return None


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
        magic = _magic(node)
        if magic is not None:
            name, body = magic
            if name in READABLE_MAGICS and body is not None:  # the body is code: read it too
                uses += [use._replace(line=getattr(node, "lineno", 1) + use.line - 1)
                         for use in find_library_uses(body, forbidden)]
            elif name not in HARMLESS_MAGICS:
                flag(DYNAMIC, node)
            continue
        if isinstance(node, ast.Constant) and node.value in forbidden:
            flag(forbidden[node.value], node)  # "verify" as a string: a name to look up
        elif isinstance(node, ast.Name) and node.id in HIDING_NAMES:
            flag(DYNAMIC, node)
        elif isinstance(node, ast.Attribute) and node.attr in HIDING_NAMES:
            flag(DYNAMIC, node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (alias.name.split(".")[0] in HIDING_MODULES) for alias in node.names) or (
                isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0]
                in HIDING_MODULES):
            flag(DYNAMIC, node)
        elif isinstance(node, ast.Subscript) and _string(node.slice) is None and isinstance(
                node.value, (ast.Call, ast.Attribute)) and (
                _called_name(node.value) == "vars" or getattr(node.value, "attr", None)
                == "__dict__"):
            flag(DYNAMIC, node)  # vars(m)[name] / m.__dict__[name] with a computed name
        elif isinstance(node, ast.Call) and _called_name(node) == "getattr" and len(
                node.args) >= 2 and (_string(node.args[1]) is None
                                     or _string(node.args[1]) in HIDING_NAMES):
            flag(DYNAMIC, node)  # getattr(m, "ver" + "ify"), getattr(lib, "import_module")

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


__all__ = ["DYNAMIC", "HIDING_MODULES", "HIDING_NAMES", "LibraryUse", "explain",
           "find_library_uses", "names_of", "python_source", "resolve"]
