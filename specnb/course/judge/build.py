"""A copy of specnb without an assignment's answers, for the grading kernel.

`answer_free_package(targets, folder)` copies the package (its source, not the tests, the
notebooks or the assignments with their reference solutions) to `folder/specnb`, links
`folder/data` to the data it reads (prompts, the embedded draft), and in the copy replaces each
target "module:name" (a top-level function, class or assignment) by
`Withheld("module:name")`: the text of the answer is not in the copy at all, and a student's
code that reaches it, by whatever route, gets `AnswerWithheld` with the rule. The copy is
compiled once here, so that kernels, which may not write to it, do not compile it again.
"""

import ast
import compileall
import os
import pathlib
import shutil

PACKAGE = pathlib.Path(__file__).resolve().parents[2]  # .../specnb
DATA = PACKAGE.parent / "data"


def _module_file(root: pathlib.Path, module: str) -> pathlib.Path:
    parts = module.split(".")
    if parts[0] != "specnb":
        raise ValueError(f"{module}: not a module of specnb")
    path = root.joinpath(*parts)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    raise ValueError(f"{module}: no such module in specnb")


def withhold(source: str, names: dict) -> str:
    """The module's text with each top-level definition of names {name: target} replaced."""
    tree = ast.parse(source)
    spans = {}
    for node in tree.body:
        defined = [node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef)) else \
            [t.id for t in getattr(node, "targets", [getattr(node, "target", None)])
             if isinstance(t, ast.Name)] if isinstance(node, (ast.Assign, ast.AnnAssign)) else []
        for name in defined:
            if name in names:
                first = min([node.lineno] + [d.lineno for d in
                                             getattr(node, "decorator_list", [])])
                spans[name] = (first, node.end_lineno)
    missing = set(names) - set(spans)
    if missing:
        raise ValueError(f"not defined at the top of the module: {sorted(missing)}")
    lines = source.split("\n")
    for name, (first, last) in sorted(spans.items(), key=lambda item: -item[1][0]):
        lines[first - 1:last] = [f"{name} = __import__('specnb.course.judge.withheld', "
                                 f"fromlist=['Withheld']).Withheld({names[name]!r})"]
    return "\n".join(lines)


def answer_free_package(targets, folder: pathlib.Path) -> pathlib.Path:
    """Build the copy in `folder` (new or empty); return `folder`, the entry for PYTHONPATH."""
    folder = pathlib.Path(folder)
    shutil.copytree(PACKAGE, folder / "specnb",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if DATA.is_dir():
        os.symlink(DATA, folder / "data", target_is_directory=True)
    by_module: dict = {}
    for target in targets:
        module, _, name = target.partition(":")
        by_module.setdefault(module, {})[name.split(".")[0]] = target
    for module, names in by_module.items():
        path = _module_file(folder, module)
        path.write_text(withhold(path.read_text(), names))
    compileall.compile_dir(str(folder / "specnb"), quiet=2, workers=1)
    return folder
