"""This machine's checking cost t(k)/t(1) for a model: measured once, then the same everywhere.

Several notebooks price the forward that checks k tokens: eq. (2) and break-even in 06,
Jacobi's and lookahead's wide forwards in 08, the γ and temperature widget in 10, the tree
quotient in 13. A microbenchmark of their own in each would make them disagree on one machine,
because such a curve moves by a tenth from one run to the next on a shared CPU.
`checking_curve(model)` measures it once (`specnb.core.latency.measure_forward_latency`:
k = 1..9 and a few wider forwards after a 128-token cached prefix, the k interleaved, the median
of 5 after a warm-up) and keeps it in `cache_dir()/checking-curve.json`, keyed by what the curve
depends on: the device (the CPU with its instruction sets and the vector kernels torch
dispatches to, or the GPU), torch and its threads, the model's shape and dtype, the matmul path
(`specnb.models.fast_path`) and the measurement's own settings. Every later call, in any
notebook or process, returns that same curve; `refresh=True` measures again (for a machine that
was busy the first time). Notebook 02 teaches the measurement itself; the others read this one
curve.
"""

import json
import os
import tempfile
from pathlib import Path

import torch

from ..core.latency import measure_forward_latency
from .fast_path import calibration_key
from .loading import cache_dir

TOKEN_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 32, 64)
PREFIX_LEN, REPEATS = 128, 5


def curve_key(model) -> str:
    """What the curve depends on (see the module docstring)."""
    parameter = next(model.parameters())
    where = torch.cuda.get_device_name(parameter.device) if parameter.device.type == "cuda" \
        else f"cpu kernels {torch.backends.cpu.get_cpu_capability()}"  # ATEN_CPU_CAPABILITY
    return (f"{where} | {calibration_key(model)} | {parameter.dtype} "
            f"{getattr(model, 'specnb_cpu_path', 'dense')} | k {list(TOKEN_COUNTS)} after "
            f"{PREFIX_LEN}, median of {REPEATS}")  # a version that measures otherwise: anew


def _read(cache_file: Path) -> dict:
    """The kept curves; none from a missing file, or a torn one (measured again then)."""
    try:
        return json.loads(cache_file.read_text()) if cache_file.exists() else {}
    except (OSError, ValueError):
        return {}


def checking_curve(model, *, refresh: bool = False, cache_file=None) -> dict:
    """`measure_forward_latency`'s result for this machine and model, with "relative"
    ([t(k)/t(1)] per token count), "key" and "cached" (read from the cache, not measured now).

    Example: `theory.relative_cost(checking_curve(target), 4)` is what checking 3 drafts costs
    in one-token forwards, the same number in every notebook on this machine."""
    cache_file = Path(cache_file) if cache_file is not None else cache_dir() / "checking-curve.json"
    key = curve_key(model)
    cache = _read(cache_file)
    if key in cache and not refresh:
        return {**cache[key], "cached": True}
    curve = measure_forward_latency(model, prefix_len=PREFIX_LEN, token_counts=TOKEN_COUNTS,
                                    repeats=REPEATS)
    one = curve["median_ms"][0]
    curve = {**curve, "relative": [ms / one for ms in curve["median_ms"]], "key": key}
    cache = _read(cache_file)  # again: another process (a test worker) may have stored one
    if key in cache and not refresh:
        return {**cache[key], "cached": True}  # the first stored curve wins: one per machine
    cache[key] = curve
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=cache_file.parent, delete=False,
                                     suffix=".tmp") as handle:
        json.dump(cache, handle, indent=1)
    os.replace(handle.name, cache_file)  # whole or not at all, for a reader in another process
    return {**curve, "cached": False}
