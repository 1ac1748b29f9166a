"""What both training commands share: the learning-rate schedule and the training.json record.

`warmup_cosine(optimizer, total_steps)` warms up linearly over the first 5 % of the steps, then
decays with a half cosine to 0. `write_record(out, command, args, argv, started, device, ...)`
writes `out/training.json` (how the files next to it were made: the command line, the counts,
the seconds and the hardware) and prints it. It trains nothing itself.

Example: total_steps 100 -> factor 0.2 at step 0, 0.996 at step 4, 0.5 at step 50.
"""

import json
import math
import platform
import sys
import time

import torch


def warmup_cosine(optimizer, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over max(1, total_steps // 20) steps, then cosine decay to 0."""
    warmup = max(1, total_steps // 20)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(
        (s + 1) / warmup, 0.5 * (1 + math.cos(math.pi * min(1.0, s / total_steps)))))


def write_record(out, command: str, args, argv, started: float, device, **fields) -> dict:
    """{"command", **fields, "seconds", "hardware", "torch", "args"} -> out/training.json."""
    record = {
        "command": f"python -m {command} " + " ".join(sys.argv[1:] if argv is None else argv),
        **fields,
        "seconds": round(time.perf_counter() - started, 1),
        "hardware": f"{platform.processor() or platform.machine()}, "
                    f"{torch.get_num_threads()} threads, device {device}",
        "torch": torch.__version__, "args": {k: str(v) for k, v in vars(args).items()},
    }
    (out / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return record
