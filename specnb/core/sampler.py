"""Turning logits into probabilities, and probabilities into tokens, without host syncs.

`sample` draws one token per row by the *exponential race*: if E_v ~ Exp(1) independently,
then argmax_v p_v / E_v is distributed as Categorical(p). It is one elementwise op and one
argmax on the device, with no cumulative sums, no `.item()` and no Python branching, so a
whole batch is sampled in one call and a GPU never waits for the host.

It does not apply top-k / top-p; temperature is the only knob the package teaches.
"""

import math
import numbers
import os

import torch

from .host import reads_are_cheap

# The smallest and largest temperatures that float32 holds as normal numbers: a smaller T would
# round to 0 (0 / 0 = NaN) or be flushed to 0 on a GPU, a larger one to inf (-inf / inf = NaN).
# Clamping changes nothing else: at T = 1.2e-38 every logit gap wider than ~4e-38 is already
# infinite, i.e. the argmax, and at 3.4e38 every finite logit is already 0, i.e. uniform.
T_MIN, T_MAX = torch.finfo(torch.float32).tiny, torch.finfo(torch.float32).max


def checking(tensor: torch.Tensor, check) -> bool:
    """Whether to run input checks: as asked (True/False), else (None) always on the CPU, where
    a check costs no device sync, and on a GPU only in strict mode (SPECNB_STRICT=1)."""
    if check is not None:
        return bool(check)
    return reads_are_cheap(tensor.device) or os.environ.get("SPECNB_STRICT") == "1"


def check_temperature(temperature) -> float:
    """A finite real number >= 0 (0 means greedy); bools and strings are refused."""
    if isinstance(temperature, torch.Tensor) and temperature.dim() == 0 \
            and temperature.dtype != torch.bool:
        temperature = float(temperature)
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got "
                         f"{temperature!r}")
    return float(temperature)


def logits_to_probs(logits: torch.Tensor, temperature: float, *, check=None) -> torch.Tensor:
    """softmax(logits / T) in float32; T = 0 gives the one-hot of the argmax (greedy).

    Greedy as a one-hot distribution lets one `verify` serve greedy and sampled decoding alike:
    with one-hot p and q it accepts exactly when the draft equals the target's argmax.
    A row whose maximum is not finite (a NaN, a +inf, or every logit -inf) has no distribution:
    it becomes NaN in both cases, and `check` (default: on the CPU, see `checking`) refuses it.
    """
    temperature = check_temperature(temperature)
    if not isinstance(logits, torch.Tensor) or logits.dim() < 1 or not logits.is_floating_point():
        raise ValueError(f"logits must be a float tensor [..., V], got "
                         f"{_describe(logits)}")
    logits = logits.float()
    row_max = logits.amax(dim=-1, keepdim=True)  # NaN if any NaN; +-inf if a +inf / all -inf
    if checking(logits, check) and logits.numel() and not bool(torch.isfinite(row_max).all()):
        raise ValueError("logits hold NaN or +inf, or a row that is all -inf: no distribution "
                         "can be made from such a row")
    broken = row_max - row_max  # [..., 1]: 0 where the row is usable, NaN where it is not
    if temperature == 0.0:
        return torch.zeros_like(logits).scatter_(-1, argmax(logits).unsqueeze(-1), 1.0) + broken
    # Subtract the max first: every value is then <= 0, so a tiny T sends the others to -inf
    # (probability 0) instead of overflowing to inf - inf = NaN. T -> 0 approaches the argmax.
    shifted = logits - row_max
    return torch.softmax(shifted / min(max(temperature, T_MIN), T_MAX), dim=-1)


def greedy_tokens(logits: torch.Tensor) -> torch.Tensor:
    """`[A, V]` logits -> `[A]`: the argmax, -1 for a row with no distribution (a NaN, a +inf,
    all -inf). The same tokens as `draw(logits_to_probs(logits, 0), 0)`, without the one-hot."""
    usable = torch.isfinite(logits.amax(dim=-1))
    return torch.where(usable, logits.argmax(dim=-1), -1)


def sample(probs: torch.Tensor, *, generator: torch.Generator | None = None,
           check: bool = True) -> torch.Tensor:
    """Sample one token per row: `[B, V]` probabilities -> `[B]` int64 ids.

    Example: probs [[0, 1, 0]] -> [1] whatever the noise (a zero never wins the race).
    Rows need not sum to 1 (the race is scale-invariant). `check=True` refuses rows that are
    NaN, negative or all zero; the decoding loop, which builds its own probabilities, skips it
    (no host sync), and such a row then gives -1, never a silent token 0.
    """
    _check_probs(probs, check=check)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got "
                         f"{type(generator).__name__}")
    race = torch.empty_like(probs, dtype=torch.float32).exponential_(generator=generator)
    # Exp(1) can round to 0; a tiny floor keeps p/E finite so 0/0 never makes a NaN winner.
    race.clamp_min_(torch.finfo(torch.float32).tiny)
    return _winner(probs.float() / race)


ARGMAX_CHUNK = 256


def argmax(scores: torch.Tensor) -> torch.Tensor:
    """`scores.argmax(-1)`, the same index (the first maximum; the first NaN if any), found in
    two passes: the maximum of each 256-wide chunk (a vectorised reduction), then the argmax
    inside the best chunk. On a CPU, torch's own argmax over a 49 152-token vocabulary costs
    2-7x more than this (tests/test_greedy_verify.py holds the equality)."""
    size = scores.shape[-1]
    chunks = size // ARGMAX_CHUNK
    if chunks < 2:
        return scores.argmax(-1)
    body = scores[..., :chunks * ARGMAX_CHUNK].unflatten(-1, (chunks, ARGMAX_CHUNK))
    best_chunk = body.amax(-1).argmax(-1)  # NaN is a chunk's max, and argmax's choice
    inside = body.gather(-2, best_chunk[..., None, None].expand(
        *best_chunk.shape, 1, ARGMAX_CHUNK)).squeeze(-2).argmax(-1)
    ids = best_chunk * ARGMAX_CHUNK + inside
    if size > chunks * ARGMAX_CHUNK:  # the last, shorter chunk wins only if strictly better
        tail = scores[..., chunks * ARGMAX_CHUNK:]
        tail_ids = tail.argmax(-1)
        tail_best = tail.gather(-1, tail_ids.unsqueeze(-1)).squeeze(-1)
        best = scores.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        later = (tail_best > best) | (tail_best.isnan() & ~best.isnan())
        ids = torch.where(later, tail_ids + chunks * ARGMAX_CHUNK, ids)
    return ids


def greedy_ids(logits: torch.Tensor, *, check=None) -> torch.Tensor:
    """`[..., V]` logits -> `[...]` argmax ids: where `logits_to_probs(logits, 0)` puts its 1,
    without building the V-wide one-hots (greedy verification only compares ids). A row with no
    distribution (NaN, +inf, all -inf) is refused when checking, as there, else gives -1."""
    if not isinstance(logits, torch.Tensor) or logits.dim() < 1 or not logits.is_floating_point():
        raise ValueError(f"logits must be a float tensor [..., V], got {_describe(logits)}")
    ids = argmax(logits)  # a NaN counts as the maximum, so a broken row shows in `best`
    best = logits.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    usable = torch.isfinite(best)
    if checking(logits, check) and logits.numel():
        if not bool(usable.all()):
            raise ValueError("logits hold NaN or +inf, or a row that is all -inf: no "
                             "distribution can be made from such a row")
        return ids  # every row usable
    return torch.where(usable, ids, -1)


def draw(probs: torch.Tensor, temperature: float, *,
         generator: torch.Generator | None = None, check=None) -> torch.Tensor:
    """`[B, V] -> [B]`: the argmax when greedy (temperature 0), else a sample; a row with no
    token to give is refused when checking (default: on the CPU), else gives -1."""
    temperature = check_temperature(temperature)
    _check_probs(probs, check=checking(probs, check) if isinstance(probs, torch.Tensor) else True)
    if temperature == 0.0:
        return _winner(probs.float())
    return sample(probs, generator=generator, check=False)


def _winner(scores: torch.Tensor) -> torch.Tensor:
    """argmax per row, or -1 where the best score is not > 0 (NaN, all zero): on the device,
    no host sync, and an impossible token is never passed off as token 0."""
    winner = argmax(scores)
    best = scores.gather(-1, winner.unsqueeze(-1)).squeeze(-1)
    return torch.where(best > 0, winner, -1)


def _check_probs(probs, *, check: bool) -> None:
    if not isinstance(probs, torch.Tensor) or probs.dim() != 2:
        raise ValueError(f"probs must be a tensor of shape [B, V], got {_describe(probs)}")
    if check and probs.numel():
        if not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
            raise ValueError("probs holds NaN, infinite or negative values")
        if not bool((probs.sum(-1) > 0).all()):
            raise ValueError("a row of probs is all zero: there is no token to sample")


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} {list(value.shape)}"
    return type(value).__name__
