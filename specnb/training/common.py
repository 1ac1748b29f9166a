"""What both training commands share: the learning-rate schedule and the training.json record.

`warmup_cosine(optimizer, total_steps)` warms up linearly over the first 5 % of the steps, then
decays with a half cosine to 0. `write_record(out, command, args, argv, started, device, ...)`
writes `out/training.json` (how the files next to it were made: the command line, the counts,
the seconds and the hardware) and prints it. `add_device_arguments(parser)` gives both
commands `--device` and `--dtype` (`check_device_arguments` checks them). It trains nothing.

Example: total_steps 100 -> factor 0.2 at step 0, 0.996 at step 4, 0.5 at step 50.
"""

import json
import math
import platform
import sys
import time

import torch

from ..models.fast_path import cpu_identity
from ..models.loading import as_device


def warmup_cosine(optimizer, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over max(1, total_steps // 20) steps, then cosine decay to 0."""
    warmup = max(1, total_steps // 20)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(
        (s + 1) / warmup, 0.5 * (1 + math.cos(math.pi * min(1.0, s / total_steps)))))


def add_device_arguments(parser) -> None:
    """--device (default: cuda when available, else cpu) and --dtype (default float32)."""
    parser.add_argument("--device", default=None,
                        help="where the target runs: cpu, cuda, cuda:N (default: cuda when "
                             "available, else cpu)")
    # float32 also on a GPU: the head reads the features of the target as students run it (a
    # float32 CPU model), and bfloat16 features differ from those in the third digit.
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="the target's dtype (default float32, as on a CPU)")


def check_device_arguments(parser, args) -> None:
    """--device names a device that exists here: a clear error before the model loads."""
    try:
        as_device(args.device)
    except ValueError as error:
        parser.error(f"--device: {error}")


def write_record(out, command: str, args, argv, started: float, device, **fields) -> dict:
    """{"command", **fields, "seconds", "hardware", "cpu", "torch", "args"} -> out/training.json
    ("cpu": the host CPU's model and instruction set, named in every record, also beside a GPU)."""
    record = {
        "command": f"python -m {command} " + " ".join(sys.argv[1:] if argv is None else argv),
        **fields,
        "seconds": round(time.perf_counter() - started, 1),
        "hardware": f"{platform.processor() or platform.machine()}, "
                    f"{torch.get_num_threads()} threads, device {device}",
        "cpu": cpu_identity(),
        "torch": torch.__version__, "args": {k: str(v) for k, v in vars(args).items()},
    }
    (out / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return record
