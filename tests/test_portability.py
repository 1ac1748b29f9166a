"""Outputs that must not depend on the CPU's float kernels (README, "Tests": on any CPU).

The toy pair is built in float64 and rounded once to float32, and `verify` races the unnormalized
residual, so samples from the toy pair have the same bits whatever vector kernels PyTorch runs:
checked here by re-running in subprocesses under ATEN_CPU_CAPABILITY=avx2 and =default, which
change a float32 softmax in its last bits (the control below shows they do).
"""

import os
import subprocess
import sys

import pytest
import torch

from specnb.core.verify import residual_distribution, residual_weights
from specnb.stats import pvalue_text

SAMPLES_FROM_THE_TOY_PAIR = """
import hashlib, torch
from specnb.core import sample, verify
from specnb.viz import distributions as dist
pair = dist.toy_pair(1.0, 1.0)
generator = torch.Generator().manual_seed(0)
rows, vocab = 50_000, 8
drafts = sample(pair.draft_probs.expand(rows, vocab), generator=generator).view(rows, 1)
bonus = sample(pair.target_probs.expand(rows, vocab), generator=generator).view(rows, 1)
tokens = verify(pair.target_probs.expand(rows, 1, vocab), pair.draft_probs.expand(rows, 1, vocab),
                drafts, bonus, generator=generator).tokens
print(hashlib.sha256(pair.target_probs.numpy().tobytes() + pair.draft_probs.numpy().tobytes()
                     + tokens.numpy().tobytes()).hexdigest())
"""
# The control: a float32 softmax of the same logits, which the kernels do round differently.
FLOAT32_SOFTMAX = """
import hashlib, torch
logits = torch.randn(4096, generator=torch.Generator().manual_seed(0))
print(hashlib.sha256(torch.softmax(logits, -1).numpy().tobytes()).hexdigest())
"""


def run_under(capability: str, code: str) -> str:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.slow
def test_samples_from_the_toy_pair_have_the_same_bits_under_every_kernel():
    native = run_under("", SAMPLES_FROM_THE_TOY_PAIR)
    assert run_under("avx2", SAMPLES_FROM_THE_TOY_PAIR) == native
    assert run_under("default", SAMPLES_FROM_THE_TOY_PAIR) == native


@pytest.mark.slow
def test_the_kernel_settings_do_change_a_float32_softmax():
    """Without this, the test above could pass because the settings changed nothing."""
    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("this CPU runs the default kernels already")
    assert run_under("default", FLOAT32_SOFTMAX) != run_under("", FLOAT32_SOFTMAX)


def test_residual_weights_are_the_residual_up_to_scale():
    p = torch.tensor([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [0.0, 1.0, 0.0]])
    q = torch.tensor([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5], [0.0, 1.0, 0.0]])
    weights = residual_weights(p, q)
    assert torch.equal(weights[0], (p[0] - q[0]).clamp_min(0))  # [0.3, 0, 0], not divided
    assert torch.equal(weights[1:], p[1:])  # p = q: no residual, p stands in
    normalized = weights / weights.sum(-1, keepdim=True)
    assert torch.allclose(normalized, residual_distribution(p, q))


@pytest.mark.parametrize("pvalue, level, text", [
    (0.43, 1e-3, "p > 0.001"), (1e-3, 1e-3, "p < 0.001"), (5e-4, 1e-3, "p < 0.001"),
    (3.07e-8, 1e-3, "p < 1e-06"), (3.57e-32, 1e-3, "p < 1e-12"), (0.0, 1e-3, "p < 1e-12"),
    (0.02, 0.05, "p < 0.05"), (1.0, 1e-3, "p > 0.001")])
def test_pvalue_text(pvalue, level, text):
    assert pvalue_text(pvalue, level) == text


@pytest.mark.parametrize("pvalue", [-0.1, 1.5, float("nan")])
def test_pvalue_text_refuses_what_is_no_pvalue(pvalue):
    with pytest.raises(ValueError, match="pvalue must lie in"):
        pvalue_text(pvalue)
