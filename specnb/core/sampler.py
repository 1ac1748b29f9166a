"""Turning logits into probabilities, and probabilities into tokens, without host syncs.

`sample` draws one token per row by the *exponential race*: if E_v ~ Exp(1) independently,
then argmax_v p_v / E_v is distributed as Categorical(p). It is one elementwise op and one
argmax on the device, with no cumulative sums, no `.item()` and no Python branching, so a
whole batch is sampled in one call and a GPU never waits for the host.

It does not apply top-k / top-p; temperature is the only knob the package teaches.
"""

import math
import numbers

import torch


def check_temperature(temperature) -> float:
    """A finite real number >= 0 (0 means greedy); bools and strings are refused."""
    if isinstance(temperature, torch.Tensor) and temperature.dim() == 0:
        temperature = float(temperature)
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got "
                         f"{temperature!r}")
    return float(temperature)


def logits_to_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T) in float32; T = 0 gives the one-hot of the argmax (greedy).

    Greedy as a one-hot distribution lets one `verify` serve greedy and sampled decoding alike:
    with one-hot p and q it accepts exactly when the draft equals the target's argmax.
    """
    temperature = check_temperature(temperature)
    logits = logits.float()
    if temperature == 0.0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    # Subtract the max first: every value is then <= 0, so a tiny T sends the others to -inf
    # (probability 0) instead of overflowing to inf - inf = NaN. T -> 0 approaches the argmax.
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    return torch.softmax(shifted / temperature, dim=-1)


def sample(probs: torch.Tensor, *, generator: torch.Generator | None = None,
           check: bool = True) -> torch.Tensor:
    """Sample one token per row: `[B, V]` probabilities -> `[B]` int64 ids.

    Example: probs [[0, 1, 0]] -> [1] whatever the noise (a zero never wins the race).
    `check=True` refuses rows that are NaN, negative or all zero (they would silently become
    token 0); the decoding loop, which builds its own probabilities, skips it (no host sync).
    """
    if not isinstance(probs, torch.Tensor) or probs.dim() != 2:
        raise ValueError(f"probs must be a tensor of shape [B, V], got "
                         f"{tuple(probs.shape) if isinstance(probs, torch.Tensor) else type(probs)}")
    if check and probs.numel():
        if not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
            raise ValueError("probs holds NaN, infinite or negative values")
        if not bool((probs.sum(-1) > 0).all()):
            raise ValueError("a row of probs is all zero: there is no token to sample")
    race = torch.empty_like(probs, dtype=torch.float32).exponential_(generator=generator)
    # Exp(1) can round to 0; a tiny floor keeps p/E finite so 0/0 never makes a NaN winner.
    race.clamp_min_(torch.finfo(torch.float32).tiny)
    return (probs.float() / race).argmax(dim=-1)


def draw(probs: torch.Tensor, temperature: float, *,
         generator: torch.Generator | None = None) -> torch.Tensor:
    """`[B, V] -> [B]`: the argmax when greedy (temperature 0), else a sample."""
    temperature = check_temperature(temperature)
    return probs.argmax(dim=-1) if temperature == 0.0 else sample(probs, generator=generator,
                                                                   check=False)
