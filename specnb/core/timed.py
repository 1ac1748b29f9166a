"""What every cache wrapper shares: the model, its keyword names, and a log of its forwards;
and `timed`, the stopwatch the benchmarks and the assignments use.

`TimedModel` counts and times each forward (synchronizing on a GPU, so the clock measures the
work, not the launch); `crop_cache` drops trailing positions from a `DynamicCache` the same way
on every transformers 5.x release. Neither feeds tokens: `BatchedCachedLM` does.
"""

import inspect
import statistics
import time
from dataclasses import dataclass, field

import torch


def crop_cache(cache, num_tokens_to_remove: int) -> None:
    """Drop the last `num_tokens_to_remove` positions from a `DynamicCache`.

    `DynamicCache.crop` changed meaning within transformers 5.x: older releases read a positive
    argument as the length to keep, newer ones refuse it and take a negative count to remove.
    A negative count means "remove that many" in both, so that is all we ever pass (and never 0,
    which older releases read as "keep nothing").
    """
    if num_tokens_to_remove < 0:
        raise ValueError(f"num_tokens_to_remove must be >= 0, got {num_tokens_to_remove}")
    if num_tokens_to_remove > 0:
        cache.crop(-num_tokens_to_remove)


@dataclass
class ForwardLog:
    """What one forward cost: how many tokens it processed and how long it took."""

    num_tokens: list = field(default_factory=list)
    seconds: list = field(default_factory=list)


class TimedModel:
    """What the cache wrappers share: the model, its keyword names, and the log of forwards.

    It switches the model to eval mode (dropout off: a cache of noisy keys would be useless);
    the methods put the caller's mode back when they finish; direct users restore it.
    """

    def __init__(self, model):
        if not callable(getattr(model, "get_output_embeddings", None)):
            raise ValueError(f"model must be a transformers causal LM (e.g. from "
                             f"specnb.load_model), got {type(model).__name__}")
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        params = inspect.signature(model.forward).parameters
        # transformers 5.24 renamed `past_key_values` to `cache`; accept either release.
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._can_keep = "logits_to_keep" in params
        self.log = ForwardLog()

    @property
    def num_forwards(self) -> int:
        return len(self.log.seconds)

    @property
    def forward_seconds(self) -> float:
        return sum(self.log.seconds)

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


# Every median `timed` has returned in this process, in order: assignment 05's check of a
# timing table asks that its seconds were measured here, in the run being graded. Beside it,
# each returned run's mean target seconds per decoding step (None for a result without a
# trace): its checking costs must be ratios of two of them.
MEASURED: list = []
MEASURED_STEPS: list = []


def mean_step_seconds(result) -> float | None:
    """Mean target seconds per decoding step (`theory.decoding_step_seconds`: the prompt's
    forward left out); None for a result without a trace or without a decoding step."""
    from ..theory import decoding_step_seconds  # plain arithmetic; theory imports no model code

    if not getattr(result, "trace", None):
        return None
    steps = decoding_step_seconds(result)
    return sum(steps) / len(steps) if steps else None


def timed(function, repeats: int, device):
    """Run `function` repeats times; return (last result, median seconds, spread)."""
    seconds = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = function()
            end.record()
            torch.cuda.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
        else:
            start = time.perf_counter()
            result = function()
            seconds.append(time.perf_counter() - start)
    MEASURED.append(statistics.median(seconds))
    MEASURED_STEPS.append(mean_step_seconds(result))
    return result, MEASURED[-1], max(seconds) - min(seconds)
