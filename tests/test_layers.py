"""The folders are the layers, read from the source: a lower layer never imports a higher one.

    core < drafters < methods < models < training, bench, course        theory, stats: formulas
    _lazy: the packages' import-on-first-use helper, usable by every layer, imports none
    viz: draws from results only (theory, stats and core's pure helpers; runs nothing)

`RULES` is the whole policy, one row per layer: which layers it may import, and what it may not
import even from those (viz runs no model: no cache wrappers, no latency timing, no runners).
Every import counts, also those inside functions, relative ones (resolved against the file's
package) and `importlib.import_module("specnb....")` with a literal name. `check(module,
source)` returns the broken rules of one module, so a planted violation can be tested below.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "specnb"
FORMULAS = {"theory", "stats", "_lazy"}  # every layer may import these

# layer -> (layers it may import, modules it may not import even so, names it may not import).
# "specnb" is the top package itself (its __init__ loads models, methods and theory).
RULES = {
    "theory": ({"core"} | FORMULAS, (), ()),
    "stats": ({"core"} | FORMULAS, (), ()),
    "_lazy": (set(), (), ()),
    "core": ({"core"} | FORMULAS, (), ()),
    "drafters": ({"core", "drafters"} | FORMULAS, (), ()),
    "methods": ({"core", "drafters", "methods"} | FORMULAS, (), ()),
    "models": ({"core", "drafters", "methods", "models"} | FORMULAS, (), ()),
    "viz": ({"core", "viz"} | FORMULAS,
            ("core.kv", "core.batch_kv", "core.latency", "core.timed"),
            {"CachedLM", "BatchedCachedLM", "TimedModel", "measure_forward_latency",
             "autoregressive", "speculative", "prompt_lookup", "jacobi", "load_model",
             "load_pair"}),
    "training": ({"core", "drafters", "methods", "models", "training"} | FORMULAS, (), ()),
    # bench imports viz only inside a function, to write a PNG (checked separately below)
    "bench": ({"core", "drafters", "methods", "models", "bench", "viz"} | FORMULAS, (), ()),
    "course": ({"specnb", "core", "drafters", "methods", "models", "course"} | FORMULAS, (), ()),
    "specnb": (None, (), ()),  # __init__ and __main__: the front door may import anything
}


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """'specnb.core.verify' -> 'core'; 'specnb.theory' -> 'theory'; 'specnb' -> 'specnb'."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__init__", "__main__"):
        return "specnb"
    return parts[1] if parts[1] in RULES else "specnb"  # a name re-exported by specnb/__init__


def imports(module: str, source: str, is_package: bool = False) -> list:
    """[(line, imported module, imported name or None, module level?)] of specnb imports.

    `from ..methods import x` in specnb.core.verify -> ("specnb.methods", "x").
    """
    tree = ast.parse(source)
    top_level = {id(node) for node in tree.body}
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        at_top = id(node) in top_level
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None, at_top) for alias in node.names
                      if alias.name.split(".")[0] == "specnb"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] + \
                    (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "specnb":
                base = node.module.split(".")
            else:
                continue
            target = ".".join(base)
            for alias in node.names:
                if target == "specnb" and alias.name in RULES:  # from .. import methods
                    found.append((node.lineno, f"specnb.{alias.name}", None, at_top))
                else:
                    found.append((node.lineno, target, alias.name, at_top))
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) and \
                node.args[0].value.split(".")[0] == "specnb" and (
                    getattr(node.func, "attr", None) == "import_module"
                    or getattr(node.func, "id", None) in ("import_module", "__import__")):
            found.append((node.lineno, node.args[0].value, None, at_top))
    return found


def check(module: str, source: str, is_package: bool = False) -> list:
    """The rules `module` (e.g. 'specnb.core.verify', with this source text) breaks, as messages."""
    layer = layer_of(module)
    allowed, banned_modules, banned_names = RULES[layer]
    path = module.replace(".", "/") + ("/__init__.py" if is_package else ".py")
    broken = []
    for line, target, name, at_top in imports(module, source, is_package):
        what = f"{path}:{line} imports {target}" + (f".{name}" if name else "")
        target_layer = layer_of(target)
        within = target.removeprefix("specnb.")
        if allowed is not None and target_layer not in allowed:
            broken.append(f"{what}: {layer} may import only {sorted(allowed)}, "
                          f"not {target_layer}")
        elif any(within == b or within.startswith(b + ".") for b in banned_modules):
            broken.append(f"{what}: {layer} runs no model and times nothing "
                          f"(not {', '.join(banned_modules)})")
        elif name in banned_names:
            broken.append(f"{what}: {layer} runs nothing (not {name})")
        elif layer == "bench" and target_layer == "viz" and at_top:
            broken.append(f"{what}: measuring needs no viz; import it inside the function that "
                          f"writes the PNG")
    return broken


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer_with_a_rule():
    assert {layer_of(module_name(p)) for p in MODULES} == set(RULES)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_only_what_its_layer_allows(path):
    broken = check(module_name(path), path.read_text(), is_package=path.name == "__init__.py")
    assert not broken, "\n".join(broken)


def module_graph() -> dict:
    """{module: {modules it imports}}, between modules that are files (not package __init__s)."""
    names = {module_name(p) for p in MODULES if p.name != "__init__.py"}
    graph = {}
    for path in MODULES:
        if path.name == "__init__.py":
            continue
        edges = set()
        for _, target, name, _ in imports(module_name(path), path.read_text()):
            if name and f"{target}.{name}" in names:
                edges.add(f"{target}.{name}")
            elif target in names:
                edges.add(target)
        graph[module_name(path)] = edges - {module_name(path)}
    return graph


def test_no_two_modules_import_each_other():
    graph = module_graph()
    assert "specnb.viz.trace" in graph and "specnb.core.verify" in graph["specnb.methods.speculative"]
    cycles = set()

    def visit(module, stack):
        for target in graph.get(module, ()):
            if target in stack:
                cycles.add(" -> ".join(stack[stack.index(target):] + [target]))
            elif len(stack) < 12:
                visit(target, stack + [target])

    for start in graph:
        visit(start, [start])
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))


# The checker itself: plant violations in a real module's source and expect them reported.
VERIFY_SOURCE = (PACKAGE / "core" / "verify.py").read_text()


def test_the_real_core_verify_is_clean():
    assert check("specnb.core.verify", VERIFY_SOURCE) == []


def test_a_planted_import_inside_a_function_is_reported():
    planted = VERIFY_SOURCE + "\n\ndef sneaky():\n    from ..methods import speculative\n"
    [message] = check("specnb.core.verify", planted)
    assert "specnb/core/verify.py" in message and "imports specnb.methods.speculative" in message
    assert "core may import only" in message and "not methods" in message


def test_a_planted_module_level_import_is_reported():
    planted = "from specnb.models.loading import load_model\n" + VERIFY_SOURCE
    [message] = check("specnb.core.verify", planted)
    assert "verify.py:1 imports specnb.models.loading.load_model" in message


@pytest.mark.parametrize("planted, fragment", [
    ("from .. import bench", "not bench"),
    ("from ..bench.compare import timed", "not bench"),
    ("import importlib\nimportlib.import_module('specnb.bench.live')", "imports specnb.bench.live"),
    ("from ..core.kv import crop_cache", "runs no model"),
    ("from ..core import CachedLM", "runs nothing (not CachedLM)"),
    ("from .. import speculative", "not specnb"),  # the top package re-exports the loops
])
def test_planted_viz_imports_are_reported(planted, fragment):
    source = (PACKAGE / "viz" / "latency.py").read_text() + "\n\ndef f():\n    " + \
        planted.replace("\n", "\n    ") + "\n"
    broken = check("specnb.viz.latency", source)
    assert len(broken) == 1 and fragment in broken[0], broken


def test_bench_may_import_viz_only_inside_a_function():
    assert check("specnb.bench.batch", "def f():\n    from ..viz import batching\n") == []
    [message] = check("specnb.bench.batch", "from ..viz import batching\n")
    assert "measuring needs no viz" in message


def test_relative_imports_resolve_against_the_package():
    found = imports("specnb.course.checks", "from ...core import verify\nfrom . import laws\n",
                    is_package=True)
    assert [(t, n) for _, t, n, _ in found] == [("specnb.core", "verify"),
                                               ("specnb.course.checks", "laws")]
