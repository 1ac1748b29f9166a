"""The fastest exact CPU path for a model's linear layers, chosen by measuring on this CPU.

A dense float32 `nn.Linear` on the CPU computes x W^T with its weight W stored row by row
(out × in), as transformers loads it: a GEMV kernel reads it for one token, a packing GEMM for
two or more. The same weight can be stored transposed (column by column: the same [out, in]
tensor with strides (1, out)); W^T is then a plain row-major in × out matrix, and the same
product runs as an ordinary matrix product that streams it row by row. oneDNN's linear on a
weight converted once to its own layout (`to_mkldnn`, as `torch.utils.mkldnn.MkldnnLinear`)
does the same maths a third way, here on plain input and output tensors (`POINTWISE`). A fourth
keeps the weight as loaded and swaps the operands for a few rows of input: x W^T as (W x^T)^T,
the weight times a thin matrix, for which MKL has a kernel that streams the weight row by row
in one pass without packing it (`SwappedLinear`). Which one is faster depends on the CPU: its
vector extensions, which kernels torch and oneDNN pick for them, and how much of a forward is
spent reading the weights. `python -m
specnb.bench.cpu_path` records the curves per CPU (data/results/latency-cpu-*.json, shown in
RESULTS.md). So `cpu_path`:

    "dense"       plain nn.Linear, as transformers loads it
    "transposed"  plain nn.Linear, each weight Parameter stored transposed in place (a tied
                  embedding shares it and reads its rows from that layout); the same results up
                  to float rounding
    "prepacked"   every nn.Linear becomes a `PrepackedLinear` (oneDNN, float32, same results up
                  to float rounding; greedy tokens unchanged in the tests)
    "swapped"     every nn.Linear becomes a `SwappedLinear` over the same Parameters, stored as
                  loaded (the same results up to float rounding)
    "auto"        on a CPU with float32 weights: a calibration of a few seconds at first load
                  (`calibrate`), kept in `cache_dir()/cpu-path.json` keyed by CPU model,
                  ISA, torch version, threads and the model's shape (`calibration_key`;
                  delete the file to recalibrate); off the CPU or float32: dense
    None          $SPECNB_CPU_PATH if set, else "auto"

The rule (`choose`): a path other than dense qualifies only if its 1-token forward is no slower
than dense AND the median over k = 1, 2, 4 of its t(k) against dense's is at least `MARGIN`
(10%) lower; the qualifying path with the lowest median wins, in each of three rounds and
overall; rounds that disagree mean a busy machine (a busy moment can make one path look many
times slower than it is): dense, and nothing is cached. `MARGIN` is above the spread of a
median of a few forwards on a shared CPU, so noise alone does not flip the choice, and below
the gain on CPUs where another path helps (the latency records above); on a near tie dense,
the path transformers and everyone else use, wins.

`PrepackedLinear` is an `nn.Linear` holding the very same weight Parameter (a tied lm_head stays
tied; `parameters()`, `state_dict`, `save_pretrained`, `model.dtype` see no change), plus a
oneDNN copy of it that is rebuilt when the weight changes (in place or by `.to`; a write
through `weight.data` bypasses the version counter and is not seen: call
`use_path(model, "prepacked")` again after one). It runs the dense kernel wherever oneDNN does
not apply: gradients wanted, CPU autocast on, an input or weight not float32 on the CPU. The
price is memory: a second copy of every linear weight (~0.5 GB for the embedded model). The
transposed path costs no memory; what it changes is only the weights' strides, so code that
needs them contiguous (safetensors, `.view`) calls `.contiguous()` (specnb's savers do). The
swapped path costs no memory either and changes no stride: only which product runs.
What this module does not do: reduced precision (bf16/int8: the target stays float32; the draft
head's int8 copy is `specnb.models.int8_draft`), GPUs (there the path is always dense),
or timing beyond the short calibration (`python -m specnb.bench.cpu_path` records the full
curves).
"""

import hashlib
import json
import os
import platform
import statistics
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

PATHS = ("dense", "transposed", "prepacked", "swapped")  # what `use_path` puts a model on
CPU_PATHS = ("auto", *PATHS)
ENV_VAR = "SPECNB_CPU_PATH"
MARGIN = 0.10
_QUIET = [False]  # inside `quiet_machine()`: nothing else runs (see there)


@contextmanager
def quiet_machine():
    """Calibrations inside are cached even when their rounds disagree. The caller promises that
    nothing else runs (`python -m specnb --calibrate`), so a disagreement is a near tie, where
    either choice is as good, not a busy moment that would leave a wrong choice cached."""
    _QUIET[0] = True
    try:
        yield
    finally:
        _QUIET[0] = False


def on_quiet_machine() -> bool:
    return _QUIET[0]
CALIBRATION = {"prefix_len": 64, "token_counts": [1, 2, 4], "repeats": 3, "rounds": 3}
# oneDNN's linear on a plain input (the op torch.compile's CPU backend calls): it skips
# converting every activation to oneDNN's layout and back, two copies per call that weigh most
# where the linears themselves are fast (small models, one token), and gives `mkldnn_linear`'s
# result bit for bit (tests/test_fast_path.py). None on a torch
# without it: then the converting op.
POINTWISE = getattr(torch.ops.mkldnn, "_linear_pointwise", None) \
    if torch.backends.mkldnn.is_available() else None


class SharedWeightLinear(nn.Linear):
    """An `nn.Linear` holding `linear`'s own weight and bias (the same Parameters, not copies):
    the base of the linears that run them another way."""

    def __init__(self, linear: nn.Linear):
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias

    def _float32_on_cpu(self, x) -> bool:
        """Whether input and weight are float32 on the CPU: where the other ways apply."""
        return (x.dtype == torch.float32 and x.device.type == "cpu"
                and self.weight.dtype == torch.float32 and self.weight.device.type == "cpu")


class CopiedWeightLinear(SharedWeightLinear):
    """A `SharedWeightLinear` plus a copy of the weight and bias in another kernel's format
    (`_pack`), rebuilt when they change; it runs the float kernel where the copy cannot
    (`_float_only`). The base of `PrepackedLinear` and of the draft head's `Int8Linear`
    (specnb.models.int8_draft)."""

    def __init__(self, linear: nn.Linear):
        super().__init__(linear)
        self._packed, self._packed_for = None, None

    def _pack(self, tensors: list):
        """The copy of `tensors` ([weight] or [weight, bias]) in the kernel's format."""
        raise NotImplementedError

    def _float_only(self, x) -> bool:
        wants_grad = torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad)
        return wants_grad or not self._float32_on_cpu(x) or x.numel() == 0

    def _packed_copy(self):
        tensors = [self.weight] + ([self.bias] if self.bias is not None else [])
        version = tuple((t.data_ptr(), t._version) for t in tensors)
        if self._packed_for != version:  # first use, or the weight changed since packing
            with torch.no_grad():
                self._packed = self._pack(tensors)
            self._packed_for = version
        return self._packed

    def __getstate__(self):  # copies and pickles carry the weight, not the packed copy
        state = dict(super().__getstate__())
        state["_packed"], state["_packed_for"] = None, None
        return state


class PrepackedLinear(CopiedWeightLinear):
    """`linear`'s own weight and bias, run through oneDNN with a prepacked float32 weight."""

    def _float_only(self, x) -> bool:
        return super()._float_only(x) or torch.is_autocast_enabled("cpu")

    def _pack(self, tensors):
        return [t.detach().contiguous().to_mkldnn() for t in tensors] + [None]

    def forward(self, x):
        if self._float_only(x):
            self._packed, self._packed_for = None, None
            return F.linear(x, self.weight, self.bias)
        weight, bias = self._packed_copy()[:2]
        if POINTWISE is not None:  # plain tensors in and out, the same result bit for bit
            return POINTWISE(x.contiguous(), weight, self.bias, "none", [], "")
        return torch._C._nn.mkldnn_linear(x.contiguous().to_mkldnn(), weight, bias).to_dense()


# Rows of input up to which `SwappedLinear` multiplies with the operands swapped; past it the
# plain product reads the weight no slower (the curves of `python -m specnb.bench.cpu_path`). A
# tall weight (a vocabulary projection: TALL times more outputs than inputs, or more) keeps the
# thin-matrix kernel ahead for more rows.
SWAP_ROWS, TALL_SWAP_ROWS, TALL = 4, 8, 16


class SwappedLinear(SharedWeightLinear):
    """`linear`'s own weight and bias (the same Parameters, stored row by row as loaded), with
    the product taken the other way round for up to `swap_rows` rows of input (`SWAP_ROWS`, or
    `TALL_SWAP_ROWS` for a tall weight): x W^T as (W x^T)^T. MKL then runs its kernel for a
    matrix times a thin one, which streams the weight row by row in one pass, instead of a GEMV
    (one row) or a GEMM that first packs the weight (two rows and more). One row is doubled (the
    copy is dropped): the thin-matrix kernel wants two columns. The plain product runs for more
    rows, off float32 on the CPU, under CPU autocast, or when the weight is no longer stored row
    by row."""

    def __init__(self, linear: nn.Linear):
        super().__init__(linear)
        self.swap_rows = TALL_SWAP_ROWS if self.out_features >= TALL * self.in_features \
            else SWAP_ROWS

    def forward(self, x):
        rows = x.numel() // max(self.in_features, 1)
        if (not 0 < rows <= self.swap_rows or not self._float32_on_cpu(x)
                or not self.weight.is_contiguous() or torch.is_autocast_enabled("cpu")):
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(rows, self.in_features)
        flat = (flat.expand(2, -1) if rows == 1 else flat).contiguous()  # [max(rows, 2), in]
        out = torch.mm(self.weight, flat.t())[:, :rows].t().contiguous()  # [rows, out]
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


WRAPPERS = {"prepacked": PrepackedLinear, "swapped": SwappedLinear}  # path -> its nn.Linear


def _store(linear: nn.Linear, transposed: bool) -> None:
    """Put `linear`'s weight row by row (as loaded) or transposed, in place: the same Parameter
    (a tied embedding follows), new strides."""
    weight = linear.weight
    if weight.dim() == 2 and transposed == weight.is_contiguous():
        weight.data = weight.data.t().contiguous().t() if transposed else weight.data.contiguous()


def use_path(model, path: str):
    """Swap every linear of `model` to `path` (one of `PATHS`) in place; returns it."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    wrapper = WRAPPERS.get(path)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) in WRAPPERS.values() and type(child) is not wrapper:
                dense = nn.Linear(child.in_features, child.out_features, bias=False,
                                  device="meta")
                dense.weight, dense.bias = child.weight, child.bias
                setattr(parent, name, dense)
                child = dense
            if type(child) is nn.Linear:
                # row by row for every path but transposed (prepacked packs from it)
                _store(child, transposed=path == "transposed")
                if wrapper is not None:
                    setattr(parent, name, wrapper(child))
            elif isinstance(child, SwappedLinear):
                _store(child, transposed=False)
            elif isinstance(child, PrepackedLinear):
                child._packed, child._packed_for = None, None  # repacked at its next use
    model.specnb_cpu_path = path
    return model


def follow_path(module, model):
    """Put `module` (a draft head, say) on the CPU path `model` runs, where it applies; returns
    it. The head's linears then take the path measured for the target's, the same kernels on
    the same CPU: where another path pays for the target's one-token forward it pays for the
    head's steps too, and the head's drafts do not change."""
    path = getattr(model, "specnb_cpu_path", "dense")
    if path not in PATHS or why_not(path, module) is not None:
        path = "dense"
    return use_path(module, path)


def why_not(path: str, model):
    """None if `path` applies to `model`, else the reason as a sentence fragment."""
    if path == "dense":
        return None
    parameter = next(model.parameters())
    if parameter.device.type != "cpu":
        return f"the model is on {parameter.device}; the {path} path is for the CPU"
    if parameter.dtype != torch.float32:
        return f"the model is {parameter.dtype}; the {path} path is measured for float32"
    if path == "prepacked" and not torch.backends.mkldnn.is_available():
        return "this torch has no oneDNN (torch.backends.mkldnn.is_available() is False)"
    return None


def applicable_paths(model) -> list:
    """The paths of `PATHS` that apply to `model` (dense always does)."""
    return [path for path in PATHS if why_not(path, model) is None]


def cpu_identity() -> dict:
    """The CPU's model name, the vector extensions it has and a short tag of both.

    {"name": the model name (/proc/cpuinfo, else `platform`), "isa": which of the flags amx,
    avx512f, avx2 the CPU has (else torch's CPU capability), "tag": the name, lower case and
    hyphenated, with the widest ISA, as in data/results/latency-cpu-<tag>.json}."""
    name, flags = None, set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "model name" and name is None:
                name = value
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:  # not Linux: the name Python knows, the ISA torch dispatches to
        pass
    name = name or platform.processor() or platform.machine()
    isa = [f for f in ("amx", "avx512f", "avx2") if f in flags or f + "_tile" in flags]
    isa = isa or [torch.backends.cpu.get_cpu_capability().lower()]
    short = "".join(c if c.isalnum() else "-" for c in name.lower().replace("(r)", "")
                    .replace("(tm)", "").replace("processor", "").replace("cpu", "").split("@")[0])
    short = "-".join(part for part in short.split("-") if part)
    return {"name": name, "isa": " ".join(isa),
            "tag": f"{short}-{isa[0].replace('avx512f', 'avx512')}"}


def calibration_key(model) -> str:
    """What the choice depends on: CPU, ISA, torch, threads, the model's shape and attention
    (a cache made before `specnb.models.attention` switched the embedded model is not reused),
    the prepacked op (a cache measured with the converting op is not reused either) and the
    paths compared (a choice made among fewer is made again)."""
    c, cpu = model.config, cpu_identity()
    shape = {k: getattr(c, k, None) for k in ("model_type", "hidden_size", "intermediate_size",
                                              "num_hidden_layers", "num_attention_heads",
                                              "num_key_value_heads", "vocab_size")}
    digest = hashlib.sha1(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:10]
    return (f"{cpu['name']} [{cpu['isa']}] torch {torch.__version__} "
            f"threads {torch.get_num_threads()} | {c.model_type} h{c.hidden_size} "
            f"l{c.num_hidden_layers} v{c.vocab_size} {digest}"
            f" {getattr(c, '_attn_implementation', None) or 'eager'}"
            + (" plain-input" if POINTWISE is not None else "") + " | " + "/".join(PATHS))


def calibrate(model, token_counts=None, prefix_len=None, repeats=None, rounds=None) -> dict:
    """Median ms of a forward of k tokens after a cached prefix, for every path, round by round.

    Defaults: `CALIBRATION` (about 120 forwards: a few seconds for the embedded model on an idle
    CPU). Each round measures every path of `PATHS` that applies (`why_not`), in an order that
    rotates from round to round, so a busy moment lands in one round, which `choose` then finds
    disagreeing with the others. Leaves the model on the last path measured. Returns
    {"token_counts", "prefix_len", "<path>_ms" (medians over all rounds) and
    "<path>_samples_ms" (every sample) per path, "rounds": [{"<path>_ms"} per round]}.
    """
    from ..core.latency import measure_forward_latency

    c = CALIBRATION
    token_counts = list(token_counts or c["token_counts"])
    prefix_len, repeats = prefix_len or c["prefix_len"], repeats or c["repeats"]
    measured = {"token_counts": token_counts, "prefix_len": prefix_len, "rounds": []}
    paths = applicable_paths(model)
    samples = {path: {k: [] for k in token_counts} for path in paths}
    for round_index in range(rounds or c["rounds"]):
        this_round = {}
        shift = round_index % len(paths)
        for path in paths[shift:] + paths[:shift]:
            use_path(model, path)
            with torch.no_grad():
                record = measure_forward_latency(model, prefix_len, token_counts, repeats=repeats)
            for k, ms in zip(record["token_counts"], record["samples_ms"]):
                samples[path][k] += ms
            this_round[f"{path}_ms"] = [statistics.median(ms) for ms in record["samples_ms"]]
        measured["rounds"].append(this_round)
    for path in samples:
        measured[f"{path}_ms"] = [statistics.median(samples[path][k]) for k in token_counts]
        measured[f"{path}_samples_ms"] = [samples[path][k] for k in token_counts]
    return measured


def _verdict(token_counts, medians: dict) -> str:
    """One set of medians ({path: ms per k}): the path other than dense whose t(1) is no slower
    than dense's and whose median t(k)/t_dense(k) over the k of `CALIBRATION` is the lowest and
    at most 1 - MARGIN; else "dense"."""
    at = {k: i for i, k in enumerate(token_counts)}
    if 1 not in at:
        raise ValueError("measured['token_counts'] must include k = 1 (the one-token forward)")
    checked = [at[k] for k in CALIBRATION["token_counts"] if k in at]
    dense, best, best_ratio = medians["dense"], "dense", 1 - MARGIN
    for path, ms in medians.items():
        if path == "dense" or ms[at[1]] > dense[at[1]]:
            continue
        ratio = statistics.median(ms[i] / dense[i] for i in checked)
        if ratio <= best_ratio:
            best, best_ratio = path, ratio
    return best


def _medians(record: dict) -> dict:
    return {path: record[f"{path}_ms"] for path in PATHS if f"{path}_ms" in record}


def decide(measured: dict) -> tuple[str, bool]:
    """(path, settled): the verdict of every round and of the overall medians must agree;
    otherwise the machine was too busy to tell, and the answer is dense, unsettled (not cached,
    so the next load measures again). A record without rounds is one round."""
    token_counts = measured["token_counts"]
    verdicts = {_verdict(token_counts, _medians(measured))}
    for one in measured.get("rounds", []):
        verdicts.add(_verdict(token_counts, _medians(one)))
    return (verdicts.pop(), True) if len(verdicts) == 1 else ("dense", False)


def choose(measured: dict) -> str:
    """The path `decide` settles on, dense when it cannot settle.

    Example: dense [58, 94, 91], prepacked [53, 59, 61] ms at k = 1, 2, 4 -> "prepacked";
    dense [58, 89, 81], transposed [51, 68, 81], prepacked [62, 77, 83] -> "transposed";
    rounds that disagree (a busy moment makes one path look many times slower in one round)
    -> "dense".
    """
    return decide(measured)[0]


def cached_choice(model, cache_file: Path) -> tuple[str, bool]:
    """(path, settled): the cached path for `model` on this machine, calibrating if none is;
    only a settled calibration is cached (`decide`), so one taken on a busy machine is taken
    again next time (`python -m specnb --prepare` calibrates while nothing else runs)."""
    key = calibration_key(model)
    try:
        cache = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cache = {}
    if key in cache and cache[key].get("path") in PATHS:
        return cache[key]["path"], True
    measured = calibrate(model)
    path, settled = decide(measured)
    settled = settled or on_quiet_machine()
    if settled:
        kept = {k: v for k, v in measured.items() if not k.endswith("samples_ms")}
        cache[key] = {**kept, "path": path, "margin": MARGIN}
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        partial = cache_file.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps(cache, indent=1))
        partial.replace(cache_file)
    return path, settled


def resolve_cpu_path(cpu_path) -> str:
    """`cpu_path` checked; None means $SPECNB_CPU_PATH, else "auto"."""
    source = "cpu_path"
    if cpu_path is None:
        cpu_path, source = os.environ.get(ENV_VAR) or "auto", f"${ENV_VAR} (cpu_path=None)"
    if cpu_path not in CPU_PATHS:
        raise ValueError(f"{source} must be one of {CPU_PATHS}, got {cpu_path!r}")
    return cpu_path


def apply_cpu_path(model, cpu_path=None, *, cache_file: Path):
    """Put `model` on the CPU path asked for (see the module docstring); returns `model`.

    `cache_file` keeps "auto"'s calibrations (`specnb.models.loading.cpu_path_cache()`). Sets
    `model.specnb_cpu_path` to the path it now runs (one of `PATHS`), and
    `model.specnb_cpu_path_settled` to False where "auto" could not settle (a busy machine: the
    path is dense for now, and the next load calibrates again).
    """
    cpu_path = resolve_cpu_path(cpu_path)
    if cpu_path in PATHS and why_not(cpu_path, model) is not None:
        raise ValueError(f"cpu_path={cpu_path!r} cannot apply: {why_not(cpu_path, model)}; use "
                         f"cpu_path='auto' or 'dense' (or a float32 model on the CPU)")
    settled = True
    if cpu_path == "auto":
        if applicable_paths(model) == ["dense"]:
            cpu_path = "dense"
        else:
            cpu_path, settled = cached_choice(model, Path(cache_file))
    use_path(model, cpu_path)
    model.specnb_cpu_path_settled = settled
    return model
