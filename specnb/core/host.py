"""Reading several device tensors on the host at once: `to_host(a=..., b=...)` -> lists.

Each `.tolist()` of a GPU tensor makes the host wait for the device. The loop reads what it
needs for its trace once per iteration: all the tensors are copied into pinned host memory
without waiting, then one synchronization, then the lists. On a CPU the tensors are already on
the host and nothing waits.

    to_host(num_accepted=torch.tensor([2, 0]), kept=torch.tensor([3, 1]))
    -> {"num_accepted": [2, 0], "kept": [3, 1]}

It does not decide what to read (the loop's `Run.record` does).
"""

import torch


def to_host(**tensors: torch.Tensor) -> dict:
    """{name: tensor.tolist()}, with at most one device synchronization for all of them."""
    devices = {t.device for t in tensors.values()}
    if any(device.type not in ("cpu", "cuda") for device in devices) or \
            all(device.type == "cpu" for device in devices):  # nothing to overlap (or no events)
        return {name: t.tolist() for name, t in tensors.items()}
    copies = {}
    for name, tensor in tensors.items():
        buffer = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        copies[name] = buffer.copy_(tensor, non_blocking=True)
    for device in {d for d in devices if d.type == "cuda"}:
        torch.cuda.synchronize(device)  # the one wait: every copy above has landed
    return {name: buffer.tolist() for name, buffer in copies.items()}
