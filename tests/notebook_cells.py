"""Which code cells a notebook's widgets need: the browser test runs only those.

nbval already runs every cell of every notebook; the browser test is there to render the widgets
and move their sliders. Running a widget notebook's races and benchmarks again in the browser
costs minutes and tests nothing new, so it runs the first code cell (imports, seeds) and, going
backwards from the last widget cell, every cell that defines a name a later needed cell reads:

    cell 0: import x; A = 1      needed (the first cell)
    cell 1: B = slow_race()      not needed: nothing below reads B
    cell 2: C = A + 1            needed: the widget reads C
    cell 3: interact(f, c=C)     needed: a widget cell

A name counts as defined by assignment, `def`, `class`, `import`, a `for`/`with` target, and by
an item or attribute assignment (`x[0] = ...` changes x, so it also reads x). Magics are turned
into Python first, as IPython does.
"""

import ast
import json
from pathlib import Path

from IPython.core.inputtransformer2 import TransformerManager

WIDGET_CALLS = {"interact", "interact_manual", "interactive", "Panel"}  # specnb.viz.panel


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp)


def local_names(scope) -> set:
    """The names a function, lambda or comprehension keeps to itself: its parameters, what its
    body assigns (unless declared global), a comprehension's loop targets."""
    if isinstance(scope, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return {node.id for generator in scope.generators for node in ast.walk(generator.target)
                if isinstance(node, ast.Name)}
    names = {arg.arg for arg in ast.walk(scope.args) if isinstance(arg, ast.arg)}
    body = scope.body if isinstance(scope.body, list) else [scope.body]
    declared = {name for statement in body for node in ast.walk(statement)
                if isinstance(node, ast.Global) for name in node.names}
    names |= {node.id for statement in body for node in ast.walk(statement)
              if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)}
    return names - declared


def names_of(source: str) -> tuple[set, set]:
    """(names the cell binds or changes, names it reads before binding them itself).

    `fig = plot(); display(fig)` binds fig and reads nothing of an earlier cell's; `x[0] = 1`
    changes x, so it also reads the x an earlier cell made; a function's parameters and locals,
    a lambda's and a comprehension's loop variables are their own (`[r for r in rows]` reads
    rows, not r), the globals their bodies read are read.
    """
    tree = ast.parse(TransformerManager().transform_cell(source))
    first_bind, first_read, changed, own = {}, {}, set(), set()
    for scope in ast.walk(tree):  # Name nodes that belong to an inner scope, by identity
        if isinstance(scope, SCOPES):
            keep = local_names(scope)
            own |= {id(node) for node in ast.walk(scope)
                    if isinstance(node, ast.Name) and node.id in keep}

    def note(table, name, node):
        position = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        table[name] = min(table.get(name, position), position)

    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if id(node) not in own:
                note(first_read if isinstance(node.ctx, ast.Load) else first_bind, node.id, node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            note(first_bind, node.name, node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                note(first_bind, (alias.asname or alias.name).split(".")[0], node)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name) and id(base) not in own:
                changed.add(base.id)
    reads = {name for name, position in first_read.items()
             if name not in first_bind or position < first_bind[name]}
    return set(first_bind) | changed, reads | changed


def is_widget_cell(source: str) -> bool:
    """Whether the cell calls interact / interact_manual / interactive / Panel (by name or
    attribute)."""
    tree = ast.parse(TransformerManager().transform_cell(source))
    return any(isinstance(node, ast.Call) and WIDGET_CALLS & {
        getattr(node.func, "id", None), getattr(node.func, "attr", None)} for node in ast.walk(tree))


def cells_the_widgets_need(cells: list) -> list[int]:
    """Indices (into `cells`, nbformat's list, markdown included) of the code cells to run."""
    code = [(index, "".join(cell["source"])) for index, cell in enumerate(cells)
            if cell["cell_type"] == "code"]
    widget_positions = [k for k, (_, source) in enumerate(code) if is_widget_cell(source)]
    if not widget_positions:
        return []
    needed, wanted = {code[0][0]}, set()
    for index, source in reversed(code[:widget_positions[-1] + 1]):
        defines, reads = names_of(source)
        if is_widget_cell(source) or defines & wanted:
            needed.add(index)
            wanted = (wanted - defines) | reads
    return sorted(needed)


def notebook_cells(path: Path) -> list:
    return json.loads(Path(path).read_text())["cells"]
