"""Why decoding is slow: forward latency against tokens per forward, and the roofline numbers.

`measure_forward_latency` times one model forward that scores k new tokens on top of a fixed,
already cached prefix, for several k (warm-up first, then the median of repeats, with the k
interleaved so that a slow moment of the machine does not land on one k only). It returns
plain data; `plot_forward_latency` draws it; `roofline_numbers` is the memory-bound arithmetic
(weight bytes read per forward against FLOPs per token) for a model size and a device's
bandwidth and peak FLOP/s, which are assumptions the caller states.

It deliberately does not pick hardware numbers, and it does not batch several sequences: the
k tokens all belong to one sequence, as in verifying k drafted tokens.

Example: roofline_numbers(1e9, 2, 2e12, 2e14)["memory_floor_s"] -> 0.001 (2 GB read at 2 TB/s).
"""

import statistics

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..core import CachedLM


def measure_forward_latency(model, prefix_len: int, token_counts, repeats: int = 5,
                            generator=None, warmup: int = 1) -> dict:
    """Median milliseconds of one forward scoring k new tokens after a cached `prefix_len` prefix.

    Token ids are random (latency does not depend on which tokens they are). Every forward
    returns the logits of all k new positions, as verifying k drafted tokens needs. Returns
    {"token_counts": [k], "median_ms": [ms], "ms_per_token": [ms / k], "samples_ms": [[ms]],
     "prefix_len", "repeats", "device", "dtype"}.
    """
    token_counts = [int(k) for k in token_counts]
    if not token_counts or min(token_counts) < 1:
        raise ValueError(f"token_counts must be a non-empty list of integers >= 1, got {token_counts}")
    if int(prefix_len) != prefix_len or prefix_len < 1:
        raise ValueError(f"prefix_len must be an integer >= 1, got {prefix_len}")
    if int(repeats) != repeats or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats}")
    if int(warmup) != warmup or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup}")
    lm = CachedLM(model)
    context = lm.max_positions
    if context is not None and prefix_len + max(token_counts) > context:
        raise ValueError(f"prefix_len + max(token_counts) = {prefix_len + max(token_counts)} "
                         f"exceeds the model's context of {context}")
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    prefix = torch.randint(0, lm.vocab_size, (prefix_len,), generator=generator).tolist()
    new_tokens = {k: torch.randint(0, lm.vocab_size, (k,), generator=generator).tolist()
                  for k in token_counts}
    lm.logits(prefix, keep=1)  # fill the cache with the prefix once

    samples_ms = {k: [] for k in token_counts}
    for round_index in range(warmup + repeats):
        for k in token_counts:  # interleaved: each round visits every k once
            lm.logits(prefix + new_tokens[k], keep=k)  # reuses the prefix, runs exactly k tokens
            assert lm.log.num_tokens[-1] == k
            if round_index >= warmup:
                samples_ms[k].append(lm.log.seconds[-1] * 1e3)

    median_ms = [statistics.median(samples_ms[k]) for k in token_counts]
    return {"token_counts": token_counts, "median_ms": median_ms,
            "ms_per_token": [ms / k for ms, k in zip(median_ms, token_counts)],
            "samples_ms": [samples_ms[k] for k in token_counts], "prefix_len": int(prefix_len),
            "repeats": int(repeats), "device": str(lm.device),
            "dtype": str(next(model.parameters()).dtype).replace("torch.", "")}


def plot_forward_latency(measurements: dict) -> Figure:
    """Two panels, log-x: ms per forward (with the "k × one token" line) and ms per token."""
    counts = measurements.get("token_counts")
    if not counts or len(counts) != len(measurements.get("median_ms", [])):
        raise ValueError("measurements must hold equally long 'token_counts' and 'median_ms' "
                         "(the dict returned by measure_forward_latency)")
    median_ms, per_token_ms = measurements["median_ms"], measurements["ms_per_token"]
    where = f"{measurements.get('device', '?')}, {measurements.get('dtype', '?')}, " \
            f"prefix {measurements.get('prefix_len', '?')} tokens"
    smallest = counts.index(min(counts))
    one_token_ms = median_ms[smallest] / counts[smallest]

    fig, (per_forward, per_token) = plt.subplots(1, 2, figsize=(11, 4))  # the notebook shows it
    per_forward.plot(counts, median_ms, "o-", label="measured (median)")
    per_forward.plot(counts, [one_token_ms * k for k in counts], "--", color="grey",
                     label="k separate forwards of one token")
    per_forward.set_title(f"Cost of one forward scoring k tokens\n({where})")
    per_forward.set_ylabel("time per forward (ms)")
    per_forward.set_yscale("log")
    per_forward.legend()
    per_token.plot(counts, per_token_ms, "o-", color="tab:orange")
    per_token.set_title("Cost per scored token")
    per_token.set_ylabel("time per token (ms)")
    per_token.set_ylim(bottom=0)
    for axes in (per_forward, per_token):
        axes.set_xscale("log", base=2)
        axes.set_xticks(counts, [str(k) for k in counts])
        axes.set_xlabel("new tokens scored in one forward, k")
        axes.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def roofline_numbers(num_params: float, bytes_per_param: float, bandwidth_bytes_per_s: float,
                     flops_per_s: float) -> dict:
    """The memory-bound arithmetic of one forward scoring k tokens of a dense model.

    A forward reads every weight once, whatever k is: num_params × bytes_per_param bytes. Each
    token costs about 2 FLOPs per parameter (one multiply, one add). So one token does
    2 / bytes_per_param FLOPs per byte read, while the device can do flops_per_s /
    bandwidth_bytes_per_s FLOPs in the time it reads one byte (its ridge point). Up to
    ridge / intensity tokens per forward, reading the weights takes longer than the arithmetic:
    the extra tokens ride along almost for free. (KV-cache reads and overheads come on top.)
    """
    for name, value in (("num_params", num_params), ("bytes_per_param", bytes_per_param),
                        ("bandwidth_bytes_per_s", bandwidth_bytes_per_s),
                        ("flops_per_s", flops_per_s)):
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    weight_bytes = num_params * bytes_per_param
    flops_per_token = 2 * num_params
    intensity = flops_per_token / weight_bytes  # FLOP per byte at one token per forward
    ridge = flops_per_s / bandwidth_bytes_per_s  # FLOP per byte where compute takes over
    memory_floor_s = weight_bytes / bandwidth_bytes_per_s
    return {"weight_bytes": weight_bytes, "flops_per_token": flops_per_token,
            "intensity_flop_per_byte": intensity, "ridge_flop_per_byte": ridge,
            "memory_floor_s": memory_floor_s,
            "compute_s_per_token": flops_per_token / flops_per_s,
            "tokens_until_compute_bound": ridge / intensity,
            "max_tokens_per_s_one_per_forward": 1 / memory_floor_s}
