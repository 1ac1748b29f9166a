"""Layers, read from the source: viz draws from results only; measuring needs no viz.

`specnb.viz` runs no model and times nothing, so it imports neither the measuring modules
(`specnb.bench*`) nor the generation loops, the model loaders or the cache wrappers. The
measuring modules import viz at most inside a function (to write a PNG), never at module level.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "specnb"
VIZ_MODULES = sorted((PACKAGE / "viz").glob("*.py"))
MEASURING_MODULES = sorted(PACKAGE.glob("bench*.py"))
# What viz may not import: modules (relative to specnb) and names (from anywhere).
NOT_FOR_VIZ = ("bench", "methods", "models", "pairs", "drafters", "core.kv", "core.batch_kv")
RUNNERS = {"CachedLM", "BatchedCachedLM", "autoregressive", "speculative", "prompt_lookup",
           "jacobi", "load_model", "load_pair"}


def imports(path: pathlib.Path, module_level_only: bool) -> list:
    """[(module relative to specnb, imported name or None)] of one file's imports."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    package = path.parent.relative_to(PACKAGE.parent).parts  # ("specnb", "viz") for viz
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name.removeprefix("specnb."), None) for alias in node.names
                      if alias.name.startswith("specnb")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = list(package[:len(package) - node.level + 1]) + \
                    (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("specnb"):
                base = node.module.split(".")
            else:
                continue
            module = ".".join(base[1:])
            found += [(module, alias.name) for alias in node.names]
    return found


def test_the_layers_are_found():
    assert {p.name for p in VIZ_MODULES} >= {"latency.py", "timing.py", "trace.py"}
    assert {p.name for p in MEASURING_MODULES} >= {"bench.py", "bench_batch.py",
                                                   "bench_latency.py", "bench_live.py"}
    found = imports(PACKAGE / "viz" / "distributions.py", module_level_only=True)
    assert ("core", "logits_to_probs") in found and ("stats", "chi2_goodness_of_fit") in found


@pytest.mark.parametrize("path", VIZ_MODULES, ids=lambda p: p.name)
def test_viz_runs_no_model_and_measures_nothing(path):
    for module, name in imports(path, module_level_only=False):
        imported = f"{module}.{name}" if module else name  # `from .. import bench` -> "bench"
        assert not any(imported == banned or imported.startswith(banned + ".")
                       for banned in NOT_FOR_VIZ), f"{path.name} imports {imported}"
        assert name not in RUNNERS, f"{path.name} imports {name} from {module}"


@pytest.mark.parametrize("path", MEASURING_MODULES, ids=lambda p: p.name)
def test_measuring_modules_do_not_import_viz_at_module_level(path):
    for module, name in imports(path, module_level_only=True):
        assert module != "viz" and not module.startswith("viz."), \
            f"{path.name} imports {name} from specnb.{module} at module level"
