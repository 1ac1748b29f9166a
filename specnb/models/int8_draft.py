"""Int8 weights for a draft head on the CPU: a quarter of the bytes it reads per step.

A draft head drafts one token per forward, so each step reads every weight once and does
almost no arithmetic; the target's own forward between two proposals pushes the head's weights
out of the CPU's caches every iteration, so they come from memory each time. Where memory, not
arithmetic, limits a step, int8 weights make it cheaper. The target stays in float32:
verification decides every emitted token from the target's law, so the draft may trade a little
agreement for speed and generation stays exact (the acceptance rule is exact for any draft law
q; greedy outputs unchanged, tests/test_int8_draft.py). The trade is measured, not assumed:
`specnb.models.tree_shape` weighs the int8 copy against the float one with each one's own
acceptance by rank (`data/head/ranks.json`, "int8") and its cost on this machine; the
benchmarks with the int8 head are data/results/bench-cpu-*int8*.json (RESULTS.md).

`Int8Linear` is an `nn.Linear` holding the very same weight Parameter plus an int8 copy,
symmetric per output channel (one scale per row of the weight, zero point 0), run by PyTorch's
dynamic quantized linear (activations quantized per call, accumulation in int32, float32 out).
It runs the float kernel where int8 does not apply (gradients wanted, not float32 on the CPU).
`int8_copy(module)` returns a copy of a head whose linears are `Int8Linear`, sharing every
parameter with the original, which keeps drafting in float32.

The quantized-tensor API this uses is deprecated in PyTorch (it still ships in 2.13); where it
is gone, `why_not_int8` says so and the float head is used.
"""

import copy
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from .fast_path import CopiedWeightLinear


def why_not_int8(module) -> str | None:
    """None if int8 drafting applies to `module`, else the reason as a sentence fragment."""
    parameter = next(module.parameters())
    if parameter.device.type != "cpu":
        return f"the module is on {parameter.device}; int8 drafting is for the CPU"
    if parameter.dtype != torch.float32:
        return f"the module is {parameter.dtype}; int8 drafting quantizes float32 weights"
    ops = torch.ops.quantized
    if not all(hasattr(ops, name) for name in ("linear_prepack", "linear_dynamic")) or \
            not hasattr(torch, "quantize_per_channel"):
        return f"torch {torch.__version__} has no dynamic quantized linear"
    if torch.backends.quantized.engine == "none":
        return "this torch has no quantized engine"
    return None


def quantize_rows(weight: torch.Tensor) -> torch.Tensor:
    """`weight [out, in]` as a qint8 tensor, one scale per output row: round(w / s) with
    s = max|row| / 127 (an all-zero row gets s = 1)."""
    scale = weight.abs().amax(1).double() / 127
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    with warnings.catch_warnings():  # the deprecation notice of quantized tensors (docstring)
        warnings.simplefilter("ignore", UserWarning)
        return torch.quantize_per_channel(weight, scale, torch.zeros_like(scale, dtype=torch.long),
                                          axis=0, dtype=torch.qint8)


class Int8Linear(CopiedWeightLinear):
    """`linear`'s own weight and bias, run with an int8 copy of the weight (module docstring)."""

    def _pack(self, tensors):
        weight, *bias = tensors
        return torch.ops.quantized.linear_prepack(
            quantize_rows(weight.detach().contiguous()), bias[0].detach().float() if bias else None)

    def forward(self, x):
        if self._float_only(x):
            return F.linear(x, self.weight, self.bias)
        # reduce_range: 7-bit activations, as PyTorch's own dynamic linear does on x86 (its
        # int8 dot products could otherwise saturate their 16-bit intermediate sums)
        return torch.ops.quantized.linear_dynamic(x.contiguous(), self._packed_copy(), True)


def int8_copy(module):
    """A copy of `module` whose linears are `Int8Linear` over the very same Parameters (the
    original is untouched); raises ValueError where int8 does not apply (`why_not_int8`)."""
    reason = why_not_int8(module)
    if reason is not None:
        raise ValueError(f"int8 drafting cannot apply: {reason}")
    twin = _twin(module)
    twin.specnb_cpu_path = "int8"
    return twin


def _twin(module):
    """A shallow copy of `module` (every tensor and attribute shared, also what is held outside
    the module tree, such as the head's reference to the target's embedding) with its own
    children: linears become `Int8Linear`, other children twins of their own."""
    twin = copy.copy(module)
    twin._parameters, twin._buffers = dict(module._parameters), dict(module._buffers)
    twin._modules = {name: None if child is None else
                     Int8Linear(child) if isinstance(child, nn.Linear) else _twin(child)
                     for name, child in module._modules.items()}
    return twin
