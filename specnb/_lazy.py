"""Package attributes that import their module on first use (PEP 562).

`import specnb` (or `from specnb.course import checks`) would otherwise import every layer, with
torch, transformers and scipy behind them: seconds, paid by every kernel and command even
when it needs one function. A package lists {name: module} and hands out its attributes as they
are asked for; a name that is not listed but is a submodule (`specnb.core.batch_kv`) imports it.

    __getattr__, __dir__ = lazy_attributes(__name__, globals(), {"verify": ".core", ...})
"""

import importlib
import importlib.util


def lazy_attributes(package: str, namespace: dict, names: dict):
    """(__getattr__, __dir__) for `package`, whose module globals are `namespace`: each name in
    `names` comes from its module (relative to the package) when first asked for."""

    def __getattr__(name: str):
        module = names.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module, package), name)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            value = importlib.import_module(f"{package}.{name}")  # a submodule, as if imported
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value  # asked once: later lookups are plain attribute reads
        return value

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
