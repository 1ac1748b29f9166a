"""Turning logits into probabilities, and probabilities into tokens, without host syncs.

`sample` draws one token per row by the *exponential race*: if E_v ~ Exp(1) independently,
then argmax_v p_v / E_v is distributed as Categorical(p). It is one elementwise op and one
argmax on the device, with no cumulative sums, no `.item()` and no Python branching, so a
whole batch is sampled in one call and a GPU never waits for the host.

It does not apply top-k / top-p; temperature is the only knob the package teaches.
"""

import torch


def check_temperature(temperature: float) -> float:
    """Temperature must be a finite number >= 0 (0 means greedy)."""
    temperature = float(temperature)
    if not temperature >= 0 or temperature == float("inf"):
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature}")
    return temperature


def logits_to_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T) in float32; T = 0 gives the one-hot of the argmax (greedy).

    Greedy as a one-hot distribution lets one `verify` serve greedy and sampled decoding alike:
    with one-hot p and q it accepts exactly when the draft equals the target's argmax.
    """
    temperature = check_temperature(temperature)
    logits = logits.float()
    if temperature == 0.0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    return torch.softmax(logits / temperature, dim=-1)


def sample(probs: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Sample one token per row: `[B, V]` probabilities -> `[B]` int64 ids.

    Example: probs [[0, 1, 0]] -> [1] whatever the noise (a zero never wins the race).
    """
    if probs.dim() != 2:
        raise ValueError(f"probs must have shape [B, V], got {tuple(probs.shape)}")
    race = torch.empty_like(probs, dtype=torch.float32).exponential_(generator=generator)
    # Exp(1) can round to 0; a tiny floor keeps p/E finite so 0/0 never makes a NaN winner.
    race.clamp_min_(torch.finfo(torch.float32).tiny)
    return (probs.float() / race).argmax(dim=-1)


def draw(probs: torch.Tensor, temperature: float, *,
         generator: torch.Generator | None = None) -> torch.Tensor:
    """`[B, V] -> [B]`: the argmax when greedy (temperature 0), else a sample."""
    temperature = check_temperature(temperature)
    return probs.argmax(dim=-1) if temperature == 0.0 else sample(probs, generator=generator)
