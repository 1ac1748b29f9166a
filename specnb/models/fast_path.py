"""The fastest exact CPU path for a model's linear layers, chosen by measuring on this CPU.

A dense float32 `nn.Linear` on the CPU takes a GEMV kernel for one row and a packing GEMM for
two or more; oneDNN's linear on a weight converted once to its own layout (`to_mkldnn`, as
`torch.utils.mkldnn.MkldnnLinear`) does the same maths another way, here on plain input and
output tensors (`POINTWISE`). Which one is faster depends on the CPU: its vector extensions,
which kernels torch and oneDNN pick for them, and how much of a forward is spent reading the
weights. Where the oneDNN path wins, a forward over a few tokens costs little more than a
one-token one, and the one-token forward may get cheaper too; where it loses (or where
activations are converted to oneDNN's layout and back around each linear), every forward gets
slower. `python -m specnb.bench.cpu_path` records both curves per CPU
(data/results/latency-cpu-*.json, shown in RESULTS.md). So `cpu_path`:

    "dense"      plain nn.Linear, as transformers loads it
    "prepacked"  every nn.Linear becomes a `PrepackedLinear` (oneDNN, float32, same results up
                 to float rounding; greedy tokens unchanged in the tests)
    "auto"       on a CPU with float32 weights: a calibration of a few seconds at first load
                 (`calibrate`), kept in `cache_dir()/cpu-path.json` keyed by CPU model,
                 ISA, torch version, threads and the model's shape (`calibration_key`;
                 delete the file to recalibrate); off the CPU or float32: dense
    None         $SPECNB_CPU_PATH if set, else "auto"

The rule (`choose`): prepacked only if its 1-token forward is no slower than dense AND its
checking cost t(k), k = 2 and 4, is at least `MARGIN` (10%) lower (median of the per-k ratios),
in each of three rounds and overall; rounds that disagree mean a busy machine (a busy moment
can make one path look many times slower than it is): dense, and nothing is cached. `MARGIN`
is above the spread of a median of a few forwards on a shared CPU, so noise alone does not flip
the choice, and well below the gain on CPUs where prepacking helps (the latency records above);
on a near tie dense, the path transformers and everyone else use, wins.

`PrepackedLinear` is an `nn.Linear` holding the very same weight Parameter (a tied lm_head stays
tied; `parameters()`, `state_dict`, `save_pretrained`, `model.dtype` see no change), plus a
oneDNN copy of it that is rebuilt when the weight changes (in place or by `.to`; a write
through `weight.data` bypasses the version counter and is not seen: call
`use_path(model, "prepacked")` again after one). It runs the dense kernel wherever oneDNN does
not apply: gradients wanted, CPU autocast on, an input or weight not float32 on the CPU. The
price is memory: a second copy of every linear weight (~0.5 GB for the embedded model). What
this module does not do: reduced precision (bf16/int8: the target stays float32; the draft
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

CPU_PATHS = ("auto", "dense", "prepacked")
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


class CopiedWeightLinear(nn.Linear):
    """An `nn.Linear` holding `linear`'s own weight and bias (the same Parameters, not copies)
    plus a copy of them in another kernel's format (`_pack`), rebuilt when they change; it runs
    the float kernel where the copy cannot (`_float_only`). The base of `PrepackedLinear` and
    of the draft head's `Int8Linear` (specnb.models.int8_draft)."""

    def __init__(self, linear: nn.Linear):
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self._packed, self._packed_for = None, None

    def _pack(self, tensors: list):
        """The copy of `tensors` ([weight] or [weight, bias]) in the kernel's format."""
        raise NotImplementedError

    def _float_only(self, x) -> bool:
        wants_grad = torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad)
        return (wants_grad or x.dtype != torch.float32 or x.device.type != "cpu"
                or self.weight.dtype != torch.float32 or self.weight.device.type != "cpu"
                or x.numel() == 0)

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


def use_path(model, path: str):
    """Swap every linear of `model` to `path` ("dense" or "prepacked") in place; returns it."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if path == "prepacked" and type(child) is nn.Linear:
                setattr(parent, name, PrepackedLinear(child))
            elif path == "prepacked" and isinstance(child, PrepackedLinear):
                child._packed, child._packed_for = None, None  # repacked at its next use
            elif path == "dense" and isinstance(child, PrepackedLinear):
                dense = nn.Linear(child.in_features, child.out_features, bias=False,
                                  device="meta")
                dense.weight, dense.bias = child.weight, child.bias
                setattr(parent, name, dense)
    model.specnb_cpu_path = path
    return model


def follow_path(module, model):
    """Put `module` (a draft head, say) on the CPU path `model` runs, where it applies; returns
    it. The head's linears then take the path measured for the target's, the same kernels on
    the same CPU: where prepacking pays for the target's one-token forward it pays for the
    head's steps too, and the head's drafts do not change."""
    path = getattr(model, "specnb_cpu_path", "dense")
    if path == "prepacked" and why_not_prepacked(module) is not None:
        path = "dense"
    return use_path(module, path)


def why_not_prepacked(model):
    """None if prepacking applies to `model`, else the reason as a sentence fragment."""
    parameter = next(model.parameters())
    if parameter.device.type != "cpu":
        return f"the model is on {parameter.device}; prepacking is for the CPU"
    if parameter.dtype != torch.float32:
        return f"the model is {parameter.dtype}; prepacking needs float32"
    if not torch.backends.mkldnn.is_available():
        return "this torch has no oneDNN (torch.backends.mkldnn.is_available() is False)"
    return None


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
    and the prepacked op (a cache measured with the converting op is not reused either)."""
    c, cpu = model.config, cpu_identity()
    shape = {k: getattr(c, k, None) for k in ("model_type", "hidden_size", "intermediate_size",
                                              "num_hidden_layers", "num_attention_heads",
                                              "num_key_value_heads", "vocab_size")}
    digest = hashlib.sha1(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:10]
    return (f"{cpu['name']} [{cpu['isa']}] torch {torch.__version__} "
            f"threads {torch.get_num_threads()} | {c.model_type} h{c.hidden_size} "
            f"l{c.num_hidden_layers} v{c.vocab_size} {digest}"
            f" {getattr(c, '_attn_implementation', None) or 'eager'}"
            + (" plain-input" if POINTWISE is not None else ""))


def calibrate(model, token_counts=None, prefix_len=None, repeats=None, rounds=None) -> dict:
    """Median ms of a forward of k tokens after a cached prefix, for both paths, round by round.

    Defaults: `CALIBRATION` (about 80 forwards: a few seconds for the embedded model on an idle
    CPU). Each round measures dense, then prepacked (the order alternates between rounds),
    so a busy moment lands in one round, which `choose` then finds disagreeing with the others.
    Leaves the model on the last path measured. Returns {"token_counts", "prefix_len",
    "dense_ms", "prepacked_ms" (medians over all rounds), "dense_samples_ms",
    "prepacked_samples_ms" (every sample), "rounds": [{"dense_ms", "prepacked_ms"} per round]}.
    """
    from ..core.latency import measure_forward_latency

    c = CALIBRATION
    token_counts = list(token_counts or c["token_counts"])
    prefix_len, repeats = prefix_len or c["prefix_len"], repeats or c["repeats"]
    measured = {"token_counts": token_counts, "prefix_len": prefix_len, "rounds": []}
    samples = {path: {k: [] for k in token_counts} for path in ("dense", "prepacked")}
    for round_index in range(rounds or c["rounds"]):
        this_round = {}
        for path in (("dense", "prepacked") if round_index % 2 == 0 else ("prepacked", "dense")):
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


def _verdict(token_counts, dense, prepacked) -> str:
    """One set of medians: "prepacked" if t_p(1) <= t_d(1) and median_k t_p(k)/t_d(k) <=
    1 - MARGIN over the k of `CALIBRATION` after 1, else "dense"."""
    at = {k: i for i, k in enumerate(token_counts)}
    if 1 not in at:
        raise ValueError("measured['token_counts'] must include k = 1 (the one-token forward)")
    checked = [at[k] for k in CALIBRATION["token_counts"][1:] if k in at]
    ratios = [prepacked[i] / dense[i] for i in checked]
    one_token_ok = prepacked[at[1]] <= dense[at[1]]
    return "prepacked" if one_token_ok and ratios and \
        statistics.median(ratios) <= 1 - MARGIN else "dense"


def decide(measured: dict) -> tuple[str, bool]:
    """(path, settled): the verdict of every round and of the overall medians must agree;
    otherwise the machine was too busy to tell, and the answer is dense, unsettled (not cached,
    so the next load measures again). A record without rounds is one round."""
    token_counts = measured["token_counts"]
    verdicts = {_verdict(token_counts, measured["dense_ms"], measured["prepacked_ms"])}
    for one in measured.get("rounds", []):
        verdicts.add(_verdict(token_counts, one["dense_ms"], one["prepacked_ms"]))
    return (verdicts.pop(), True) if len(verdicts) == 1 else ("dense", False)


def choose(measured: dict) -> str:
    """The path `decide` settles on, dense when it cannot settle.

    Example: dense [58, 94, 91], prepacked [53, 59, 61] ms at k = 1, 2, 4 -> "prepacked";
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
    if key in cache and cache[key].get("path") in ("dense", "prepacked"):
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
    `model.specnb_cpu_path` to "dense" or "prepacked", the path it now runs, and
    `model.specnb_cpu_path_settled` to False where "auto" could not settle (a busy machine: the
    path is dense for now, and the next load calibrates again).
    """
    cpu_path = resolve_cpu_path(cpu_path)
    reason = why_not_prepacked(model)
    if cpu_path == "prepacked" and reason is not None:
        raise ValueError(f"cpu_path='prepacked' cannot apply: {reason}; use cpu_path='auto' or "
                         f"'dense' (or a float32 model on the CPU)")
    settled = True
    if cpu_path == "auto":
        if reason is not None:
            cpu_path = "dense"
        else:
            cpu_path, settled = cached_choice(model, Path(cache_file))
    use_path(model, cpu_path)
    model.specnb_cpu_path_settled = settled
    return model
