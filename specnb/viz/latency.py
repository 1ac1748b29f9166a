"""Why decoding is slow: forward latency against tokens per forward, and the roofline numbers.

`plot_forward_latency` draws what `specnb.core.latency.measure_forward_latency` measured (the
time of one forward scoring k new tokens after a cached prefix, for several k);
`plot_checking_cost` draws the record of `python -m specnb.bench.cpu_path` (t(k)/t(1) and ms
per forward of each CPU path of `specnb.models.fast_path`), `plot_recorded_checking_costs` the
checking cost of several such records on one panel;
`roofline_numbers` is the memory-bound arithmetic (weight bytes read per forward against FLOPs
per token) for a model size and a device's bandwidth and peak FLOP/s, which are assumptions the
caller states.

It deliberately runs no model (measuring is `specnb.core.latency`'s job) and does not pick
hardware numbers.

Example: roofline_numbers(1e9, 2, 2e12, 2e14)["memory_floor_s"] -> 0.001 (2 GB read at 2 TB/s).
"""

import matplotlib.pyplot as plt
from matplotlib.figure import Figure


def plot_forward_latency(measurements: dict) -> Figure:
    """Two panels, log-x: ms per forward (with the "k × one token" line) and ms per token."""
    counts = measurements.get("token_counts")
    if not counts or len(counts) != len(measurements.get("median_ms", [])):
        raise ValueError("measurements must hold equally long 'token_counts' and 'median_ms' "
                         "(the dict returned by specnb.core.latency.measure_forward_latency)")
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
        _token_count_axis(axes, counts)
    fig.tight_layout()
    return fig


def plot_checking_cost(record: dict) -> Figure:
    """Two panels, log-x: t(k)/t(1) per CPU path, and ms per forward (median, with n)."""
    paths = record.get("paths")
    if not paths or "token_counts" not in record:
        raise ValueError("record must hold 'token_counts' and 'paths' {path: [ms]} (the record "
                         "written by python -m specnb.bench.cpu_path)")
    counts = record["token_counts"]
    fig = Figure(figsize=(11, 4))  # not pyplot's: display(fig) shows it once
    relative, absolute = fig.subplots(1, 2)
    for path, median_ms in paths.items():
        relative.plot(counts, [ms / median_ms[0] for ms in median_ms], "o-", label=path)
        absolute.plot(counts, median_ms, "o-", label=path)
    cpu = record.get("cpu", {})
    relative.set_title(f"Checking cost t(k)/t(1), prefix {record.get('prefix_len', '?')} "
                       f"tokens\n({cpu.get('name', '?')}, {cpu.get('isa', '?')})")
    relative.set_ylabel("t(k) / t(1)")
    absolute.set_title(f"Time per forward (median of {record.get('repeats', '?')})")
    absolute.set_ylabel("time per forward (ms)")
    absolute.set_ylim(bottom=0)
    for axes in (relative, absolute):
        _token_count_axis(axes, counts)
        axes.legend()
    fig.tight_layout()
    return fig


def plot_recorded_checking_costs(records: dict) -> Figure:
    """One log-x panel: t(k)/t(1) of every record (`python -m specnb.bench.cpu_path`, keyed by
    file name) and every CPU path in it; a colour per record, labelled by its name (without
    `latency-cpu-` and `.json`: the CPU tag) and the path, a line style per path."""
    if not records:
        raise ValueError("no records: pass {name: record} of data/results/latency-cpu-*.json")
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots()
    styles = ["o-", "s--", "^:", "d-."]
    counts = []
    for colour, (name, record) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4,
                                      records.items()):
        if not record.get("paths") or "token_counts" not in record:
            raise ValueError(f"{name}: a record holds 'token_counts' and 'paths' {{path: [ms]}}")
        tag = name.removeprefix("latency-cpu-").removesuffix(".json")
        for style, (path, median_ms) in zip(styles * 4, record["paths"].items()):
            axes.plot(record["token_counts"], [ms / median_ms[0] for ms in median_ms], style,
                      color=colour, label=f"{tag}: {path}")
        counts = sorted(set(counts) | set(record["token_counts"]))
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_title("Checking cost t(k)/t(1) of the recorded CPUs")
    axes.set_ylabel("t(k) / t(1)")
    _token_count_axis(axes, counts)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def _token_count_axis(axes, counts) -> None:
    """The x axis of every latency panel: k on a log-2 scale, a tick per measured k up to 8 and
    at the powers of two beyond (k = 9..16 one by one would overlap on a log axis)."""
    axes.set_xscale("log", base=2)
    ticks = [k for k in counts if k <= 8 or k & (k - 1) == 0 or k == counts[-1]]
    axes.set_xticks(ticks, [str(k) for k in ticks])
    axes.set_xticks([k for k in counts if k not in ticks], minor=True)
    axes.xaxis.set_minor_formatter(plt.NullFormatter())
    axes.set_xlabel("new tokens scored in one forward, k")
    axes.grid(True, which="both", alpha=0.3)


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
