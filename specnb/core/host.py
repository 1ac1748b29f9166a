"""Reading device tensors on the host: the loop's one read per step, and a counter of reads.

Each `.tolist()`, `.item()` or `bool()` of a GPU tensor makes the host wait for the device. The
loop reads what it needs once per iteration, `to_host(a=..., b=...)`: every tensor is flattened
into one buffer, copied in one transfer, then split back into lists (one wait for all):

    to_host(num_accepted=torch.tensor([2, 0]), kept=torch.tensor([3, 1]))
    -> {"num_accepted": [2, 0], "kept": [3, 1]}

`reads_are_cheap(device)` says where a read costs no wait (the CPU): some checks and early exits
read only there. `HostReads` counts the reads a piece of code makes, by the specnb line that
makes them; `HostReads(as_accelerator=True)` runs the code as if reads were never cheap, so a
test on the CPU counts what a GPU would wait for (tests/test_host_reads.py).

It does not decide what to read (the loop's `Run.read_step` does).
"""

import collections
import sys
from pathlib import Path

import torch

# True while `HostReads(as_accelerator=True)` runs: every device counts as one where reads wait.
_EMULATED = [False]
SPECNB_ROOT = str(Path(__file__).resolve().parents[1])
READ_METHODS = ("tolist", "item", "__bool__", "__int__", "__float__", "__index__", "numpy",
                "nonzero", "cpu")


def reads_are_cheap(device) -> bool:
    """Whether reading a tensor of `device` on the host costs no wait for the device."""
    return torch.device(device).type == "cpu" and not _EMULATED[0]


def _nested(values: list, shape) -> list:
    """The flat `values` as nested lists of `shape` (what `tensor.tolist()` would give)."""
    if not shape:
        return values[0]
    if len(shape) == 1:
        return values
    step = len(values) // shape[0] if shape[0] else 0
    return [_nested(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def to_host(**tensors: torch.Tensor) -> dict:
    """{name: tensor.tolist()}, read in one transfer (one wait for the device, whatever the
    number of tensors). Integers and booleans come back as ints and bools, floats as floats."""
    if not tensors:
        return {}
    # float64 holds every int32 and every token id exactly; one dtype lets one copy move all.
    # (Apple's MPS has no float64: float32 holds ids and counts below 2^24 exactly.)
    devices = {t.device.type for t in tensors.values()}
    dtype = torch.float32 if "mps" in devices else torch.float64
    flat = torch.cat([t.detach().reshape(-1).to(dtype) for t in tensors.values()])
    values = flat.tolist()  # the one read
    out, start = {}, 0
    for name, tensor in tensors.items():
        part = values[start:start + tensor.numel()]
        start += tensor.numel()
        if tensor.dtype == torch.bool:
            part = [v != 0 for v in part]
        elif not tensor.is_floating_point():
            part = [int(v) for v in part]
        out[name] = _nested(part, tuple(tensor.shape))
    return out


class HostReads:
    """Count the host's reads of tensor values inside `with`, by the line making them (the
    specnb line, when specnb's code makes the read or calls what makes it).

    `reads` maps "file:line function .method" to a count; `total` sums them. Reads made inside
    transformers' own code (a model's forward) are counted apart in `outside`: they are the
    model's, paid by any loop that calls it. `as_accelerator=True` also makes
    `reads_are_cheap` answer False, so CPU-only reads (input checks, early exits) are skipped as
    they would be on a GPU. Indexing with a boolean mask counts as a read (its size is data)."""

    def __init__(self, *, as_accelerator: bool = False):
        self.as_accelerator = as_accelerator
        self.reads, self.outside = collections.Counter(), collections.Counter()
        self._originals = []

    @property
    def total(self) -> int:
        return sum(self.reads.values())

    def _where(self, method: str) -> None:
        # The first frame up the stack in specnb or in transformers says whose read it is.
        frame = sys._getframe(2)
        while frame is not None and not frame.f_code.co_filename.startswith(SPECNB_ROOT) and \
                "transformers" not in frame.f_code.co_filename:
            frame = frame.f_back
        counts = self.reads
        if frame is None:  # neither: the caller's own code, named as it is
            frame = sys._getframe(2)
        elif not frame.f_code.co_filename.startswith(SPECNB_ROOT):  # the model's own code
            counts = self.outside
            while frame is not None and not frame.f_code.co_filename.startswith(SPECNB_ROOT):
                frame = frame.f_back
            if frame is None:
                return
        where = Path(frame.f_code.co_filename)
        if frame.f_code.co_filename.startswith(SPECNB_ROOT):
            where = where.relative_to(Path(SPECNB_ROOT).parent)
        counts[f"{where.as_posix()}:{frame.f_lineno} {frame.f_code.co_name} .{method}"] += 1

    def _patch(self, owner, name: str, counted) -> None:
        self._originals.append((owner, name, getattr(owner, name)))
        setattr(owner, name, counted)

    def __enter__(self) -> "HostReads":
        counter = self
        for method in READ_METHODS:
            original = getattr(torch.Tensor, method)

            def counted(tensor, *args, _original=original, _method=method, **kwargs):
                counter._where(_method)
                return _original(tensor, *args, **kwargs)
            self._patch(torch.Tensor, method, counted)
        getitem = torch.Tensor.__getitem__

        def indexed(tensor, index):
            parts = index if isinstance(index, tuple) else (index,)
            if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                counter._where("[bool mask]")
            return getitem(tensor, index)
        self._patch(torch.Tensor, "__getitem__", indexed)
        self._emulated = _EMULATED[0]
        _EMULATED[0] = self.as_accelerator or _EMULATED[0]
        return self

    def __exit__(self, *exc) -> None:
        _EMULATED[0] = self._emulated
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()
