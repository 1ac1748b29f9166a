"""Forward latency against tokens per forward: one model, one sequence, k new tokens at a time.

`measure_forward_latency` times one model forward that scores k new tokens on top of a fixed,
already cached prefix, for several k (warm-up first, then the median of repeats, with the k
interleaved so that a slow moment of the machine does not land on one k only). It returns
plain data: `specnb.viz.latency.plot_forward_latency` draws it, and `python -m specnb.bench`
stores it in its record.

It deliberately does not batch several sequences (the k tokens all belong to one sequence, as
in verifying k drafted tokens; `specnb.bench.batch.measure_batch_forward` times B rows) and
draws nothing.

Example: token_counts [1, 8] -> {"token_counts": [1, 8], "median_ms": [t1, t8], ...}, where
t8 / t1 is far below 8 while a forward is memory-bound.
"""

import statistics

import torch

from .kv import CachedLM


def measure_forward_latency(model, prefix_len: int, token_counts, repeats: int = 5,
                            generator=None, warmup: int = 1) -> dict:
    """Median milliseconds of one forward scoring k new tokens after a cached `prefix_len` prefix.

    Token ids are random (latency does not depend on which tokens they are). Every forward
    returns the logits of all k new positions, as verifying k drafted tokens needs. Returns
    {"token_counts": [k], "median_ms": [ms], "ms_per_token": [ms / k], "samples_ms": [[ms]],
     "prefix_len", "repeats", "device", "dtype"}.
    """
    token_counts = [int(k) for k in token_counts]
    if not token_counts or min(token_counts) < 1:
        raise ValueError(f"token_counts must be a non-empty list of integers >= 1, "
                         f"got {token_counts}")
    if int(prefix_len) != prefix_len or prefix_len < 1:
        raise ValueError(f"prefix_len must be an integer >= 1, got {prefix_len}")
    if int(repeats) != repeats or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats}")
    if int(warmup) != warmup or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup}")
    lm = CachedLM(model)
    context = lm.max_positions
    if context is not None and prefix_len + max(token_counts) > context:
        raise ValueError(f"prefix_len + max(token_counts) = {prefix_len + max(token_counts)} "
                         f"exceeds the model's context of {context}")
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    prefix = torch.randint(0, lm.vocab_size, (prefix_len,), generator=generator).tolist()
    new_tokens = {k: torch.randint(0, lm.vocab_size, (k,), generator=generator).tolist()
                  for k in token_counts}
    lm.logits(prefix, keep=1)  # fill the cache with the prefix once

    samples_ms = {k: [] for k in token_counts}
    for round_index in range(warmup + repeats):
        for k in token_counts:  # interleaved: each round visits every k once
            lm.logits(prefix + new_tokens[k], keep=k)  # reuses the prefix, runs exactly k tokens
            assert lm.log.num_tokens[-1] == k
            if round_index >= warmup:
                samples_ms[k].append(lm.log.seconds[-1] * 1e3)

    median_ms = [statistics.median(samples_ms[k]) for k in token_counts]
    return {"token_counts": token_counts, "median_ms": median_ms,
            "ms_per_token": [ms / k for ms, k in zip(median_ms, token_counts)],
            "samples_ms": [samples_ms[k] for k in token_counts], "prefix_len": int(prefix_len),
            "repeats": int(repeats), "device": str(lm.device),
            "dtype": str(next(model.parameters()).dtype).replace("torch.", "")}
