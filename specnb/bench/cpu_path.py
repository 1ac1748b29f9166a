"""The checking-cost curve t(k)/t(1), k = 1..16, of each CPU path (`fast_path.PATHS`).

    python -m specnb.bench.cpu_path            embedded model -> data/results/latency-cpu-<cpu>.json

One run times every path of `specnb.models.fast_path` on the same model, interleaved
(`fast_path.calibrate` with more k and repeats), and writes the CPU's model name and ISA, the
threads, the versions, the medians and every sample, the path "auto" would pick from these
numbers, and a PNG (`specnb.viz.latency.plot_checking_cost`). A second pass, interleaved the
same way, times the dense path with transformers' own SDPA attention, which copies the cached
keys and values for every masked multi-token chunk (`specnb.models.attention`), against the
attention `load_model` gives: one more curve. Run it on an idle machine: the numbers are only
as good as the machine is quiet.

It does not touch the calibration cache (`~/.cache/specnb/cpu-path.json`) and times no
decoding loop (`python -m specnb.bench` does).
"""

import argparse
import datetime
import json
import platform
import statistics
from pathlib import Path

import torch

from ..core.args import command_line
from ..models.data import DATA_DIR
from ..models.attention import NAME as ATTENTION
from ..models.fast_path import PATHS, choose, calibrate, cpu_identity, use_path, why_not
from ..models.loading import load_model


COPYING = "dense, sdpa copying heads"  # the third curve's name in the record


def attention_pass(model, token_counts, prefix_len: int, repeats: int, rounds: int) -> dict:
    """Dense path, ms per forward with the model's attention and with transformers' "sdpa",
    alternating per round; the model is left on its own attention. {name: [median ms]} and
    {name: [[samples]]} under "median_ms" / "samples_ms"."""
    from ..core.latency import measure_forward_latency

    own = model.config._attn_implementation
    names = [own, "sdpa"]
    samples = {name: {k: [] for k in token_counts} for name in names}
    try:
        for round_index in range(rounds):
            for name in names if round_index % 2 == 0 else names[::-1]:
                model.set_attn_implementation(name)
                with torch.no_grad():
                    record = measure_forward_latency(model, prefix_len, token_counts,
                                                     repeats=repeats)
                for k, ms in zip(record["token_counts"], record["samples_ms"]):
                    samples[name][k] += ms
    finally:
        model.set_attn_implementation(own)
    return {"attention": own, "reference": "sdpa",
            "median_ms": {name: [statistics.median(samples[name][k]) for k in token_counts]
                          for name in names},
            "samples_ms": {name: [samples[name][k] for k in token_counts] for name in names}}


def run(model, token_counts, prefix_len: int, repeats: int, rounds: int) -> dict:
    """The record: every path's medians (and samples) for `token_counts`, and the CPU; when the
    model runs specnb's attention, also the dense path with transformers' copying one."""
    import transformers

    if why_not("prepacked", model):
        raise ValueError(f"model: {why_not('prepacked', model)}; this compares CPU float32 paths")
    token_counts, per_round = list(token_counts), -(-repeats // rounds)
    measured = calibrate(model, token_counts, prefix_len, per_round, rounds)
    use_path(model, "dense")
    paths = {path: measured[f"{path}_ms"] for path in PATHS}
    samples = {path: measured[f"{path}_samples_ms"] for path in paths}
    attention = None
    if model.config._attn_implementation == ATTENTION:
        attention = attention_pass(model, token_counts, prefix_len, per_round, rounds)
        paths[COPYING] = attention["median_ms"]["sdpa"]
        samples[COPYING] = attention["samples_ms"]["sdpa"]
    return {"cpu": cpu_identity(), "threads": torch.get_num_threads(),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": platform.python_version()},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "model": {k: getattr(model.config, k, None) for k in
                      ("name_or_path", "hidden_size", "num_hidden_layers", "vocab_size")},
            "token_counts": measured["token_counts"], "prefix_len": prefix_len,
            "repeats": rounds * per_round, "paths": paths,
            "relative": {path: [ms / times[0] for ms in times] for path, times in paths.items()},
            "samples_ms": samples, "auto_would_pick": choose(measured),
            "attention": model.config._attn_implementation,
            # the same pass's own-attention medians: the fair comparison with COPYING
            "attention_pass_ms": attention and attention["median_ms"]}


def format_table(record: dict) -> str:
    lines = [f"{record['cpu']['name']} [{record['cpu']['isa']}], {record['threads']} threads, "
             f"torch {record['versions']['torch']}",
             f"{'k':>3}" + "".join(f"{path + ' ms':>{len(path) + 4}} {'t/t1':>5}"
                                   for path in record["paths"])]
    for i, k in enumerate(record["token_counts"]):
        lines.append(f"{k:>3}" + "".join(
            f"{ms[i]:{len(path) + 4}.1f} {record['relative'][path][i]:5.2f}"
            for path, ms in record["paths"].items()))
    if record.get("attention_pass_ms"):
        own = record["attention_pass_ms"][record["attention"]]
        copying = record["attention_pass_ms"]["sdpa"]
        lines.append(f"attention {record['attention']} vs sdpa (same pass, dense), ms: " + ", ".join(
            f"k={k} {a:.1f}/{b:.1f}" for k, a, b in zip(record["token_counts"], own, copying)))
    lines.append(f"auto would pick: {record['auto_would_pick']}")
    return "\n".join(lines)


def main(argv=None) -> dict:
    from ..viz.latency import plot_checking_cost  # only for the PNG: measuring needs no viz

    parser = argparse.ArgumentParser(prog="python -m specnb.bench.cpu_path",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", default=None, help="a Hub id or folder (default: embedded)")
    parser.add_argument("--max-k", type=int, default=16)
    parser.add_argument("--prefix-len", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=10, help="per path and k, over 2 rounds")
    parser.add_argument("--out", type=Path, default=None,
                        help="default: data/results/latency-cpu-<cpu tag>.json")
    args = parser.parse_args(argv)
    if args.max_k < 2 or args.prefix_len < 1 or args.repeats < 2:
        parser.error("--max-k must be >= 2, --prefix-len >= 1, --repeats >= 2")
    model, _ = load_model(args.model, device="cpu", dtype=torch.float32, cpu_path="dense")
    record = run(model, range(1, args.max_k + 1), args.prefix_len, args.repeats, rounds=2)
    record["command"] = command_line("python -m specnb.bench.cpu_path", argv)
    out = args.out or DATA_DIR / "results" / f"latency-cpu-{record['cpu']['tag']}.json"
    print(format_table(record))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1))
    plot_checking_cost(record).savefig(out.with_suffix(".png"), dpi=110, bbox_inches="tight")
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return record


if __name__ == "__main__":
    main()
