"""What every cache wrapper shares: the model, its keyword names, and a log of its forwards;
the device-aware clock the loops time sections with; and `timed`, the stopwatch the benchmarks
and the assignments use.

`TimedModel` counts and times each forward without waiting for the device: on a GPU a forward's
time is a pair of CUDA events, read once the step's one host read has passed them (a wait per
forward would add the syncs transformers' loops do not pay); on a CPU it is the plain clock.
`crop_cache` drops trailing positions from a `DynamicCache` the same way on every transformers
5.x release. Neither feeds tokens: `BatchedCachedLM` does.
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


def clock_start(device):
    """Start timing a section on `device`: a CUDA event recorded in its stream, else the clock."""
    if torch.device(device).type == "cuda":
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
    return time.perf_counter()


def clock_stop(device, start):
    """The section's span since `start`: seconds on a CPU, a pair of CUDA events on a GPU (no
    wait now; `seconds` reads it later)."""
    if torch.device(device).type == "cuda":
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        return start, end
    return time.perf_counter() - start


def seconds(span) -> float:
    """A span in seconds. A GPU span waits for its end event, which the loop's one host read per
    step has already passed, so reading it after that read costs nothing."""
    if isinstance(span, tuple):
        start, end = span
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    return float(span)


@dataclass
class ForwardLog:
    """What each forward cost: how many tokens it processed and its span (`seconds` reads
    them: floats; on a GPU each event pair is read once and kept as a float)."""

    num_tokens: list = field(default_factory=list)
    spans: list = field(default_factory=list)
    _read: int = 0  # spans[:_read] are floats already

    @property
    def seconds(self) -> list:
        for i in range(self._read, len(self.spans)):
            self.spans[i] = seconds(self.spans[i])
        self._read = len(self.spans)
        return self.spans


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
        return len(self.log.spans)

    @property
    def forward_seconds(self) -> float:
        return sum(self.log.seconds)


# Every median `timed` has returned in this process, in order: assignment 05's check, run in
# the learner's own kernel, tells them when a timing table's seconds were not measured there
# (typed). A grade does not rest on it: the grader times the cell itself (specnb.course.judge).
MEASURED: list = []


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
    return result, MEASURED[-1], max(seconds) - min(seconds)
