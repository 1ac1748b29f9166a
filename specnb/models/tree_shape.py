"""The token-tree shape the embedded head should draft on this machine, chosen by measurement.

What a shape accepts depends on the head: its acceptance by rank and depth, measured once on
held-out prompts (`python -m specnb.training.head_ranks` writes `data/head/ranks.json`). What
it costs depends on the machine: a forward over k tokens costs t(k)/t(1) one-token forwards
(near 1 on a GPU; on a CPU it rises with k, by steps where the kernels change, differently on
each CPU: data/results/latency-cpu-*.json), and a head step c of one.
`recommend_shape(target, head)` measures both here and picks the candidate with the highest
predicted speedup (`specnb.theory.predicted_tree_speedup`):

    (1 + E[accepted]) / (D c + t(N + 1) / t(1))      N nodes, depth D

A chain of γ is the shape (1,) * γ, so chains compete too; so do the EAGLE-2 dynamic trees the
record measured (their drafts accepted per iteration, `predicted_from_accepted`), since what they
accept is no function of the rank table. The curve is measured in two rounds;
when both pick the same shape, or their two picks lie within `TIE` of each other by the pooled
prediction (a tie: either is as good), it is cached in `cache_dir()/tree-shape.json`, keyed by
the device, the model, its CPU path, the head's path and the ranks (delete the file to measure
again); when they disagree further (a busy machine) the pooled choice is returned and nothing is
cached.
`speculative(target, head, ids, max_new_tokens=...)` without `gamma` drafts this shape.

The head's precision is part of the choice: given an int8 copy of the head
(`specnb.models.int8_draft`) and its own acceptance by rank (the record's "int8"), every static
shape competes twice, "(4, 2, 1)" and "int8 (4, 2, 1)", each with its own head's c measured here.
The int8 head reads a quarter of the bytes per step and agrees a little less with the target;
which wins depends on the machine's memory and the shape's depth.

The record's curve (each k's median over the rounds, made non-decreasing) and the drafting
head's c also price each iteration's tree: `tree_cost(record, int8)` is the `TreeCost` with which
the recommended static tree is trimmed to the nodes that pay (`specnb.drafters.trim`).

Sampling (T > 0) takes the best *chain* by the same prediction (`shape_for`): a tree's
candidates are the head's top-k tokens, checked as point masses, while a chain's drafts are
sampled from q and checked by rejection sampling, which accepts more, and the rank table only
measures greedy acceptance. The head's benchmarks at T = 0.7 set chains beside static and
dynamic trees (data/results/bench-cpu-head*t07*.json, shown in RESULTS.md).
"""

import ast
import hashlib
import itertools
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.latency import measure_forward_latency
from ..drafters import FeatureDrafter
from ..methods import autoregressive, speculative
from ..drafters.dynamic_tree import DynamicTree
from ..drafters.trim import TreeCost
from ..theory import (check_tree_shape, estimate_cost_ratio, predicted_from_accepted,
                      predicted_tree_speedup)
from .data import DATA_DIR
from .fast_path import calibration_key, on_quiet_machine
from .loading import cache_dir

RANKS_FILE = DATA_DIR / "head" / "ranks.json"
ROUNDS = 2
TIMING = {"prefix_len": 64, "repeats": 5, "head_tokens": 12}
TIE = 0.02  # rounds whose picks are predicted within 2 % of each other agree on a tie


def candidate_shapes(measured) -> list:
    """Every shape within the measured one (each depth's width up to its width, any depth up
    to its depth), chains included. Example: (2, 1) -> (1,), (2,), (1, 1), (2, 1)."""
    measured = check_tree_shape(measured)
    shapes = []
    for depth in range(1, len(measured) + 1):
        shapes += itertools.product(*(range(1, w + 1) for w in measured[:depth]))
    return sorted(shapes, key=lambda s: (len(s), s))


@dataclass(frozen=True)
class Int8Shape:
    """A static shape drafted by the head's int8 copy: `Int8Shape((4, 2, 1))` (not equal to
    the float head's (4, 2, 1): both compete)."""

    widths: tuple


def candidates(ranks: dict, int8: bool = False) -> list:
    """The static shapes within the measured one, then the record's dynamic trees, then (with
    `int8` and the record's int8 ranks) the static shapes again for the int8 head."""
    shapes = candidate_shapes(ranks["shape_measured"]) + [
        DynamicTree(*row["dynamic"]) for row in ranks.get("dynamic", [])]
    if int8 and "int8" in ranks:
        shapes += [Int8Shape(s) for s in candidate_shapes(ranks["int8"]["shape_measured"])]
    return shapes


def label(candidate) -> str:
    """'(2, 1)' for a static shape, 'int8 (2, 1)' for one drafted by the int8 head,
    'dynamic (2, 2, 2)' for (nodes, depth, branch)."""
    if isinstance(candidate, DynamicTree):
        return f"dynamic ({candidate.nodes}, {candidate.depth}, {candidate.branch})"
    if isinstance(candidate, Int8Shape):
        return f"int8 {tuple(candidate.widths)}"
    return str(tuple(candidate))


def predicted(candidate, ranks: dict, c: float, latency: dict, c_int8=None) -> float:
    if isinstance(candidate, DynamicTree):
        (row,) = [r for r in ranks["dynamic"] if DynamicTree(*r["dynamic"]) == candidate]
        return predicted_from_accepted(row["accepted_per_iteration"], candidate.depth,
                                       candidate.nodes, c, latency)
    if isinstance(candidate, Int8Shape):
        return predicted_tree_speedup(ranks["int8"]["acceptance"], candidate.widths, c_int8,
                                      latency)
    return predicted_tree_speedup(ranks["acceptance"], candidate, c, latency)


def nodes_of(candidate) -> int:
    if isinstance(candidate, Int8Shape):
        return sum(candidate.widths)
    return candidate.nodes if isinstance(candidate, DynamicTree) else sum(candidate)


def load_ranks(path=RANKS_FILE) -> dict:
    """The head's measured acceptance by rank (`specnb.training.head_ranks`)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no acceptance-by-rank record at {path}: measure it with "
                         f"`python -m specnb.training.head_ranks` (data/README.md)")
    return json.loads(path.read_text())


def shape_key(target, ranks: dict, head, int8_head=None) -> str:
    device = next(target.parameters()).device
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    weighed = [ranks["acceptance"], ranks.get("dynamic", [])]
    if int8_head is not None:
        weighed.append(ranks.get("int8", {}).get("acceptance"))
    digest = hashlib.sha1(json.dumps(weighed).encode()).hexdigest()[:10]
    return (f"{where} | {calibration_key(target)} | {next(target.parameters()).dtype} "
            f"{getattr(target, 'specnb_cpu_path', 'dense')} | ranks {digest} "
            f"| head {getattr(head.head, 'specnb_cpu_path', 'dense')}"
            + (" and int8" if int8_head is not None else "")
            + f" | {ROUNDS} rounds of {TIMING['repeats']}")


def _head_cost(target, drafter, ids, plain) -> float:
    """c of `drafter`'s head as a chain of one against `plain` (an autoregressive run)."""
    chain = drafter if drafter.tree is None and drafter.dynamic is None else \
        FeatureDrafter(drafter.head)
    return estimate_cost_ratio(speculative(target, chain, ids, gamma=1,
                                           max_new_tokens=TIMING["head_tokens"]), plain)


def _one_round(target, head, ranks: dict, shapes: list, int8_head=None) -> dict:
    largest = max(nodes_of(s) for s in shapes) + 1
    latency = measure_forward_latency(target, prefix_len=TIMING["prefix_len"],
                                      token_counts=range(1, largest + 1),
                                      repeats=TIMING["repeats"])
    generator = torch.Generator().manual_seed(0)  # any prompt: only the clock is read
    ids = torch.randint(0, target.config.vocab_size, (1, TIMING["prefix_len"]),
                        generator=generator).to(next(target.parameters()).device)
    plain = autoregressive(target, ids, max_new_tokens=TIMING["head_tokens"])
    c = _head_cost(target, head, ids, plain)
    c_int8 = None if int8_head is None else _head_cost(target, int8_head, ids, plain)
    return {"latency": latency, "c": c, "c_int8": c_int8,
            "predicted": {s: predicted(s, ranks, c, latency, c_int8) for s in shapes}}


def recommend_shape(target, head, *, ranks=None, cache_file=None, int8_head=None) -> dict:
    """{"shape", "dynamic", "int8", "predicted" ({label: speedup}), "c", "checking_cost" ({k:
    t(k)/t(1)}, pooled over the rounds, non-decreasing), "cached" (read from the cache),
    "settled" (cached, or stored now; False: a busy machine, measured again next time)}: the candidate with the
    highest predicted speedup on this machine (module docstring): a static shape in "shape" (a
    tuple; "dynamic" None) or a dynamic tree in "dynamic" (a DynamicTree; "shape" None); "int8"
    True when the int8 head drafts it. `ranks`: a `load_ranks()` record (default: the embedded
    head's). `int8_head`: the head's int8 copy as a FeatureDrafter
    (`specnb.models.int8_draft.int8_copy`), weighed when the ranks record has its acceptance
    ("int8"); None: the head as it is, alone."""
    ranks = load_ranks() if ranks is None else ranks
    if int8_head is not None and "int8" not in ranks:
        int8_head = None  # nothing to predict its acceptance from
    shapes = candidates(ranks, int8=int8_head is not None)
    cache_file = Path(cache_file) if cache_file is not None else cache_dir() / "tree-shape.json"
    key = shape_key(target, ranks, head, int8_head)
    cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    if key in cache:
        return {**cache[key], **_choice(cache[key]["choice"]), "cached": True, "settled": True}
    rounds = [_one_round(target, head, ranks, shapes, int8_head) for _ in range(ROUNDS)]
    pooled = {s: statistics.median(r["predicted"][s] for r in rounds) for s in shapes}
    best = max(shapes, key=lambda s: pooled[s])
    record = {"choice": label(best), "c": statistics.median(r["c"] for r in rounds),
              **({"c_int8": statistics.median(r["c_int8"] for r in rounds)}
                 if int8_head is not None else {}),
              "predicted": {label(s): round(v, 4) for s, v in pooled.items()},
              "checking_cost": pooled_checking_cost([r["latency"] for r in rounds])}
    picks = {max(shapes, key=lambda s: r["predicted"][s]) for r in rounds}
    # The rounds agree, or pick a tie, or nothing else runs (`fast_path.quiet_machine`).
    settled = min(pooled[s] for s in picks) >= (1 - TIE) * pooled[best] or on_quiet_machine()
    if settled:
        cache[key] = record
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(cache, indent=1))
    return {**record, **_choice(record["choice"]), "cached": False, "settled": settled}


def pooled_checking_cost(latencies: list) -> dict:
    """{k: t(k)/t(1)} from several `measure_forward_latency` rounds: each k's median over the
    rounds, then made non-decreasing in k (a wider forward never costs less; a dip is noise)."""
    counts = latencies[0]["token_counts"]
    one = statistics.median(r["median_ms"][0] for r in latencies)
    curve, highest = {}, 0.0
    for i, k in enumerate(counts):
        highest = max(highest, statistics.median(r["median_ms"][i] for r in latencies) / one)
        curve[k] = round(highest, 4)
    return curve


def tree_cost(record: dict, int8: bool = False) -> TreeCost:
    """What an iteration costs here (`specnb.drafters.trim`), from a `recommend_shape` record:
    its checking curve and the c of the head that drafts (`int8`: the int8 copy)."""
    curve = record["checking_cost"]
    checking = tuple(curve[k] for k in sorted(curve, key=int))
    return TreeCost(checking, record["c_int8"] if int8 else record["c"])


def _best_chain(record: dict) -> str:
    """The label of the chain (1,) * γ predicted fastest, with either head."""
    chains = [label for label in record["predicted"] if not label.startswith("dynamic ")
              and set(ast.literal_eval(label.removeprefix("int8 "))) == {1}]
    if not chains:
        raise ValueError("the record predicts no chain: measure shapes that include (1,)")
    return max(chains, key=lambda label: record["predicted"][label])


def shape_for(record: dict, temperature: float):
    """What to draft at `temperature` from a `recommend_shape` record: its choice (a shape or
    a DynamicTree) when greedy; when sampling, the chain (1,) * γ predicted fastest. Which
    head drafts it: `int8_for`."""
    if temperature == 0:
        return record["dynamic"] or record["shape"]
    return _choice(_best_chain(record))["shape"]


def int8_for(record: dict, temperature: float) -> bool:
    """True when the shape `shape_for` gives at `temperature` is the int8 head's."""
    if temperature == 0:
        return bool(record.get("int8"))
    return _choice(_best_chain(record))["int8"]


def _choice(text: str) -> dict:
    """{"shape", "dynamic", "int8"} from a candidate's label."""
    if text.startswith("dynamic "):
        return {"shape": None, "int8": False,
                "dynamic": DynamicTree(*ast.literal_eval(text[len("dynamic "):]))}
    int8 = text.startswith("int8 ")
    return {"shape": tuple(ast.literal_eval(text.removeprefix("int8 "))), "dynamic": None,
            "int8": int8}
